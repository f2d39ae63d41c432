// SPDX-License-Identifier: MIT
// The KV policy's pure functions on hand-made pools and scores (kv/policy_*.hpp): the CPU pool's
// target, when an append spills and which pages go, the always-kept set and the top-k, the hit count,
// and which fetched pages come back; and the KV trace's format: a round trip, and clear errors (with
// the line) for truncated input, a wrong version and garbage.
#include "cmocka_cpp.hpp"

#include "kv/kv_trace.hpp"
#include "kv/policy_pool_update.hpp"
#include "kv/policy_select.hpp"
#include "kv/policy_spill.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>

using namespace llmcache::kv;
using namespace llmcache::kv::policy;

namespace {

// Pages of 4 tokens of 100 bytes each; sink 2, recent 4; budget 1000 bytes.
Params params()
{
	Params p;
	p.page_tokens = 4;
	p.sink_tokens = 2;
	p.recent_tokens = 4;
	p.cpu_budget = 1000;
	p.page_bytes = 100;
	p.device = true;
	return p;
}

// One layer of `pages` full pages, all in memory, hits as given.
PoolSnapshot pool(std::vector<std::vector<uint32_t>> hits)
{
	PoolSnapshot s;
	for (const auto &layer : hits) {
		s.pages.emplace_back();
		for (uint32_t h : layer)
			s.pages.back().push_back({4, h, true});
		s.tokens.push_back(4 * (uint32_t)layer.size());
		s.cpu_bytes += 100 * layer.size();
	}
	return s;
}

void cpu_target__no_device_or_no_beta__budget(void **)
{
	Params p = params();
	assert_int_equal(cpu_target(p, 0, 10000), 1000);
	assert_int_equal(cpu_target(p, 1, 1000), 500); // half of the KV
	assert_int_equal(cpu_target(p, 1, 10000), 1000); // never above the budget
	p.device = false;
	assert_int_equal(cpu_target(p, 1, 1000), 1000);
}

void must_spill__over_budget_or_full_page_over_target__spills(void **)
{
	const Params p = params();
	assert_false(must_spill_after_append(p, 1000, 1000, true));
	assert_true(must_spill_after_append(p, 1001, 1000, false));
	assert_false(must_spill_after_append(p, 900, 800, false)); // a split waits for a full page
	assert_true(must_spill_after_append(p, 900, 800, true));
}

void spill_victims__least_hit_then_oldest_then_lowest_layer__down_to_seven_eighths(void **)
{
	// Two layers of 8 pages (32 tokens): page 0 holds sinks, pages 7 the recent window (4 tokens).
	PoolSnapshot s = pool({{0, 5, 1, 0, 0, 2, 0, 0}, {0, 0, 3, 0, 0, 0, 0, 0}});
	// 1600 bytes against a target of 600: down to 525, 11 pages. The 8 pages never selected, oldest
	// first (lower layer first on a tie), then 1, 2 and 3 hits; page 1 of layer 0 (5 hits) stays.
	const auto v = choose_spill_victims(s, params(), 600);
	const std::vector<PageRef> want{{1, 1}, {0, 3}, {1, 3}, {0, 4}, {1, 4}, {1, 5}, {0, 6}, {1, 6}, {0, 2}, {0, 5}, {1, 2}};
	assert_int_equal(v.size(), want.size());
	for (size_t i = 0; i < want.size(); i++) {
		assert_int_equal(v[i].layer, want[i].layer);
		assert_int_equal(v[i].page, want[i].page);
	}
	for (const PageRef &r : v) // never a sink page, the recent page or a page already spilled
		assert_true(r.page != 0 && r.page != 7);
}

void spill_victims__pinned_partial_or_spilled__not_candidates(void **)
{
	PoolSnapshot s = pool({{0, 0, 0, 0}});
	s.pages[0][1].resident = false;
	s.cpu_bytes -= 100;
	s.pages[0][2].n_tokens = 3; // not full
	s.tokens[0] = 15;
	const auto v = choose_spill_victims(s, params(), 100);
	assert_int_equal(v.size(), 0); // page 0: sinks; 1: spilled; 2: not full (and recent); 3: recent
	Params p = params();
	p.sink_tokens = 0;
	assert_int_equal(choose_spill_victims(s, p, 100).size(), 1); // now page 0 may go
}

void copies_to_drop__resident_copies_most_hit_then_newest__victims_kept(void **)
{
	// Two layers of 6 pages with hits; copies on the device for pages 1-4 of each layer.
	PoolSnapshot s = pool({{0, 2, 5, 2, 1, 0}, {0, 5, 2, 0, 3, 0}});
	for (auto &layer : s.pages)
		for (uint32_t pg = 1; pg <= 4; pg++)
			layer[pg].device_copy = true;
	s.pages[1][4].resident = false; // spilled: its copy is what the device holds of it, not droppable
	const std::vector<PageRef> victims{{0, 3}};
	// The spill order reversed: most hit first, on a tie the newest page (then the highest layer):
	// 5 hits (page 2 of layer 0, page 1 of layer 1), 2 (page 2 of layer 1, page 1 of layer 0), 1, 0.
	// Never the victim (0, 3), the spilled page (1, 4), or a page without a copy (0 and 5).
	const auto d = choose_copies_to_drop(s, victims, 10);
	const std::vector<PageRef> want{{0, 2}, {1, 1}, {1, 2}, {0, 1}, {0, 4}, {1, 3}};
	assert_int_equal(d.size(), want.size());
	for (size_t i = 0; i < want.size(); i++) {
		assert_int_equal(d[i].layer, want[i].layer);
		assert_int_equal(d[i].page, want[i].page);
	}
	const auto two = choose_copies_to_drop(s, victims, 2);
	assert_int_equal(two.size(), 2);
	assert_true(two[0] == want[0] && two[1] == want[1]);
	assert_int_equal(choose_copies_to_drop(s, victims, 0).size(), 0);
}

void plan_select__sink_recent_and_k__as_documented(void **)
{
	SelectPlan p = plan_select(100, 4, 10, 30);
	assert_int_equal(p.sink, 4);
	assert_int_equal(p.recent_from, 90);
	assert_int_equal(p.k, 16);
	assert_true(p.scored(0, 8)); // tokens 4-7 are candidates
	assert_false(p.scored(0, 4));
	assert_false(p.scored(23, 4)); // 92-95: recent
	p = plan_select(10, 4, 10, 30); // everything is recent
	assert_int_equal(p.sink, 4);
	assert_int_equal(p.recent_from, 4);
	assert_int_equal(p.k, 20);
	p = plan_select(100, 4, 10, 5); // a budget below the always-kept set
	assert_int_equal(p.k, 0);
}

void select_tokens__top_k_ties_and_nan__ascending(void **)
{
	const SelectPlan p = plan_select(20, 2, 4, 9); // k = 3 among 2..15
	std::vector<csd_score> sc;
	for (uint32_t pos = 0; pos < 20; pos++)
		sc.push_back({pos, 0.f});
	sc[3].score = 5, sc[9].score = 7, sc[12].score = 5, sc[13].score = std::nanf("");
	sc[0].score = 100; // a sink: kept anyway, takes no top-k place
	const auto sel = select_tokens(p, sc);
	const std::vector<uint32_t> want{0, 1, 3, 9, 12, 16, 17, 18, 19};
	assert_int_equal(sel.size(), want.size());
	for (size_t i = 0; i < want.size(); i++)
		assert_int_equal(sel[i], want[i]);
	// No scores: only the always-kept tokens.
	assert_int_equal(select_tokens(p, {}).size(), 6);
}

void pages_hit__one_per_page_outside_kept__ascending(void **)
{
	const SelectPlan p = plan_select(20, 2, 4, 9);
	const std::vector<uint32_t> sel{0, 1, 3, 5, 6, 9, 16, 17};
	const auto h = pages_hit(p, sel, 4);
	assert_int_equal(h.size(), 3);
	assert_int_equal(h[0], 0); // token 3
	assert_int_equal(h[1], 1); // 5 and 6, once
	assert_int_equal(h[2], 2);
}

void promotions__room_under_floor_then_pairs_with_margin__most_hit_first(void **)
{
	const Params p = params();
	// 8 pages; 2, 4 and 6 spilled, with hits 9, 3, 5; resident evictable pages 1, 3, 5 with hits 1, 2, 7.
	std::vector<PageInfo> layer(8, PageInfo{4, 0, true});
	const uint32_t hits[8] = {0, 1, 9, 2, 3, 7, 5, 0};
	for (uint32_t i = 0; i < 8; i++)
		layer[i].hits = hits[i];
	for (uint32_t i : {2u, 4u, 6u})
		layer[i].resident = false;
	const std::vector<uint32_t> fetched{2, 4, 6};
	// Room for one under the spill floor (7/8 of the target, 875): page 2 (most hit) comes in on room;
	// 6 (5 hits) pairs with page 1 (1 hit, 5 >= 1 + 2); 4 (3 hits) would pair with page 3 (2 hits):
	// margin not met.
	auto pr = choose_promotions(layer, fetched, p, 28, 775, 1000);
	assert_int_equal(pr.size(), 2);
	assert_int_equal(pr[0], 2);
	assert_int_equal(pr[1], 6);
	// Room for two: 6 comes in on room too, and 4 pairs with page 1 (3 >= 1 + 2).
	pr = choose_promotions(layer, fetched, p, 28, 675, 1000);
	assert_int_equal(pr.size(), 3);
	// No room: 2 pairs with 1, 6 with 3 (5 >= 2 + 2), 4 with nothing (next is 7 hits). The slack
	// between the floor and the target (a pool at 900 of 1000) is no room: it batches spills.
	for (uint64_t cpu : {1000u, 900u}) {
		pr = choose_promotions(layer, fetched, p, 28, cpu, 1000);
		assert_int_equal(pr.size(), 2);
		assert_int_equal(pr[0], 2);
		assert_int_equal(pr[1], 6);
	}
	// Recent pages are not paired: with recent_from 8 only page 1 is evictable.
	pr = choose_promotions(layer, fetched, p, 8, 1000, 1000);
	assert_int_equal(pr.size(), 1);
	assert_int_equal(pr[0], 2);
	// Without a device nothing moves.
	Params nodev = p;
	nodev.device = false;
	assert_int_equal(choose_promotions(layer, fetched, nodev, 28, 0, 1000).size(), 0);
}

const char *HEADER = "llmcache-kv-trace 1\n"
		     "shape layers=2 q_heads=4 kv_heads=2 head_dim=8 dtype=1 max_context=4096\n"
		     "policy page_tokens=4 sink_tokens=2 recent_tokens=4 cpu_budget=1000 beta=0 device=1 estimator=exact\n";

// Reads a whole trace: the error, or "" and the events.
std::string read_trace(const std::string &text, std::vector<KvTraceEvent> *events = nullptr)
{
	std::istringstream in(text);
	KvTraceReader rd(in);
	KvTraceHeader h;
	std::string err;
	if (rd.open(h, err))
		return err;
	KvTraceEvent e;
	int r;
	while ((r = rd.next(e, err)) > 0)
		if (events)
			events->push_back(e);
	return r < 0 ? err : "";
}

void trace__round_trip__same_lines(void **)
{
	const std::string body = "a 0 5\nq 0 9 5 2 3 0.5 -1.25 nan\ns 0 0 1 2 3 4\nv 0:1 1:0\nw 1:0\np 1 2 7\nv\n";
	std::vector<KvTraceEvent> ev;
	assert_string_equal(read_trace(HEADER + body, &ev).c_str(), "");
	assert_int_equal(ev.size(), 7);
	std::string again;
	for (const auto &e : ev)
		again += format_kv_trace_event(e);
	assert_string_equal(again.c_str(), body.c_str());
	std::istringstream in(HEADER);
	KvTraceReader rd(in);
	KvTraceHeader h;
	std::string err;
	assert_int_equal(rd.open(h, err), 0);
	assert_string_equal(format_kv_trace_header(h).c_str(), HEADER);
}

void trace__truncated_wrong_version_garbage__error_with_line(void **)
{
	struct Case {
		std::string text, error;
	} cases[] = {
		{"", "line 1: empty input, not a KV trace (expected 'llmcache-kv-trace 1')"},
		{"llmcache-kv-trace 2\n", "line 1: version 2 is not supported (this reader reads version 1)"},
		{"\x7f" "ELF\x02\x01\x01\n", "line 1: not a KV trace (expected 'llmcache-kv-trace 1')"},
		{"llmcache-kv-trace 1\nshape layers=2\n", "line 2: the 'shape' line has 1 fields, not 6"},
		{std::string(HEADER).substr(0, 60), "line 2: truncated (the trace ends inside a line, without its newline)"},
		{std::string(HEADER) + "a 0 5\nq 0 9 5 2 3 0.5 -1.2", "line 5: truncated (the trace ends inside a line, without its newline)"},
		{std::string(HEADER) + "q 0 9 5 2 3 0.5 -1.25\n", "line 4: 'q' announces 3 scores and has 2"},
		{std::string(HEADER) + "a 2 1\n", "line 4: expected 'a LAYER COUNT' with LAYER below 2 and COUNT > 0"},
		{std::string(HEADER) + "s 0 3 1\n", "line 4: item 2 '1' is not a whole number above the one before it"},
		{std::string(HEADER) + "v 0-1\n", "line 4: page 1 '0-1' is not LAYER:PAGE with LAYER below 2"},
		{std::string(HEADER) + "q 0 9 5 2 1 x\n", "line 4: score 1 'x' is not a number"},
		{std::string(HEADER) + "hello\n", "line 4: unknown event 'hello' (expected a, q, s, p, v or w)"},
	};
	for (const Case &c : cases) {
		const std::string err = read_trace(c.text);
		if (err != c.error)
			fprintf(stderr, "got '%s'\nwant '%s'\n", err.c_str(), c.error.c_str());
		assert_string_equal(err.c_str(), c.error.c_str());
	}
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cpu_target__no_device_or_no_beta__budget),
		cmocka_unit_test(must_spill__over_budget_or_full_page_over_target__spills),
		cmocka_unit_test(spill_victims__least_hit_then_oldest_then_lowest_layer__down_to_seven_eighths),
		cmocka_unit_test(spill_victims__pinned_partial_or_spilled__not_candidates),
		cmocka_unit_test(copies_to_drop__resident_copies_most_hit_then_newest__victims_kept),
		cmocka_unit_test(plan_select__sink_recent_and_k__as_documented),
		cmocka_unit_test(select_tokens__top_k_ties_and_nan__ascending),
		cmocka_unit_test(pages_hit__one_per_page_outside_kept__ascending),
		cmocka_unit_test(promotions__room_under_floor_then_pairs_with_margin__most_hit_first),
		cmocka_unit_test(trace__round_trip__same_lines),
		cmocka_unit_test(trace__truncated_wrong_version_garbage__error_with_line),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
