// SPDX-License-Identifier: MIT
// make_policy(): the simulator's policies by name, llm first, then the baselines.
#include "sim/policies.hpp"

#include <stdexcept>

namespace llmcache::sim {

namespace {

using Factory = std::unique_ptr<Policy> (*)(uint64_t, const PolicyOptions &);

std::unique_ptr<Policy> make_belady(uint64_t capacity, const PolicyOptions &opt)
{
	return make_belady_policy(capacity, opt);
}

struct Entry {
	const char *name;
	Factory make;
};

constexpr Entry policies[] = {
	{"llm", make_llm_policy},     {"lru", make_lru_policy},   {"fifo", make_fifo_policy},
	{"clock", make_clock_policy}, {"mru", make_mru_policy},   {"arc", make_arc_policy},
	{"2q", make_two_q_policy},    {"lirs", make_lirs_policy}, {"lecar", make_lecar_policy},
	{"s3fifo", make_s3fifo_policy}, {"sieve", make_sieve_policy}, {"wtinylfu", make_wtinylfu_policy},
	{"ubm", make_ubm_policy},     {"belady", make_belady},
};

} // namespace

std::vector<std::string> policy_names()
{
	std::vector<std::string> names;
	for (const auto &e : policies)
		names.emplace_back(e.name);
	return names;
}

std::unique_ptr<Policy> make_policy(std::string_view name, uint64_t capacity, const PolicyOptions &opt)
{
	for (const auto &e : policies) {
		if (name != e.name)
			continue;
		if (capacity == 0)
			throw std::invalid_argument("policy " + std::string(name) +
						    ": cache capacity is 0 blocks; give at least one 4 KiB block");
		return e.make(capacity, opt);
	}
	std::string known;
	for (const auto &e : policies)
		known += std::string(known.empty() ? "" : ", ") + e.name;
	throw std::invalid_argument("unknown policy '" + std::string(name) + "'; known policies: " + known);
}

} // namespace llmcache::sim
