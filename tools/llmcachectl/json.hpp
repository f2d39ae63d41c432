// SPDX-License-Identifier: MIT
// The JSON that every llmcachectl --json prints (Documentation/admin-guide.md, "The status schema"):
// nlohmann_json's, so keys and strings are escaped and numbers keep their type.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace llmcache::kmod {

// JSON in the order the keys are set.
using Json = nlohmann::ordered_json;
// An unsigned decimal (a sysfs value, a daemon's status value) as a JSON number; name says whose value
// it is when it is not one (throws Failure, kmod.hpp).
Json json_count(const std::string &value, const std::string &name);
// One line of JSON; bytes that are not UTF-8 (a path may hold any) become U+FFFD.
inline std::string json_text(const Json &j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

} // namespace llmcache::kmod
