// SPDX-License-Identifier: MIT
// One factory per simulator policy (one file each in this directory); make_policy() dispatches by name.
// Every factory throws std::invalid_argument for a capacity of 0 or above 2^30 blocks.
#pragma once

#include "sim/policy.hpp"

#include <cstdint>
#include <memory>
#include <utility>

namespace llmcache::sim {

std::unique_ptr<Policy> make_llm_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_lru_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_fifo_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_clock_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_mru_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_arc_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_two_q_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_lirs_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_lecar_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_s3fifo_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_sieve_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_wtinylfu_policy(uint64_t capacity, const PolicyOptions &opt);
std::unique_ptr<Policy> make_ubm_policy(uint64_t capacity, const PolicyOptions &opt);
// bypass: a miss whose next use is later than every cached block's is not admitted (the optimum for a
// cache that may bypass, and what "belady" in make_policy() uses); false gives classic MIN.
std::unique_ptr<Policy> make_belady_policy(uint64_t capacity, const PolicyOptions &opt, bool bypass = true);

// Test hooks for LeCaR: the experts' weights {lru, lfu}, and which history holds a key
// (0 none, 1 LRU's, 2 LFU's). p must come from make_lecar_policy().
std::pair<double, double> lecar_weights(const Policy &p);
int lecar_history_of(const Policy &p, uint64_t key);

} // namespace llmcache::sim
