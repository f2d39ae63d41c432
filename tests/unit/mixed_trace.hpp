// SPDX-License-Identifier: MIT
// A request stream for the policy tests: three files of `len` blocks, mostly sequential runs that
// wrap around (loops), some random jumps. rnd(n) draws from [0, n); req(block, file) makes a Request.
#pragma once

#include <cstdint>
#include <vector>

#include "libllmcache/sim/policy.hpp"

template <typename Rnd, typename Req>
std::vector<llmcache::sim::Request> mixed_trace(Rnd &&rnd, Req &&req, uint64_t len, size_t n)
{
	std::vector<llmcache::sim::Request> v;
	uint64_t next[3] = {};
	for (size_t i = 0; i < n; i++) {
		uint32_t f = uint32_t(rnd(3));
		uint64_t b = rnd(10) < 7 ? next[f] : rnd(len);
		next[f] = (b + 1) % len;
		v.push_back(req(b, f));
	}
	return v;
}
