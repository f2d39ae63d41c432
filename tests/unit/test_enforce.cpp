// SPDX-License-Identifier: MIT
// The enforced replay (sim/enforce.hpp): the passes and the order it finds in a trace whose later passes
// show only what faulted, and the reads per pass with the kernel alone and with the planner's decisions,
// checked against the planner's own budget.
#include <algorithm>
#include <numeric>
#include <stdexcept>

// After the C++ headers: cmocka defines a fail() macro that breaks <sstream>.
#include "cmocka_cpp.hpp"

#include "sim/enforce.hpp"

extern "C" {
#include "core/plan.h"
}

using namespace llmcache::sim;

namespace {

// A 128 MiB weights file: beside a 64 MiB one, no cgroup it does not fit in has the room for the eight
// read-ahead windows of the stream (llc_plan_stream_room), and the daemon would read nothing ahead.
constexpr uint64_t blocks = 32768;
constexpr uint64_t MiB = 1 << 20;

// An engine's trace: the header and the last block read at load time, then passes over every block in
// order, of which the later ones show only every `shown`-th block (the rest stayed mapped), the
// second-to-last pass whole. Another, small file is read now and then.
Trace engine_trace(uint64_t passes, uint64_t shown)
{
	Trace t;
	uint64_t time = 1000;
	for (uint64_t b = 0; b < 4; b++)
		t.requests.push_back({request_key(0, b), time++});
	t.requests.push_back({request_key(0, blocks - 1), time++});
	for (uint64_t p = 0; p < passes; p++)
		for (uint64_t b = 0; b < blocks; b++) {
			if (p && p + 2 != passes && b % shown)
				continue;
			t.requests.push_back({request_key(0, b), time});
			time += 10;
			if (b % 4096 == 0)
				t.requests.push_back({request_key(1, b / 4096), time++});
		}
	return t;
}

EnforceConfig config(uint64_t limit)
{
	EnforceConfig c;
	c.limit = limit;
	c.anon = 20 * MiB;
	c.code = 4 * MiB;
	c.read_around = 4096; // exact counts: a fault reads its block only
	return c;
}

void enforce_loop__later_passes_partial__every_pass_counted_in_block_order(void **)
{
	const EnforceLoop loop = enforce_loop(engine_trace(6, 3));
	assert_int_equal(loop.file, 0);
	assert_int_equal(loop.blocks, blocks);
	assert_int_equal(loop.passes, 6); // the load's header and last block are no pass
	std::vector<uint32_t> ascending(blocks);
	std::iota(ascending.begin(), ascending.end(), 0);
	assert_true(loop.order == ascending);
}

void replay_enforced__loop_over_the_cache__stock_reads_it_whole_the_pins_leave_the_rest(void **)
{
	const EnforceLoop loop = enforce_loop(engine_trace(6, 2));
	const EnforceConfig c = config(144 * MiB); // 120 MiB of page cache for 128 MiB of weights

	const EnforceResult stock = replay_enforced(loop, EnforceMode::stock, c);
	assert_int_equal(stock.pinned, 0);
	assert_int_equal(stock.read_first, blocks);
	assert_int_equal(stock.read_later, 5 * blocks); // an LRU smaller than a loop hits nothing

	const EnforceResult module = replay_enforced(loop, EnforceMode::module, c);
	const llc_memcg_snapshot m{c.limit, c.anon, LLC_PLAN_CODE_KEPT, 0, 2 * LLC_PLAN_STREAM_UNIT};
	const uint64_t budget = llc_plan_mapped_budget(UINT64_MAX, &m, LLC_PLAN_CODE_KEPT, LLC_PLAN_STREAM_UNIT,
						       blocks * 4096);
	assert_true(budget > 0);
	assert_int_equal(module.pinned, budget / 4096);
	assert_int_equal(module.room, (c.limit - c.anon - c.code) / 4096 - module.pinned);
	assert_true(module.read_first >= blocks); // with the next pass's first blocks, read ahead at its end
	assert_int_equal(module.later_per_pass(loop.passes), double(blocks - module.pinned));
	assert_true(module.read_ahead > 0); // kmod/stream.c reads the stream ahead...
	assert_true(module.dropped > 0);    // ...and drops it once passed, as the daemon does

	const EnforceResult daemon = replay_enforced(loop, EnforceMode::daemon, c);
	assert_true(daemon.pinned > 0);
	assert_int_equal(daemon.later_per_pass(loop.passes), double(blocks - daemon.pinned));
	assert_true(daemon.read_ahead > 0); // the stream came from the prefetch...
	assert_true(daemon.dropped > 0);    // ...and went once passed
	assert_true(daemon.read_ahead <= daemon.read_first + daemon.read_later);
}

void replay_enforced__weights_fit__nothing_pinned_nothing_read_again(void **)
{
	const EnforceLoop loop = enforce_loop(engine_trace(4, 1));
	for (EnforceMode mode : {EnforceMode::stock, EnforceMode::module, EnforceMode::daemon}) {
		const EnforceResult r = replay_enforced(loop, mode, config(164 * MiB));
		assert_int_equal(r.pinned, 0);
		assert_int_equal(r.read_first, blocks);
		assert_int_equal(r.read_later, 0);
	}
}

void replay_enforced__read_around__a_fault_reads_its_window(void **)
{
	const EnforceLoop loop = enforce_loop(engine_trace(3, 1));
	EnforceConfig c = config(70 * MiB);
	c.read_around = 128 << 10; // 32 blocks: in a forward sweep, one fault in 16 brings the next ones in
	const EnforceResult r = replay_enforced(loop, EnforceMode::stock, c);
	assert_int_equal(r.read_first, blocks);
	assert_int_equal(r.read_later, 2 * blocks);
}

void replay_enforced__limit_within_the_engine__refused(void **)
{
	const EnforceLoop loop = enforce_loop(engine_trace(2, 1));
	bool thrown = false;
	try {
		replay_enforced(loop, EnforceMode::module, config(24 * MiB));
	} catch (const std::invalid_argument &) {
		thrown = true;
	}
	assert_true(thrown);
}

void enforce_loop__no_file_of_a_mebibyte__refused(void **)
{
	Trace t;
	for (uint64_t b = 0; b < 100; b++)
		t.requests.push_back({request_key(0, b), b});
	bool thrown = false;
	try {
		enforce_loop(t);
	} catch (const std::runtime_error &) {
		thrown = true;
	}
	assert_true(thrown);
}

void parse_enforce_mode__names__round_trip_and_unknown_refused(void **)
{
	for (EnforceMode m : {EnforceMode::stock, EnforceMode::module, EnforceMode::daemon})
		assert_true(parse_enforce_mode(enforce_mode_name(m)) == m);
	bool thrown = false;
	try {
		parse_enforce_mode("lru");
	} catch (const std::invalid_argument &) {
		thrown = true;
	}
	assert_true(thrown);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(enforce_loop__later_passes_partial__every_pass_counted_in_block_order),
		cmocka_unit_test(replay_enforced__loop_over_the_cache__stock_reads_it_whole_the_pins_leave_the_rest),
		cmocka_unit_test(replay_enforced__weights_fit__nothing_pinned_nothing_read_again),
		cmocka_unit_test(replay_enforced__read_around__a_fault_reads_its_window),
		cmocka_unit_test(replay_enforced__limit_within_the_engine__refused),
		cmocka_unit_test(enforce_loop__no_file_of_a_mebibyte__refused),
		cmocka_unit_test(parse_enforce_mode__names__round_trip_and_unknown_refused),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
