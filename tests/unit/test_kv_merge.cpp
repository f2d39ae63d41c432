// SPDX-License-Identifier: MIT
// The incremental Score Block merge: equal to a one-shot ranking of all scores whatever the arrival
// order and block sizes, ties and NaN included; sink and recent tokens always kept and never counted.
#include "cmocka_cpp.hpp"

#include "kv/score_merge.hpp"

#include <algorithm>
#include <cmath>
#include <random>

using llmcache::kv::ScoreMerge;

namespace {

std::vector<uint32_t> one_shot(std::vector<csd_score> s, size_t k, uint32_t sink, uint32_t recent_from, uint32_t n)
{
	std::vector<uint32_t> out;
	for (uint32_t p = 0; p < n; p++)
		if (p < sink || p >= recent_from)
			out.push_back(p);
	std::erase_if(s, [&](const csd_score &x) { return x.pos < sink || x.pos >= recent_from; });
	std::sort(s.begin(), s.end(), [](const csd_score &a, const csd_score &b) {
		const bool an = std::isnan(a.score), bn = std::isnan(b.score);
		if (an != bn)
			return bn;
		if (!an && a.score != b.score)
			return a.score > b.score;
		return a.pos < b.pos;
	});
	for (size_t i = 0; i < std::min(k, s.size()); i++)
		out.push_back(s[i].pos);
	std::sort(out.begin(), out.end());
	return out;
}

void merge__shuffled_blocks__equals_one_shot_ranking(void **)
{
	std::mt19937 rng(11);
	for (int round = 0; round < 200; round++) {
		const uint32_t n = 1 + rng() % 700, sink = rng() % 8, recent_from = std::max<uint32_t>(sink, n - rng() % 40);
		const size_t k = rng() % 100;
		std::vector<csd_score> all(n);
		for (uint32_t p = 0; p < n; p++) {
			const uint32_t r = rng() % 20;
			all[p] = {p, r == 0 ? NAN : (float)(rng() % 17) - 8.0f}; // many ties, some NaN
		}
		const auto want = one_shot(all, k, sink, recent_from, n);
		for (int order = 0; order < 4; order++) {
			std::shuffle(all.begin(), all.end(), rng);
			ScoreMerge m(k, sink, recent_from);
			for (size_t i = 0; i < all.size();) {
				const size_t b = std::min<size_t>(1 + rng() % 64, all.size() - i);
				m.add(all.data() + i, b);
				i += b;
			}
			assert_true(m.select(n) == want);
		}
	}
}

void merge__k_zero__only_sink_and_recent(void **)
{
	ScoreMerge m(0, 2, 8);
	const csd_score s[] = {{3, 100.0f}, {5, 50.0f}};
	m.add(s, 2);
	assert_true(m.select(10) == (std::vector<uint32_t>{0, 1, 8, 9}));
	assert_int_equal(m.seen(), 0);
}

void merge__kept_tokens_scored__never_take_a_topk_place(void **)
{
	ScoreMerge m(2, 1, 5);
	const csd_score s[] = {{0, 99.0f}, {6, 98.0f}, {2, 1.0f}, {3, 3.0f}, {4, 2.0f}};
	m.add(s, 5);
	assert_true(m.select(7) == (std::vector<uint32_t>{0, 3, 4, 5, 6}));
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(merge__shuffled_blocks__equals_one_shot_ranking),
		cmocka_unit_test(merge__k_zero__only_sink_and_recent),
		cmocka_unit_test(merge__kept_tokens_scored__never_take_a_topk_place),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
