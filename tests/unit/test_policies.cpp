// SPDX-License-Identifier: MIT
// The simulator's baseline policies: hand-computed hit/miss sequences per policy ('H' hit, 'm' miss),
// loop behaviour, and properties every policy must have (capacity bound, capacity 1, the OPT bound).
#include "mixed_trace.hpp"
#include "sim/policies.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "cmocka_cpp.hpp" // last: cmocka's macros (fail, ...) clash with standard headers

using namespace llmcache::sim;

namespace {

using Factory = std::unique_ptr<Policy> (*)(uint64_t, const PolicyOptions &);

std::unique_ptr<Policy> make_belady_classic(uint64_t c, const PolicyOptions &o) { return make_belady_policy(c, o, false); }
std::unique_ptr<Policy> make_belady_bypass(uint64_t c, const PolicyOptions &o) { return make_belady_policy(c, o, true); }

struct Named {
	const char *name;
	Factory make;
};

const Named online[] = {
	{"lru", make_lru_policy},     {"fifo", make_fifo_policy},   {"clock", make_clock_policy},
	{"mru", make_mru_policy},     {"arc", make_arc_policy},     {"2q", make_two_q_policy},
	{"lirs", make_lirs_policy},   {"lecar", make_lecar_policy}, {"s3fifo", make_s3fifo_policy},
	{"sieve", make_sieve_policy}, {"wtinylfu", make_wtinylfu_policy},
	{"ubm", make_ubm_policy},
};

Request req(uint64_t block, uint32_t file = 0) { return Request{request_key(file, block), 0}; }

std::vector<Request> reqs(const std::vector<uint64_t> &blocks)
{
	std::vector<Request> v;
	for (uint64_t b : blocks)
		v.push_back(req(b));
	return v;
}

std::string run(Policy &p, const std::vector<Request> &rs)
{
	p.prepare(rs);
	std::string s;
	for (const auto &r : rs)
		s += p.access(r) ? 'H' : 'm';
	return s;
}

std::string run(Factory make, uint64_t capacity, const std::vector<uint64_t> &blocks, uint64_t seed = 42)
{
	PolicyOptions opt;
	opt.seed = seed;
	auto p = make(capacity, opt);
	return run(*p, reqs(blocks));
}

uint64_t hits(const std::string &s) { return uint64_t(std::count(s.begin(), s.end(), 'H')); }

// A pure loop over blocks 0..n-1, `iterations` times.
std::vector<uint64_t> loop(uint64_t n, int iterations)
{
	std::vector<uint64_t> v;
	for (int i = 0; i < iterations; i++)
		for (uint64_t b = 0; b < n; b++)
			v.push_back(b);
	return v;
}

// Hits of each loop iteration.
std::vector<uint64_t> per_iteration(const std::string &s, uint64_t n)
{
	std::vector<uint64_t> v;
	for (size_t i = 0; i < s.size(); i += n)
		v.push_back(hits(s.substr(i, n)));
	return v;
}

uint64_t rng_state = 1;
uint64_t rnd(uint64_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (rng_state >> 33) % n;
}


// Exhaustive optimum over at most 8 distinct keys (dynamic programming over cache contents).
uint64_t brute_force_opt(const std::vector<uint64_t> &blocks, unsigned capacity, bool bypass)
{
	std::vector<int> best(256, -1), next(256);
	best[0] = 0;
	for (uint64_t b : blocks) {
		std::fill(next.begin(), next.end(), -1);
		unsigned bit = 1u << b;
		for (unsigned s = 0; s < 256; s++) {
			if (best[s] < 0)
				continue;
			auto up = [&](unsigned t, int v) { next[t] = std::max(next[t], v); };
			if (s & bit) {
				up(s, best[s] + 1);
				continue;
			}
			if (bypass)
				up(s, best[s]);
			if (unsigned(__builtin_popcount(s)) < capacity)
				up(s | bit, best[s]);
			else
				for (unsigned y = 0; y < 8; y++)
					if (s & (1u << y))
						up((s & ~(1u << y)) | bit, best[s]);
		}
		best.swap(next);
	}
	return uint64_t(*std::max_element(best.begin(), best.end()));
}

// Belady's anomaly string and the LRU textbook example.
const std::vector<uint64_t> anomaly = {1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5};

} // namespace

static void lru_access__classic_sequence__hits_match_hand_count(void **)
{
	assert_string_equal(run(make_lru_policy, 3, {1, 2, 3, 1, 4, 2, 5, 1, 2, 3, 4, 5}).c_str(), "mmmHmmmmHmmm");
	assert_string_equal(run(make_lru_policy, 3, anomaly).c_str(), "mmmmmmmHHmmm"); // 10 faults
	assert_string_equal(run(make_lru_policy, 4, anomaly).c_str(), "mmmmHHmHHmmm"); // 8 faults
	assert_string_equal(run(make_lru_policy, 3, {1, 2, 3, 3, 2, 1, 4, 3, 1, 5, 3}).c_str(), "mmmHHHmmHmH");
}

static void fifo_access__belady_anomaly__more_frames_fewer_hits(void **)
{
	assert_string_equal(run(make_fifo_policy, 3, anomaly).c_str(), "mmmmmmmHHmmH"); // 9 faults
	assert_string_equal(run(make_fifo_policy, 4, anomaly).c_str(), "mmmmHHmmmmmm"); // 10 faults
	assert_string_equal(run(make_fifo_policy, 3, {1, 2, 3, 3, 2, 1, 4, 3, 1, 5, 3}).c_str(), "mmmHHHmHmmm");
}

static void clock_access__referenced_block__gets_second_chance(void **)
{
	// After 3 2 1 all bits are set: the sweep clears them and evicts 1 (FIFO order), not 3 (LRU's
	// choice). Later 3's bit saves it from the sweep that evicts 4, where FIFO evicts 3.
	assert_string_equal(run(make_clock_policy, 3, {1, 2, 3, 3, 2, 1, 4, 3, 1, 5, 3}).c_str(), "mmmHHHmHmmH");
	assert_string_equal(run(make_clock_policy, 3, {1, 2, 3, 1, 4, 2, 5, 1, 2, 3, 4, 5}).c_str(), "mmmHmmmmHmmm");
}

static void mru_access__classic_sequence__evicts_most_recent(void **)
{
	assert_string_equal(run(make_mru_policy, 3, {1, 2, 3, 4, 1, 2, 3, 4}).c_str(), "mmmmHHmH");
}

static void arc_access__ghost_hits__target_adapts(void **)
{
	// c = 2. Hand trace (T1/T2 MRU first): 1 1 -> T2=[1]; 2 3 -> 2 to B1; 1 hit in T2 (LRU would have
	// evicted it); 2 in B1 -> p=1, 1 to B2; 3 hit; 1 in B2 -> p=0; 4; 1 hit; 3 in B2 -> p=0; 4 in B1 -> p=1;
	// 5 drops B2's LRU, evicts T2's 3; 6 with |T1| = p = 1 evicts T2's 4, not T1's 5 (p=0 would have);
	// so 5 hits; 4 in B2 -> p=0.
	const std::vector<uint64_t> seq = {1, 1, 2, 3, 1, 2, 3, 1, 4, 1, 3, 4, 5, 6, 5, 4};
	assert_string_equal(run(make_arc_policy, 2, seq).c_str(), "mHmmHmHmmHmmmmHm");
	assert_string_equal(run(make_lru_policy, 2, seq).c_str(), "mHmmmmmmmHmmmmHm");
}

static void two_q_access__ghost_and_scan__hits_match_hand_count(void **)
{
	// c = 4, Kin = 1, Kout = 2: 1 and 2 return from A1out into Am; 3 falls out of A1out; the Am hit on 2
	// makes 1 Am's LRU victim when A1in is at Kin; 1 then hits in A1in without moving.
	const std::vector<uint64_t> seq = {1, 2, 3, 4, 5, 1, 2, 6, 1, 7, 3, 6, 2, 8, 1, 3, 8, 1};
	assert_string_equal(run(make_two_q_policy, 4, seq).c_str(), "mmmmmmmmHmmmHmmmmH");
}

static void lirs_access__irr_changes__lir_set_follows(void **)
{
	// c = 3: 2 LIR blocks, 1 resident HIR. 3 re-referenced while non-resident in S becomes LIR and
	// demotes 1; S is pruned when its bottom LIR moves; a block pruned from S comes back as new.
	const std::vector<uint64_t> seq = {1, 2, 3, 4, 3, 1, 2, 4, 1, 3, 4, 3, 2, 4, 2, 3, 1, 3};
	assert_string_equal(run(make_lirs_policy, 3, seq).c_str(), "mmmmmHHmmHmmmHHHmm");
}

static void lirs_access__scan__keeps_lir_set(void **)
{
	// 100 hot blocks referenced twice become LIR; a long scan passes through the 1-block HIR share.
	std::vector<uint64_t> seq;
	for (int r = 0; r < 2; r++)
		for (uint64_t b = 0; b < 100; b++)
			seq.push_back(b);
	for (uint64_t b = 1000; b < 5000; b++)
		seq.push_back(b);
	for (uint64_t b = 0; b < 100; b++)
		seq.push_back(b);
	std::string s = run(make_lirs_policy, 101, seq);
	assert_int_equal(hits(s.substr(s.size() - 100)), 100);
	assert_int_equal(hits(run(make_lru_policy, 101, seq).substr(s.size() - 100)), 0);
}

static void s3fifo_access__one_hit_wonders__filtered_by_small_queue(void **)
{
	// c = 5: S = 1, M = 4, G = 4 keys. Hand trace: 1, hit twice in S, moves to M at the first eviction
	// and keeps hitting there; 2 and 3, hit once, go to G (the reference's threshold is two hits); 4 comes
	// back from G into M and hits there; 2 was trimmed from G by then, so it re-enters S.
	const std::vector<uint64_t> seq = {1, 1, 1, 2, 3, 2, 4, 5, 6, 3, 7, 1, 8, 9, 4, 10, 2, 11, 1, 12, 3, 4};
	assert_string_equal(run(make_s3fifo_policy, 5, seq).c_str(), "mHHmmHmmmHmHmmmmmmHmmH");
}

static void sieve_access__hit_block_behind_the_hand__survives_a_scan(void **)
{
	// c = 3. Hand trace: the first eviction starts at the tail (1, visited: cleared, kept) and evicts 2,
	// leaving the hand at 3; the hand then evicts each unvisited block it meets on its way to the head,
	// so 1, hit again each time before the hand comes back to it, survives the scan 6..9, which LRU
	// does not.
	const std::vector<uint64_t> seq = {1, 2, 3, 1, 4, 2, 5, 1, 3, 2, 1, 6, 7, 8, 9, 1};
	assert_string_equal(run(make_sieve_policy, 3, seq).c_str(), "mmmHmmmHmmHmmmmH");
	assert_int_equal(run(make_lru_policy, 3, seq).back(), 'm');
}

static void wtinylfu_access__scan__frequent_blocks_keep_the_main_cache(void **)
{
	// c = 10: window 1, main 9 (protected up to 7). Hand trace: 1..9 three times: each first access
	// passes the window into probation while the main cache has room, the second pass hits in probation
	// (1..7 move to protected, 8 pushes 1 back to probation) or the window (9), the third hits again.
	// The scan 100..119: 9 leaves the window into the last free main slot; from then each scan block,
	// counted once by the sketch, loses the admission to probation's victim (counted three times) and
	// leaves, so 1..9 all hit afterwards, where LRU has lost them all.
	std::vector<uint64_t> seq;
	for (int pass = 0; pass < 3; pass++)
		for (uint64_t b = 1; b <= 9; b++)
			seq.push_back(b);
	for (uint64_t b = 100; b < 120; b++)
		seq.push_back(b);
	for (uint64_t b = 1; b <= 9; b++)
		seq.push_back(b);
	const std::string want = std::string(9, 'm') + std::string(18, 'H') + std::string(20, 'm') + std::string(9, 'H');
	assert_string_equal(run(make_wtinylfu_policy, 10, seq).c_str(), want.c_str());
	assert_int_equal(hits(run(make_lru_policy, 10, seq).substr(47)), 0);
}

static void wtinylfu_access__reset__old_counts_fade(void **)
{
	// c = 10: the sketch halves its counters after 100 increments. 1..9 read five times own the main
	// cache; then 20..29, each read three times in a row (a window hit, counted 3), try to enter it, and
	// are read once more. Without a reset in between they lose to probation's victims (counted 5) and all
	// miss on that last read. With 60 one-time reads before them, the reset has halved the old counts to
	// 2, so the first of them replace probation's two blocks and hit on their last read.
	const auto with_filler = [](uint64_t filler) {
		std::vector<uint64_t> seq;
		for (int pass = 0; pass < 5; pass++)
			for (uint64_t b = 1; b <= 9; b++)
				seq.push_back(b);
		for (uint64_t b = 0; b < filler; b++)
			seq.push_back(1000 + b);
		for (uint64_t b = 20; b < 30; b++)
			seq.insert(seq.end(), {b, b, b});
		for (uint64_t b = 20; b < 30; b++)
			seq.push_back(b);
		return seq;
	};
	const std::string aged = run(make_wtinylfu_policy, 10, with_filler(60));
	const std::string fresh = run(make_wtinylfu_policy, 10, with_filler(0));
	assert_int_equal(hits(fresh.substr(fresh.size() - 10)), 0);
	assert_int_equal(hits(aged.substr(aged.size() - 10)), 2);
}

static void lecar_access__experts_agree__same_result_for_every_seed(void **)
{
	// Every block is referenced twice in a row and never again while cached, so every cached block has
	// frequency 2 when an eviction happens: LFU's tie-break (least recent) and LRU pick the same victim,
	// whatever the draw, while evicted blocks come back through the histories and move the weights.
	const std::vector<uint64_t> seq = {1, 1, 2, 2, 3, 3, 4, 4, 1, 1, 5, 5, 2, 2, 6, 6, 3, 3};
	for (uint64_t seed = 1; seed <= 20; seed++) {
		PolicyOptions opt;
		opt.seed = seed;
		auto p = make_lecar_policy(3, opt);
		assert_string_equal(run(*p, reqs(seq)).c_str(), "mHmHmHmHmHmHmHmHmH");
		assert_true(lecar_weights(*p).first != 0.5);
	}
}

static void lecar_access__same_seed__reproducible(void **)
{
	std::vector<uint64_t> seq;
	for (int i = 0; i < 5000; i++)
		seq.push_back(rnd(40));
	std::string a = run(make_lecar_policy, 10, seq, 7);
	assert_string_equal(a.c_str(), run(make_lecar_policy, 10, seq, 7).c_str());
	bool differs = false;
	for (uint64_t seed = 8; seed < 16 && !differs; seed++)
		differs = run(make_lecar_policy, 10, seq, seed) != a;
	assert_true(differs);
}

static void lecar_access__history_hit__other_expert_weight_grows(void **)
{
	bool seen[3] = {};
	for (uint64_t seed = 1; seed <= 40; seed++) {
		PolicyOptions opt;
		opt.seed = seed;
		auto p = make_lecar_policy(2, opt);
		for (uint64_t b : {1, 2, 3})
			p->access(req(b));
		auto w = lecar_weights(*p);
		assert_true(w.first == 0.5 && w.second == 0.5);
		int h = lecar_history_of(*p, request_key(0, 1)); // both experts' victim is 1
		assert_in_range(h, 1, 2);
		seen[h] = true;
		assert_false(p->access(req(1)));
		assert_int_equal(lecar_history_of(*p, request_key(0, 1)), 0);
		w = lecar_weights(*p);
		// One access in the history: reward = 0.005^(1/2), the other expert gains exp(0.45 * reward).
		double g = std::exp(0.45 * std::pow(0.005, 0.5));
		double other = h == 1 ? w.second : w.first;
		assert_true(std::fabs(other - g / (g + 1)) < 1e-12);
		assert_true(std::fabs(w.first + w.second - 1) < 1e-12);
	}
	assert_true(seen[1] && seen[2]);
}

static void belady_access__classic_example__optimal_hit_count(void **)
{
	const std::vector<uint64_t> seq = {7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1};
	assert_int_equal(hits(run(make_belady_classic, 3, seq)), 11); // the textbook's 9 faults
	assert_int_equal(hits(run(make_belady_bypass, 3, seq)), 12);  // bypass does better
	assert_string_equal(run(make_belady_classic, 3, anomaly).c_str(), "mmmmHHmHHmmH");
	assert_int_equal(hits(run(make_belady_classic, 4, anomaly)), 6);
}

static void belady_access__bypass__keeps_block_used_sooner(void **)
{
	// Capacity 1: classic MIN must admit 2 and lose 1; with bypass 2 (never used again) is not admitted.
	assert_string_equal(run(make_belady_classic, 1, {1, 2, 1}).c_str(), "mmm");
	assert_string_equal(run(make_belady_bypass, 1, {1, 2, 1}).c_str(), "mmH");
	assert_string_equal(run(make_belady_classic, 2, {1, 2, 3, 1, 2}).c_str(), "mmmHm");
	assert_string_equal(run(make_belady_bypass, 2, {1, 2, 3, 1, 2}).c_str(), "mmmHH");
}

static void belady_access__random_traces__match_exhaustive_optimum(void **)
{
	for (int t = 0; t < 200; t++) {
		std::vector<uint64_t> seq;
		size_t n = 8 + rnd(20);
		uint64_t keys = 2 + rnd(7);
		for (size_t i = 0; i < n; i++)
			seq.push_back(rnd(keys));
		unsigned c = 1 + unsigned(rnd(4));
		assert_int_equal(hits(run(make_belady_classic, c, seq)), brute_force_opt(seq, c, false));
		assert_int_equal(hits(run(make_belady_bypass, c, seq)), brute_force_opt(seq, c, true));
	}
}

static void belady_access__stream_mismatch__throws(void **)
{
	auto p = make_belady_policy(2, {});
	bool threw = false;
	try {
		p->access(req(1));
	} catch (const std::logic_error &) {
		threw = true;
	}
	assert_true(threw);
	auto rs = reqs({1, 2, 1});
	p->prepare(rs);
	assert_false(p->access(rs[0]));
	threw = false;
	try {
		p->access(req(9));
	} catch (const std::logic_error &) {
		threw = true;
	}
	assert_true(threw);
	p->prepare(rs);
	assert_string_equal(run(*p, rs).c_str(), "mmH");
	threw = false;
	try {
		p->access(rs[0]); // one past the end
	} catch (const std::logic_error &) {
		threw = true;
	}
	assert_true(threw);
}

static void loop_access__larger_than_cache__lru_fifo_clock_hit_nothing(void **)
{
	auto seq = loop(10, 20);
	for (Factory f : {make_lru_policy, make_fifo_policy, make_clock_policy})
		assert_int_equal(hits(run(f, 4, seq)), 0);
}

static void loop_access__larger_than_cache__mru_keeps_about_c_minus_1(void **)
{
	// Hand trace for iterations 1-4 (N = 10, C = 4): hits {0,1,2,9}, {0,1,8,9}, {0,7,8,9}, {6,7,8}.
	auto it = per_iteration(run(make_mru_policy, 4, loop(10, 200)), 10);
	assert_int_equal(it[0], 0);
	assert_int_equal(it[1], 4);
	assert_int_equal(it[2], 4);
	assert_int_equal(it[3], 4);
	assert_int_equal(it[4], 3);
	uint64_t total = 0;
	for (size_t i = 1; i < it.size(); i++) {
		assert_in_range(it[i], 2, 4);
		total += it[i];
	}
	assert_in_range(total, 3 * (it.size() - 1), 4 * (it.size() - 1));
}

static void loop_access__larger_than_cache__belady_bypass_hits_c_per_iteration(void **)
{
	auto it = per_iteration(run(make_belady_bypass, 4, loop(10, 50)), 10);
	assert_int_equal(it[0], 0);
	for (size_t i = 1; i < it.size(); i++)
		assert_int_equal(it[i], 4);
	auto classic = per_iteration(run(make_belady_classic, 4, loop(10, 50)), 10);
	for (size_t i = 1; i < classic.size(); i++)
		assert_in_range(classic[i], 3, 4);
}

static void ubm_access__loop_and_scan__loop_blocks_survive_scan(void **)
{
	// File 0 loops over 20 blocks with a 10-block cache; file 1 is scanned once in between. UBM detects
	// the loop and keeps MRU-like hits; the scan's blocks go first, so the loop keeps its blocks.
	std::vector<Request> rs;
	for (int it = 0; it < 30; it++) {
		for (uint64_t b = 0; b < 20; b++)
			rs.push_back(req(b, 0));
		if (it == 15)
			for (uint64_t b = 0; b < 200; b++)
				rs.push_back(req(b, 1));
	}
	auto p = make_ubm_policy(10, {});
	std::string s = run(*p, rs);
	// The first pass is sequential and evicted MRU-first, so the loop's start is still there for pass 2.
	assert_in_range(hits(s.substr(20, 20)), 8, 10);
	uint64_t before = hits(s.substr(14 * 20, 20)), after = hits(s.substr(16 * 20 + 200, 20));
	assert_in_range(before, 8, 10);
	assert_in_range(after, 8, 10);
	assert_in_range(hits(s), 8 * 28, 10 * 29);
	assert_int_equal(hits(run(*make_lru_policy(10, {}), rs)), 0);
}

// A 20-block loop (file 0) with an extra block after every 5 loop blocks, in a 10-block cache.
static void ubm_loop_with_extras(Factory make, uint64_t (*extra)(int i), size_t *loop_hits_late, size_t *extra_hits_late)
{
	std::vector<Request> rs;
	std::vector<bool> is_extra;
	for (int it = 0, i = 0; it < 300; it++)
		for (uint64_t b = 0; b < 20; b++) {
			rs.push_back(req(b, 0));
			is_extra.push_back(false);
			if (b % 5 == 4) {
				rs.push_back(req(extra(i++), 1));
				is_extra.push_back(true);
			}
		}
	std::string s = run(*make(10, {}), rs);
	*loop_hits_late = *extra_hits_late = 0;
	for (size_t i = s.size() / 2; i < s.size(); i++)
		(is_extra[i] ? *extra_hits_late : *loop_hits_late) += s[i] == 'H';
}

static void ubm_access__loop_and_hot_blocks__keeps_hot_blocks_and_loop_start(void **)
{
	// Three scattered blocks re-read every 8 accesses are worth more than loop blocks of period 32: UBM
	// keeps them and gives the loop the other 7 buffers (6 MRU hits per iteration of the 150 late ones).
	size_t loop_hits, hot_hits;
	ubm_loop_with_extras(make_ubm_policy, [](int i) -> uint64_t { return uint64_t(i % 3) * 5; }, &loop_hits, &hot_hits);
	assert_int_equal(hot_hits, 600);
	assert_in_range(loop_hits, 6 * 150, 7 * 150);
	ubm_loop_with_extras(make_lru_policy, [](int i) -> uint64_t { return uint64_t(i % 3) * 5; }, &loop_hits, &hot_hits);
	assert_int_equal(loop_hits, 0);
}

static void ubm_access__loop_and_one_time_blocks__one_time_blocks_go_first(void **)
{
	// Scattered blocks read once have no reuse: they are evicted before loop blocks, which keep 9 - 1 = 8
	// MRU hits per iteration (one buffer cycles through the one-time blocks).
	size_t loop_hits, once_hits;
	ubm_loop_with_extras(make_ubm_policy, [](int i) -> uint64_t { return uint64_t(i) * 7; }, &loop_hits, &once_hits);
	assert_int_equal(once_hits, 0);
	assert_in_range(loop_hits, 8 * 150, 9 * 150);
}

static void every_policy_access__capacity_1__holds_only_last_block(void **)
{
	std::vector<uint64_t> seq;
	for (int i = 0; i < 3000; i++)
		seq.push_back(rnd(3));
	std::string expect = "m";
	for (size_t i = 1; i < seq.size(); i++)
		expect += seq[i] == seq[i - 1] ? 'H' : 'm';
	for (const auto &p : online)
		if (run(p.make, 1, seq) != expect)
			fail_msg("%s: capacity 1 must hit exactly the repeats of the previous block", p.name);
	assert_true(hits(run(make_belady_bypass, 1, seq)) >= hits(expect));
	assert_string_equal(run(make_belady_classic, 1, seq).c_str(), expect.c_str());
}

static void every_policy_access__random_trace__never_holds_more_than_capacity(void **)
{
	// After a mixed trace, probe every block once: a later probe can only hit if its block was cached
	// when probing began (a miss inserts only the probed block), so hits <= capacity.
	for (uint64_t c : {1, 2, 7, 64, 300}) {
		uint64_t len = std::max<uint64_t>(2, c);
		auto rs = mixed_trace(rnd, req, len, 20 * 3 * len + 100);
		size_t body = rs.size();
		for (uint32_t f = 0; f < 3; f++)
			for (uint64_t b = 0; b < len; b++)
				rs.push_back(req(b, f));
		for (const auto &p : online) {
			std::string s = run(*p.make(c, {}), rs);
			if (hits(s.substr(body)) > c)
				fail_msg("%s capacity %llu: %llu probe hits", p.name, (unsigned long long)c,
					 (unsigned long long)hits(s.substr(body)));
		}
		for (Factory b : {make_belady_classic, make_belady_bypass})
			assert_true(hits(run(*b(c, {}), rs).substr(body)) <= c);
	}
}

static void every_policy_access__random_trace__no_more_hits_than_belady(void **)
{
	for (uint64_t c : {1, 3, 16, 100}) {
		auto rs = mixed_trace(rnd, req, std::max<uint64_t>(2, c), 20000);
		uint64_t opt = hits(run(*make_belady_bypass(c, {}), rs));
		uint64_t classic = hits(run(*make_belady_classic(c, {}), rs));
		assert_true(classic <= opt);
		for (const auto &p : online) {
			uint64_t h = hits(run(*p.make(c, {}), rs));
			if (h > classic)
				fail_msg("%s capacity %llu: %llu hits > classic MIN's %llu", p.name, (unsigned long long)c,
					 (unsigned long long)h, (unsigned long long)classic);
		}
	}
}

static void every_policy_make__capacity_0__throws(void **)
{
	for (const auto &p : online) {
		bool threw = false;
		try {
			p.make(0, {});
		} catch (const std::invalid_argument &) {
			threw = true;
		}
		if (!threw)
			fail_msg("%s accepted capacity 0", p.name);
	}
}

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lru_access__classic_sequence__hits_match_hand_count),
		cmocka_unit_test(fifo_access__belady_anomaly__more_frames_fewer_hits),
		cmocka_unit_test(clock_access__referenced_block__gets_second_chance),
		cmocka_unit_test(mru_access__classic_sequence__evicts_most_recent),
		cmocka_unit_test(arc_access__ghost_hits__target_adapts),
		cmocka_unit_test(two_q_access__ghost_and_scan__hits_match_hand_count),
		cmocka_unit_test(lirs_access__irr_changes__lir_set_follows),
		cmocka_unit_test(lirs_access__scan__keeps_lir_set),
		cmocka_unit_test(s3fifo_access__one_hit_wonders__filtered_by_small_queue),
		cmocka_unit_test(sieve_access__hit_block_behind_the_hand__survives_a_scan),
		cmocka_unit_test(wtinylfu_access__scan__frequent_blocks_keep_the_main_cache),
		cmocka_unit_test(wtinylfu_access__reset__old_counts_fade),
		cmocka_unit_test(lecar_access__experts_agree__same_result_for_every_seed),
		cmocka_unit_test(lecar_access__same_seed__reproducible),
		cmocka_unit_test(lecar_access__history_hit__other_expert_weight_grows),
		cmocka_unit_test(belady_access__classic_example__optimal_hit_count),
		cmocka_unit_test(belady_access__bypass__keeps_block_used_sooner),
		cmocka_unit_test(belady_access__random_traces__match_exhaustive_optimum),
		cmocka_unit_test(belady_access__stream_mismatch__throws),
		cmocka_unit_test(loop_access__larger_than_cache__lru_fifo_clock_hit_nothing),
		cmocka_unit_test(loop_access__larger_than_cache__mru_keeps_about_c_minus_1),
		cmocka_unit_test(loop_access__larger_than_cache__belady_bypass_hits_c_per_iteration),
		cmocka_unit_test(ubm_access__loop_and_scan__loop_blocks_survive_scan),
		cmocka_unit_test(ubm_access__loop_and_hot_blocks__keeps_hot_blocks_and_loop_start),
		cmocka_unit_test(ubm_access__loop_and_one_time_blocks__one_time_blocks_go_first),
		cmocka_unit_test(every_policy_access__capacity_1__holds_only_last_block),
		cmocka_unit_test(every_policy_access__random_trace__never_holds_more_than_capacity),
		cmocka_unit_test(every_policy_access__random_trace__no_more_hits_than_belady),
		cmocka_unit_test(every_policy_make__capacity_0__throws),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
