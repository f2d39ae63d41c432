// SPDX-License-Identifier: MIT
// json_count: the text of an unsigned decimal as a JSON number, or a Failure that names the value.
#include "json.hpp"

#include <cctype>
#include <cstdint>
#include <exception>

#include "kmod.hpp"

namespace llmcache::kmod {

Json json_count(const std::string &value, const std::string &name)
{
	size_t used = 0;
	uint64_t n = 0;
	try {
		n = std::stoull(value, &used, 10);
	} catch (const std::exception &) {
	}
	if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || used != value.size())
		throw Failure{name + " is '" + value + "', not an unsigned decimal: is llmcachectl older than what it reads?"};
	return n;
}

} // namespace llmcache::kmod
