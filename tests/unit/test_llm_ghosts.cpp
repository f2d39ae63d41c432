// SPDX-License-Identifier: MIT
// The llm simulator policy's per-block rules (libllmcache/sim/llm.cpp's header comment): stale pins
// released, and ghosts that move the HOT target, against hand-computed results.
#include "cmocka_cpp.hpp"

#include <vector>

#include "include/uapi/llmcache.h"
#include "libllmcache/sim/policies.hpp"
#include "libllmcache/sim/policy.hpp"

using namespace llmcache::sim;

namespace {

struct Run {
	std::unique_ptr<Policy> policy;
	uint64_t hits = 0, t = 0;

	explicit Run(uint64_t capacity)
	{
		PolicyOptions opt; // HOT reserve 5%
		policy = make_llm_policy(capacity, opt);
	}
	bool touch(uint32_t file, uint64_t block)
	{
		Request r{request_key(file, block), t += 1000};
		bool hit = policy->access(r);
		hits += hit;
		return hit;
	}
	uint64_t sweep(uint32_t file, uint64_t first, uint64_t n)
	{
		uint64_t before = hits;
		for (uint64_t b = first; b < first + n; b++)
			touch(file, b);
		return hits - before;
	}
};

void llm_access__loop_head_read_one_row_per_token__stale_pins_released(void **)
{
	// A 300-block weights loop in a 100-block cache whose first 50 blocks are a token embedding: each
	// token reads block 0, one row (block t, never again), then the dense blocks 50-299. The plan pins
	// the lowest blocks, 0-99. While no pin is stale (tokens 1-3): block 0, row t (pinned since the first
	// pass), dense 50-99 = 52 hits. At token 4's start the rows untouched during tokens 1-3 (4-49) are
	// released and dense blocks 100-145 take their room. From then on: block 0 hits, row t misses (and
	// is admitted: it is below the loop's highest resident block), and the dense blocks fill the rest of
	// the cache but for block 0 and the rows read in the last three tokens and this one (1 to 4 blocks):
	// 1 + (100 - 1 - 4) to 1 + (100 - 1 - 1).
	Run run(100);
	run.sweep(0, 0, 300); // the first pass, a scan
	auto token = [&](uint64_t row) {
		uint64_t before = run.hits;
		run.touch(0, 0);
		run.touch(0, row);
		run.sweep(0, 50, 250);
		return run.hits - before;
	};
	for (uint64_t t = 1; t <= 3; t++)
		assert_int_equal(token(t), 52);
	token(4);
	for (uint64_t t = 5; t <= 40; t++)
		assert_in_range(token(t), 96, 99);
}

void llm_access__loop_read_whole_every_token__no_pin_released(void **)
{
	// The same cache and loop read whole every token: no pin goes stale, the plan's 100 pins hit.
	Run run(100);
	run.sweep(0, 0, 300);
	for (int t = 0; t < 20; t++)
		assert_int_equal(run.sweep(0, 0, 300), 100);
}

void llm_access__hot_set_larger_than_reserve_reused_within_token__target_grows(void **)
{
	// Eight far-apart lookups (eight HOT sequences) read round-robin 16 times before each pass of a
	// 150-block loop, in a 100-block cache. With the fixed HOT reserve (5 blocks: a sixth replaces the
	// least recently used) every lookup misses, and the loop keeps 95 pins. Here, in steady state:
	// - The pass: the loop's blocks 0-91 hit. Each refused block within 50 above its highest resident
	//   one pulls the HOT target down one (8 to 5), and while HOT holds more than the target, a missed
	//   loop block is admitted in place of the least recently used lookup: 92, 94, 96 and 98-149
	//   refused, 93, 95, 97 admitted, three lookups (h0-h2) dropped.
	// - Round 1: h0-h2 were last read 158 accesses ago, not within half the loop's period (278 / 2):
	//   no ghost hit, plain HOT misses in a 5-block LRU list, which then misses all eight.
	// - Round 2: h0-h2 were dropped 8 accesses ago: ghost hits, kept in HOT, the target up to 8, each
	//   taking the loop's highest pin (97, 95, 93); h3-h7 hit, and every later round hits.
	// So 128 - 8 - 3 = 117 lookup hits a token, and the loop's 92 pins (100 - 8) hit.
	Run run(100);
	auto token = [&](uint64_t &hot, uint64_t &loop) {
		uint64_t before = run.hits;
		for (int r = 0; r < 16; r++)
			for (uint64_t h = 0; h < 8; h++)
				run.touch(1, h * 1000);
		hot = run.hits - before;
		loop = run.sweep(0, 0, 150);
	};
	uint64_t hot = 0, loop = 0;
	run.sweep(0, 0, 150);
	for (int t = 0; t < 5; t++)
		token(hot, loop);
	for (int t = 0; t < 20; t++) {
		token(hot, loop);
		assert_int_equal(hot, 117);
		assert_int_equal(loop, 92);
	}
}

void llm_access__hot_lookups_reused_once_per_token__target_stays(void **)
{
	// The same eight lookups read once per token each: one dropped comes back a whole period (158
	// accesses) later, more than half of it, so a ghost hit changes nothing. The reserve's 5-block LRU
	// list misses them all, as with the fixed reserve, and the loop keeps its 95 pins.
	Run run(100);
	run.sweep(0, 0, 150);
	for (int t = 0; t < 25; t++) {
		uint64_t before = run.hits;
		for (uint64_t h = 0; h < 8; h++)
			run.touch(1, h * 1000);
		assert_int_equal(run.hits - before, 0);
		uint64_t loop = run.sweep(0, 0, 150);
		if (t >= 5)
			assert_int_equal(loop, 95);
	}
}

} // namespace

int main()
{
	const CMUnitTest tests[] = {
		cmocka_unit_test(llm_access__loop_head_read_one_row_per_token__stale_pins_released),
		cmocka_unit_test(llm_access__loop_read_whole_every_token__no_pin_released),
		cmocka_unit_test(llm_access__hot_set_larger_than_reserve_reused_within_token__target_grows),
		cmocka_unit_test(llm_access__hot_lookups_reused_once_per_token__target_stays),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
