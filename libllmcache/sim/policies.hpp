// SPDX-License-Identifier: MIT
// One factory per simulator policy; make_policy() in registry.cpp maps names to them.
#pragma once

#include "policy.hpp"

namespace llmcache::sim {

std::unique_ptr<Policy> make_llm_policy(uint64_t capacity, const PolicyOptions &opt);

} // namespace llmcache::sim
