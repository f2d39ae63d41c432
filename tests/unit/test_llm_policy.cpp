// SPDX-License-Identifier: MIT
// The llm simulator policy: the core's classification driving a cache, against hand-computed results.
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

	Run(uint64_t capacity, double hot_reserve = 0.05)
	{
		PolicyOptions opt;
		opt.hot_reserve = hot_reserve;
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

void llm_access__loop_larger_than_cache__hits_cache_size_per_iteration(void **)
{
	Run run(40);
	assert_int_equal(run.sweep(0, 0, 100), 0);
	for (int i = 0; i < 9; i++)
		assert_int_equal(run.sweep(0, 0, 100), 40);
}

void llm_access__scan_then_loop__scan_evicted_loop_kept(void **)
{
	Run run(60);
	run.sweep(1, 0, 200); // configuration scan fills the cache
	assert_int_equal(run.sweep(0, 0, 50), 0);
	for (int i = 0; i < 9; i++)
		assert_int_equal(run.sweep(0, 0, 50), 50);
	const auto *cs = run.policy->class_stats();
	assert_non_null(cs);
	assert_int_equal(cs->hits[LLMCACHE_CLASS_LOOP], 9 * 50);
	assert_int_equal(cs->hits[LLMCACHE_CLASS_SEQ], 0);
}

void llm_access__hot_set_between_loop_iterations__protected_within_reserve(void **)
{
	Run run(100, 0.1); // 10 blocks of HOT reserve
	uint64_t hot_hits = 0;
	for (int i = 0; i < 20; i++) {
		for (uint64_t h : {3, 17, 40, 71}) // tokenizer lookups, far apart: four HOT sequences
			hot_hits += run.touch(2, h);
		run.sweep(0, 0, 500); // weights, five times the cache
	}
	assert_int_equal(hot_hits, 19 * 4);
	const auto *cs = run.policy->class_stats();
	assert_int_equal(cs->accesses[LLMCACHE_CLASS_HOT], 20 * 4 + 4); // + the weights' first blocks
	assert_true(cs->hits[LLMCACHE_CLASS_LOOP] >= 18 * (100 - 4 - 1));
}

void llm_access__two_loops__shorter_period_pinned_first(void **)
{
	Run run(120);
	// A 100-block loop read once per token and a 50-block loop read twice per token.
	for (int i = 0; i < 10; i++) {
		run.sweep(1, 0, 50);
		run.sweep(0, 0, 100);
		run.sweep(1, 0, 50);
	}
	uint64_t short_hits = run.sweep(1, 0, 50), long_hits = run.sweep(0, 0, 100);
	assert_int_equal(short_hits, 50);
	assert_int_equal(long_hits, 120 - 50);
}

void sweep_policies__pure_loop_larger_than_cache__lru_none_llm_c_belady_within_one(void **)
{
	const uint64_t n = 1000, c = 300, iterations = 8;
	std::vector<Request> reqs;
	for (uint64_t i = 0; i < iterations; i++)
		for (uint64_t b = 0; b < n; b++)
			reqs.push_back(Request{request_key(0, b), reqs.size() * 1000});
	auto per_iteration = [&](const char *name) {
		auto p = make_policy(name, c);
		p->prepare(reqs);
		std::vector<uint64_t> hits(iterations);
		for (size_t i = 0; i < reqs.size(); i++)
			hits[i / n] += p->access(reqs[i]);
		return hits;
	};
	auto lru = per_iteration("lru"), llm = per_iteration("llm"), belady = per_iteration("belady");
	for (uint64_t i = 1; i < iterations; i++) {
		assert_int_equal(lru[i], 0);
		assert_int_equal(llm[i], c);
		assert_in_range(belady[i], c - 1, c + 1);
	}
}

void llm_access__two_loops_same_period_with_jitter__pins_stay_put(void **)
{
	// AI Notes: a 150-block scratch write loop and a 300-block weights loop once per token, with a
	// varying number of hot-set references in between; the cache holds 200 blocks.
	Run run(200);
	uint64_t late_hits = 0;
	for (int token = 0; token < 30; token++) {
		uint64_t before = run.hits;
		run.sweep(1, 0, 150);
		for (int h = 0; h < 1 + token % 3; h++)
			run.touch(2, uint64_t(h) * 10);
		run.sweep(0, 0, 300);
		if (token >= 20)
			late_hits += run.hits - before;
	}
	// Ping-pong between the loops would give almost nothing; stable pins give about a cache per token.
	assert_true(late_hits >= 10 * (200 - 10 - 3));
}

void llm_access__scan_drained_then_continued__stays_evictable(void **)
{
	// Scan A fills the cache, scan B drains it, then A continues: A's new blocks must stay
	// evictable (they once sat in no eviction queue, and the cache then refused every later miss).
	Run run(8);
	run.sweep(1, 0, 10);  // scan A: keeps its first 8 blocks
	run.sweep(2, 0, 20);  // scan B evicts all of A
	run.sweep(1, 10, 20); // A continues and evicts all of B
	run.sweep(3, 0, 4);   // then a 4-block loop: it must get in and hit
	run.sweep(3, 0, 4);
	for (int i = 0; i < 5; i++)
		assert_int_equal(run.sweep(3, 0, 4), 4);
}

void llm_access__retouching_loop__refused_blocks_hit_in_probation(void **)
{
	// An mmap fault stream: each 16-block window of a 3008-block loop is mapped twice in a row (the
	// fault, then the fault-around). The cache of 1600 blocks has a 16-block probation: the pins lose
	// 16 blocks, and every refused window's second touch hits. A clean loop keeps all its pins.
	const uint64_t n = 3008, c = 1600, probation = 16; // 188 windows
	Run run(c);
	run.sweep(0, 0, n);
	auto faulted = [&] {
		uint64_t before = run.hits;
		for (uint64_t w = 0; w < n; w += 16) {
			run.sweep(0, w, 16);
			run.sweep(0, w, 16);
		}
		return run.hits - before;
	};
	faulted();
	// The pins' hits twice, and the refused windows' second touches, but for up to one window's worth
	// at the edge of the pins (a block that hits in the probation joins its loop, above the pins,
	// and is the first the probation takes room from). Without the probation: 2 * c = 3200.
	const uint64_t want = 2 * (c - probation) + (n - (c - probation));
	for (int i = 0; i < 5; i++)
		assert_in_range(faulted(), want - probation, want);

	Run clean(c);
	clean.sweep(1, 0, n); // a scan: its last refused blocks in the probation, for its own highest
	assert_int_equal(clean.sweep(1, 0, n), c - probation);
	for (int i = 0; i < 5; i++)
		assert_int_equal(clean.sweep(1, 0, n), c);
}

// A library's code window faulted twice in a row (the loader maps it, the engine faults it again) while
// the cache is full of a loop's pins and holds no scan. The window's first 4 blocks are admitted (HOT,
// then its scan's); the other 12 are refused, the scan's newest. With the probation (16 blocks in a
// cache of 1600) they go into it, room made from the scan's own first 4 blocks, and the second fault
// hits the 12; without it (a cache of 1500: no probation under 16 blocks) it hits only the first 4.
void llm_access__scan_refused_in_full_cache__window_faulted_again_hits_in_probation(void **)
{
	for (uint64_t c : {1600, 1500}) {
		const uint64_t n = 3008, probation = c == 1600 ? 16 : 0;
		Run run(c);
		run.sweep(0, 0, n);
		assert_int_equal(run.sweep(0, 0, n), c - probation); // its first pass's last blocks: the probation
		assert_int_equal(run.sweep(0, 0, n), c); // a loop pinned from its lowest block: the cache is full
		for (uint32_t lib = 1; lib <= 4; lib++) {
			run.sweep(lib, 0, 16);
			const uint64_t first = run.sweep(lib, 0, 4), rest = run.sweep(lib, 4, 12);
			// From the third window on, the first two, loops of one iteration now idle for longer
			// than their period, give it their blocks: its second fault hits all 16.
			assert_int_equal(first, probation && lib <= 2 ? 0 : 4);
			assert_int_equal(rest, probation || lib > 2 ? 12 : 0);
		}
		// The windows keep 40 blocks until they count as stopped.
		assert_int_equal(run.sweep(0, 0, n), c - 40);
		assert_int_equal(run.sweep(0, 0, n), c - 40);
		assert_int_equal(run.sweep(0, 0, n), c);
	}
}

// Records replayed as a trace is: each record's blocks share its time, so the policy sees its length
// (llm tells a fault-around window from a scan by it). Returns each record's hits.
struct Rec {
	uint32_t file;
	uint64_t first, n;
	bool fault;
	bool write = false;
};

std::vector<uint64_t> replay_records(uint64_t capacity, double hot_reserve, const std::vector<Rec> &recs)
{
	std::vector<Request> reqs;
	uint64_t t = 0;
	for (const Rec &rec : recs) {
		t += 1000;
		for (uint64_t b = rec.first; b < rec.first + rec.n; b++)
			reqs.push_back(Request{request_key(rec.file, b), t, rec.fault, rec.write});
	}
	PolicyOptions opt;
	opt.hot_reserve = hot_reserve;
	auto policy = make_llm_policy(capacity, opt);
	policy->prepare(reqs);
	std::vector<uint64_t> hits;
	size_t i = 0;
	for (const Rec &rec : recs) {
		hits.push_back(0);
		for (uint64_t k = 0; k < rec.n; k++)
			hits.back() += policy->access(reqs[i++]);
	}
	return hits;
}

// A 16-block window of code faulted in (an mmap fault and its fault-around), a 16-block read() scan, then
// another window: the cache of 32 makes room for it. Faulted, the first window is not a scan (the module
// never drops what it sees through a fault): the read() scan goes and the window's second fault hits all
// 16. Read with read() instead, it is the oldest scan and goes first.
void llm_access__faulted_window__outlives_newer_read_scan(void **)
{
	for (bool fault : {true, false}) {
		auto hits = replay_records(32, 0, {{1, 0, 16, fault}, {2, 0, 16, false}, {3, 0, 16, true}, {1, 0, 16, fault}});
		assert_int_equal(hits[3], fault ? 16 : 0);
	}
}

// The same with the first 16 blocks written rather than faulted: a written block is no scan either (the
// module does not see writes, and neither it nor the daemon can drop a dirty page), so the read() scan
// goes and the written blocks, read back, hit all 16. Read with read() instead, they are the oldest scan.
void llm_access__written_blocks__outlive_newer_read_scan(void **)
{
	for (bool write : {true, false}) {
		auto hits = replay_records(32, 0, {{1, 0, 16, false, write}, {2, 0, 16, false}, {3, 0, 16, true}, {1, 0, 16, false}});
		assert_int_equal(hits[3], write ? 16 : 0);
	}
}

// Sixteen HOT blocks (single-block reads far apart), a 16-block window faulted in, then a 16-block read()
// scan with no older scan to evict. Beyond the HOT reserve, the scan takes the HOT list's least recently
// used blocks, used before it began, as reclaim would: the window's second fault hits all 16, the HOT
// blocks none. Within the reserve (all of the cache) the scan takes nothing once it is one: its first 4
// blocks, a HOT run until it grows past 4 (core.h), take the 4 oldest HOT blocks, the rest is refused,
// and 12 HOT blocks hit.
void llm_access__scan_without_older_scan__takes_hot_blocks_used_before_it_beyond_reserve(void **)
{
	for (double reserve : {0.0, 1.0}) {
		std::vector<Rec> recs;
		for (uint64_t i = 0; i < 16; i++)
			recs.push_back({1, i * 100, 1, false});
		recs.push_back({2, 0, 16, true});
		recs.push_back({3, 0, 16, false});
		recs.push_back({2, 0, 16, true});
		for (uint64_t i = 0; i < 16; i++)
			recs.push_back({1, i * 100, 1, false});
		auto hits = replay_records(32, reserve, recs);
		const size_t window_again = 18; // after the 16 HOT reads, the window and the scan
		uint64_t hot = 0;
		for (size_t i = window_again + 1; i < hits.size(); i++)
			hot += hits[i];
		assert_int_equal(hits[window_again], 16);
		assert_int_equal(hot, reserve == 0.0 ? 0 : 12);
	}
}

// A 16-block loop read twice, then a 32-block scan in a cache of 32 with no HOT reserve: the scan has no
// older scan to evict. The loop, idle since before the scan began and, from the scan's 17th block on,
// for longer than its period (16), gives the scan its blocks, as reclaim would: all 32 are still there
// when the scan is read again. If the loop runs again after the scan began, the scan's remaining blocks
// are refused instead, and only its first 16 hit.
void llm_access__scan_without_older_scan__takes_overdue_loop_idle_since_before_it(void **)
{
	for (bool loop_runs_during_scan : {false, true}) {
		Run run(32, 0.0);
		run.sweep(0, 0, 16);
		run.sweep(0, 0, 16); // a loop, all resident
		run.sweep(1, 0, 16);
		if (loop_runs_during_scan)
			assert_int_equal(run.sweep(0, 0, 16), 16);
		run.sweep(1, 16, 16);
		assert_int_equal(run.sweep(1, 0, 32), loop_runs_during_scan ? 16 : 32);
	}
}

// Twenty HOT blocks read between the passes of a 30-block loop, in a cache of 40 with no HOT reserve.
// At the second pass the loop's period (50 accesses) is longer than the HOT blocks have been idle (under
// 50): its 10 missed blocks are refused, and the next HOT round hits all 20 (taking the HOT blocks, the
// missed loop blocks would have made that round miss every one, each evicting the next). The third
// pass's period is 50 too: its misses are refused again. The fourth pass's period (30) is shorter than
// the HOT blocks' idleness (50 and more): its misses take 10 of them, and the fifth pass hits all 30.
void llm_access__loop_period_longer_than_hot_idleness__does_not_displace_hot(void **)
{
	Run run(40, 0.0);
	auto hot_round = [&run] {
		uint64_t hits = 0;
		for (uint64_t i = 0; i < 20; i++)
			hits += run.touch(2, i * 100);
		return hits;
	};
	run.sweep(0, 0, 30);
	hot_round(); // takes the scan's highest 10 blocks
	assert_int_equal(run.sweep(0, 0, 30), 20);
	assert_int_equal(hot_round(), 20);
	assert_int_equal(run.sweep(0, 0, 30), 20);
	assert_int_equal(run.sweep(0, 0, 30), 20);
	assert_int_equal(run.sweep(0, 0, 30), 30);
}

// Two 20-block scans, A then B, in a cache of 32 with no HOT reserve: B's last 8 blocks take A's
// highest 8. A read again is a loop of period 40, longer than B's blocks have been idle: its 8 misses
// are refused and B keeps its 20 blocks. A read once more right away has a period of 20, shorter than
// B's idleness: its misses take 8 of B's blocks, and its next pass hits all 20.
void llm_access__loop_period_longer_than_scan_idleness__does_not_displace_scan(void **)
{
	Run run(32, 0.0);
	run.sweep(1, 0, 20);
	run.sweep(2, 0, 20);
	assert_int_equal(run.sweep(1, 0, 20), 12);
	assert_int_equal(run.sweep(1, 0, 20), 12);
	assert_int_equal(run.sweep(1, 0, 20), 20);
	assert_int_equal(run.sweep(2, 0, 20), 12);
}

// Ten HOT blocks (tokenizer pages) and a 35-block loop in a cache of 40 whose HOT reserve is those ten.
// Pass 1 is a scan of which the cache keeps blocks 0-29; from pass 2 on the loop misses 30-34. Read
// with every pass, the HOT blocks stay within the reserve and the loop hits 30 a pass. Read once, at the
// start, they are idle past the core's limit (twice the loop's period, 70 accesses) once the core has
// set it (every 1024 accesses; here in pass 30): the loop's missed blocks take five of them, and from
// the next pass on it hits all 35.
void llm_access__hot_reserve_idle_two_loop_periods__yields_to_loop(void **)
{
	for (bool hot_read_every_pass : {false, true}) {
		Run run(40, 0.25);
		auto hot_round = [&run] {
			for (uint64_t i = 0; i < 10; i++)
				run.touch(2, i * 100);
		};
		hot_round();
		run.sweep(0, 0, 35);
		for (int pass = 2; pass <= 40; pass++) {
			if (hot_read_every_pass)
				hot_round();
			const uint64_t hits = run.sweep(0, 0, 35);
			assert_int_equal(hits, pass <= 30 || hot_read_every_pass ? 30 : 35);
		}
	}
}

// Two 30-block loops read one after the other in a cache of 40, no HOT reserve: A's first pass is a scan
// that B's evicts, so B holds the cache when both become loops. Four other blocks read once between
// them make B's first period 64 to A's 60: equal within the core's hysteresis, but B is the longer by a
// hair. A, which needs half the cache or more, takes none of B's pins: B hits 26 and then 30 a pass, A
// its 10. Taking them (the rule before) moves the pins to A in pass 3, where both miss them (A 10, B 6),
// for the same 40 hits a pass after.
void llm_access__equal_loops__keep_their_pins(void **)
{
	const uint64_t want_b[] = {0, 26, 26, 30, 30, 30};
	Run run(40, 0.0);
	for (int pass = 1; pass <= 6; pass++) {
		const uint64_t a = run.sweep(0, 0, 30);
		if (pass == 2)
			run.sweep(2, 0, 4);
		const uint64_t b = run.sweep(1, 0, 30);
		assert_int_equal(a, pass == 1 ? 0 : 10);
		assert_int_equal(b, want_b[pass - 1]);
	}
}

// When the working set fits (policy-core.md): in a cache of 64 with no HOT reserve, 40 blocks of loops
// read twice, eight idle blocks (eight HOT blocks, or an 8-block loop read twice), a 16-block scan A,
// the loops again, then a 16-block scan B. One 40-block loop fits and fills more than half the cache, and
// was read within its reach: the idle blocks, used before A's, go before them, and B takes them and A's 8
// highest blocks, so A read again hits 8 and the idle blocks none. Two 20-block loops fill less than half
// each: the oldest scan goes first, as before, and B takes all of A, so A hits none and the idle blocks 8.
void llm_access__working_set_fits__blocks_idle_before_oldest_scan_go_first(void **)
{
	for (bool one_loop : {true, false}) {
		for (bool hot_blocks : {true, false}) {
			for (bool probe_scan : {true, false}) {
				Run run(64, 0.0);
				auto loops = [&run, one_loop] {
					return one_loop ? run.sweep(0, 0, 40) : run.sweep(0, 0, 20) + run.sweep(4, 0, 20);
				};
				auto idle_blocks = [&run, hot_blocks] {
					uint64_t hits = 0;
					for (uint64_t i = 0; i < 8; i++)
						hits += run.touch(2, hot_blocks ? i * 100 : i);
					return hits;
				};
				loops();
				loops();
				idle_blocks();
				if (!hot_blocks)
					idle_blocks();
				run.sweep(1, 0, 16);
				assert_int_equal(loops(), 40);
				run.sweep(3, 0, 16);
				const uint64_t hits = probe_scan ? run.sweep(1, 0, 16) : idle_blocks();
				assert_int_equal(hits, probe_scan == one_loop ? 8 : 0);
			}
		}
	}
}

// When the working set fits, a loop that stopped goes before a loop that runs (policy-core.md): in a cache
// of 64 with no HOT reserve, a 40-block loop A read every 40 accesses, an 8-block loop B read twice at
// the start and no more (the core's aging keys it by its age, about 940 accesses, from the 1024th
// access on), an 8-block loop C read twice 1 520 accesses apart (its period, longer than B's key) and
// an 8-block loop D fill the cache. C read again one block further misses that block: the period
// order would take no block for it from C itself, the longest, and refuse it; B, stopped and the
// least recently accessed, gives its highest block instead.
void llm_access__working_set_fits__stopped_loop_gives_before_running_longer_loop(void **)
{
	Run run(64, 0.0);
	run.sweep(0, 0, 40);
	run.sweep(0, 0, 40);
	run.sweep(1, 0, 8);
	run.sweep(1, 0, 8);
	run.sweep(2, 0, 8);
	for (int i = 0; i < 38; i++)
		assert_int_equal(run.sweep(0, 0, 40), 40);
	assert_int_equal(run.sweep(2, 0, 8), 8);
	run.sweep(3, 0, 8);
	assert_int_equal(run.sweep(3, 0, 8), 8);
	assert_int_equal(run.sweep(0, 0, 40), 40);
	assert_int_equal(run.sweep(2, 0, 9), 8);
	assert_true(run.touch(2, 8));
	assert_false(run.touch(1, 7));
	assert_int_equal(run.sweep(1, 0, 7), 7);
}

// A model file's loop whose head (blocks 64-255, a token embedding) its iterations pass over: each reads
// block 0 and blocks 256-639. While the head is pinned, the 300-block cache hits block 0 and 256-299; once
// its chunks are cold (two periods untouched, core.h) they go first, and the weights take their room.
void llm_access__loop_head_passed_over__cold_chunks_released(void **)
{
	Run run(300);
	run.sweep(0, 0, 640);
	run.sweep(0, 0, 640); // a loop; 0-299 resident
	auto iteration = [&run] { return run.sweep(0, 0, 1) + run.sweep(0, 256, 384); };
	assert_int_equal(iteration(), 1 + 44); // the head's chunks were read 1.4 periods ago
	// At this iteration's start, chunks 1 and 2 have not been read for more than two periods of 385:
	// released, 128 blocks above 299 are admitted in their place; chunk 3 follows one iteration later.
	assert_int_equal(iteration(), 1 + 44);
	assert_int_equal(iteration(), 1 + 44 + 128);
	for (int i = 0; i < 3; i++)
		assert_int_equal(iteration(), 1 + 236);
}

// A 200-block loop in a cache of 160 with no HOT reserve pins its blocks 0-159. A page of another file
// read three times a token (an engine's code, faulted again) is refused at its first access, which has
// no reuse distance; at its second, last accessed 81 accesses before (at least LLC_REUSE_FLOOR, under
// two of the loop's periods), it takes the loop's highest pin (block 159) and keeps it against the
// loop's misses, hitting three times a token for the one hit it costs the loop. Read once every three
// tokens, it comes back past two periods: it is refused, and the loop keeps its 160 pins.
void llm_access__page_reused_within_two_loop_periods__takes_the_longest_loops_highest_pin(void **)
{
	Run run(160, 0.0);
	for (int i = 0; i < 3; i++)
		run.sweep(0, 0, 200);
	uint64_t page_hits = 0, loop_hits = 0;
	for (int token = 0; token < 10; token++) {
		page_hits += run.touch(2, 7);
		loop_hits += run.sweep(0, 0, 80);
		page_hits += run.touch(2, 7);
		loop_hits += run.sweep(0, 80, 120);
		page_hits += run.touch(2, 7);
	}
	assert_int_equal(page_hits, 3 * 10 - 2); // its first access has no reuse distance: refused
	assert_int_equal(loop_hits, 10 * 159);    // one pin less from the page's second access on

	Run rare(160, 0.0);
	for (int i = 0; i < 3; i++)
		rare.sweep(0, 0, 200);
	page_hits = loop_hits = 0;
	for (int token = 0; token < 12; token++) {
		if (token % 3 == 0)
			page_hits += rare.touch(2, 7);
		loop_hits += rare.sweep(0, 0, 200);
	}
	assert_int_equal(page_hits, 0);
	assert_int_equal(loop_hits, 12 * 160);
}

// Four 8-block scans fill a cache of 32: Z, A, B, C. A then grows by four blocks (a later run of the same
// start-up scan, as an engine's code faults in); the queue passes over every scan once (each grew while
// it was read) and Z, the oldest, gives the room. A new scan D takes the rest of Z, then the queue
// finds A grown since it passed over it: A goes round again and D takes B's last four blocks. A read
// again hits all twelve. Without the second chance A, the oldest scan left, gives D its four new blocks.
void llm_access__scan_grown_since_queue_passed__outlives_newer_scan(void **)
{
	Run run(32, 0.0);
	for (uint32_t file = 0; file < 4; file++)
		run.sweep(file, 0, 8);
	run.sweep(1, 8, 4);
	run.sweep(4, 0, 8);
	assert_int_equal(run.sweep(1, 0, 12), 12);
	assert_int_equal(run.sweep(2, 0, 4), 4); // B kept its first four
}

void llm_access__capacity_one__works(void **)
{
	Run run(1);
	run.sweep(0, 0, 10);
	run.sweep(0, 0, 10); // the loop is recognised at its restart and its lowest block pinned
	assert_int_equal(run.sweep(0, 0, 10), 1);
	assert_int_equal(run.sweep(0, 0, 10), 1);
}

void llm_make__capacity_zero__rejected(void **)
{
	bool threw = false;
	try {
		make_llm_policy(0, {});
	} catch (const std::invalid_argument &) {
		threw = true;
	}
	assert_true(threw);
}

} // namespace

int main()
{
	const CMUnitTest tests[] = {
		cmocka_unit_test(llm_access__loop_larger_than_cache__hits_cache_size_per_iteration),
		cmocka_unit_test(llm_access__scan_then_loop__scan_evicted_loop_kept),
		cmocka_unit_test(llm_access__hot_set_between_loop_iterations__protected_within_reserve),
		cmocka_unit_test(llm_access__two_loops__shorter_period_pinned_first),
		cmocka_unit_test(sweep_policies__pure_loop_larger_than_cache__lru_none_llm_c_belady_within_one),
		cmocka_unit_test(llm_access__two_loops_same_period_with_jitter__pins_stay_put),
		cmocka_unit_test(llm_access__scan_drained_then_continued__stays_evictable),
		cmocka_unit_test(llm_access__retouching_loop__refused_blocks_hit_in_probation),
		cmocka_unit_test(llm_access__scan_refused_in_full_cache__window_faulted_again_hits_in_probation),
		cmocka_unit_test(llm_access__faulted_window__outlives_newer_read_scan),
		cmocka_unit_test(llm_access__written_blocks__outlive_newer_read_scan),
		cmocka_unit_test(llm_access__scan_without_older_scan__takes_hot_blocks_used_before_it_beyond_reserve),
		cmocka_unit_test(llm_access__scan_without_older_scan__takes_overdue_loop_idle_since_before_it),
		cmocka_unit_test(llm_access__loop_period_longer_than_hot_idleness__does_not_displace_hot),
		cmocka_unit_test(llm_access__loop_period_longer_than_scan_idleness__does_not_displace_scan),
		cmocka_unit_test(llm_access__hot_reserve_idle_two_loop_periods__yields_to_loop),
		cmocka_unit_test(llm_access__equal_loops__keep_their_pins),
		cmocka_unit_test(llm_access__working_set_fits__blocks_idle_before_oldest_scan_go_first),
		cmocka_unit_test(llm_access__working_set_fits__stopped_loop_gives_before_running_longer_loop),
		cmocka_unit_test(llm_access__loop_head_passed_over__cold_chunks_released),
		cmocka_unit_test(llm_access__page_reused_within_two_loop_periods__takes_the_longest_loops_highest_pin),
		cmocka_unit_test(llm_access__scan_grown_since_queue_passed__outlives_newer_scan),
		cmocka_unit_test(llm_access__capacity_one__works),
		cmocka_unit_test(llm_make__capacity_zero__rejected),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
