// SPDX-License-Identifier: MIT
// Bounds-first device selection (csd/select_bounds_first.hpp): the pure page choice on hand-made bounds
// (order, ties, NaN, margin), the exact top-k when the bounds separate the pages (a constructed case,
// with the kernels' own bounds and scores), the device bytes never above the exact scan's, and the
// emulated backend inside a KvStore choosing exactly what the pure functions choose, with the bytes
// they predict and the exact store's selection on separated keys.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"

#include "csd/select_bounds_first.hpp"
#include "csd/timing_model.hpp"
#include "kv/kv_store.hpp"
#include "kv/policy_select.hpp"
#include "kvio/slab.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace llmcache;
using namespace llmcache::csd;

namespace {

void bounds_first_pages__best_bounds_until_margin_k__ascending(void **)
{
	const float nan = std::nanf("");
	// bounds by page: 5, 9, 9, nan, 7, 1; 32 tokens each but page 4 (10 tokens)
	std::vector<PageBound> b = {{0, 32, 5}, {32, 32, 9}, {64, 32, 9}, {96, 32, nan}, {128, 10, 7}, {160, 32, 1}};
	// k 40, margin 1: 40 tokens: pages 1 and 2 (tie broken by position) hold 64
	assert_true((bounds_first_pages(b, 40, 1.0) == std::vector<uint32_t>{1, 2}));
	// k 40, margin 2: 80 tokens: 1, 2 (64), then 4 (74), then 0 (106)
	assert_true((bounds_first_pages(b, 40, 2.0) == std::vector<uint32_t>{0, 1, 2, 4}));
	// k 1: the best page alone; the lower position wins the tie
	assert_true((bounds_first_pages(b, 1, 1.0) == std::vector<uint32_t>{1}));
	// NaN ranks last: asking for everything but one page leaves the NaN page out
	assert_true((bounds_first_pages(b, 138, 1.0) == std::vector<uint32_t>{0, 1, 2, 4, 5}));
	// more than the pages hold: all of them; k 0: none
	assert_int_equal(bounds_first_pages(b, 1000, 1.5).size(), b.size());
	assert_true(bounds_first_pages(b, 0, 2.0).empty());
	// a margin below 1 counts as 1
	assert_true((bounds_first_pages(b, 40, 0.1) == std::vector<uint32_t>{1, 2}));
	// separation: pages left out (0, 3, 4, 5) against the k-th exact score
	const std::vector<uint32_t> taken = {1, 2};
	std::vector<PageBound> sep = b;
	sep[3].bound = 2;
	assert_true(bounds_separate(sep, taken, 7.5f));
	assert_false(bounds_separate(sep, taken, 7.0f)); // page 4's bound 7 reaches it
	assert_false(bounds_separate(b, taken, 7.5f));	 // a NaN bound proves nothing
	assert_false(bounds_separate(sep, taken, nan));
}

// Exact scores of a page of fp32 keys (rows of dims), with the kernel.
std::vector<csd_score> exact_scores(const std::vector<float> &q, const float *keys, uint32_t n, uint32_t first,
				    uint32_t qh, uint32_t kvh, uint32_t hd)
{
	std::vector<csd_score> out(n);
	uint32_t blocks = 0;
	score_exact(q.data(), reinterpret_cast<const uint32_t *>(keys), n, first, qh, kvh, hd, CSD_FP32, n, out.data(),
		    &blocks);
	return out;
}

// A constructed case: 24 pages of 8 tokens; 3 "hot" pages hold keys along the query (large scores),
// the others keys of small magnitude against it, so that every cold page's bound is below every hot
// token's score. The pages taken by bound are the hot ones, and scored exactly they give the exact
// top-k of all tokens, for k from 4 to 24.
void bounds_first__separated_pages__exact_top_k(void **)
{
	const uint32_t QH = 4, KVH = 2, HD = 16, DIMS = KVH * HD, PT = 8, PAGES = 24;
	std::mt19937 rng(7);
	std::uniform_real_distribution<float> u(-1, 1);
	std::vector<float> q(QH * HD);
	for (float &x : q)
		x = u(rng);
	std::vector<float> qg(DIMS, 0); // the query summed per KV head group, as the kernels do
	for (uint32_t h = 0; h < QH; h++)
		for (uint32_t d = 0; d < HD; d++)
			qg[(h / (QH / KVH)) * HD + d] += q[h * HD + d];
	const std::vector<uint32_t> hot = {5, 11, 17};
	std::vector<float> keys((size_t)PAGES * PT * DIMS);
	for (uint32_t p = 0; p < PAGES; p++)
		for (uint32_t t = 0; t < PT; t++)
			for (uint32_t d = 0; d < DIMS; d++) {
				const bool h = std::count(hot.begin(), hot.end(), p);
				const float sign = qg[d] >= 0 ? 1.0f : -1.0f;
				keys[((size_t)p * PT + t) * DIMS + d] = h ? sign * (1.0f + 0.5f * (u(rng) + 1)) : 0.05f * u(rng);
			}
	std::vector<PageBound> bounds;
	std::vector<csd_score> all;
	for (uint32_t p = 0; p < PAGES; p++) {
		std::vector<float> mn(DIMS, INFINITY), mx(DIMS, -INFINITY);
		for (uint32_t t = 0; t < PT; t++)
			for (uint32_t d = 0; d < DIMS; d++) {
				mn[d] = std::min(mn[d], keys[((size_t)p * PT + t) * DIMS + d]);
				mx[d] = std::max(mx[d], keys[((size_t)p * PT + t) * DIMS + d]);
			}
		csd_score b;
		uint32_t blocks = 0, pos = p * PT;
		score_quest_bounds(q.data(), mn.data(), mx.data(), 1, &pos, QH, KVH, HD, 1, &b, &blocks);
		bounds.push_back({pos, PT, b.score});
		const auto s = exact_scores(q, &keys[(size_t)p * PT * DIMS], PT, pos, QH, KVH, HD);
		all.insert(all.end(), s.begin(), s.end());
	}
	for (size_t k : {size_t(4), size_t(8), size_t(20), size_t(24)}) {
		kv::policy::SelectPlan plan{PAGES * PT, 0, PAGES * PT, k};
		const auto exact = kv::policy::select_tokens(plan, all);
		// a margin that covers the hot pages' 24 tokens: those pages, and then no page left out reaches
		// the k-th score
		const auto taken = bounds_first_pages(bounds, k, 24.0 / (double)k);
		assert_true(taken == hot);
		std::vector<csd_score> mine;
		for (uint32_t i : taken) {
			assert_true(std::count(hot.begin(), hot.end(), i));
			const auto s = exact_scores(q, &keys[(size_t)i * PT * DIMS], PT, i * PT, QH, KVH, HD);
			mine.insert(mine.end(), s.begin(), s.end());
		}
		const auto got = kv::policy::select_tokens(plan, mine);
		assert_true(got == exact);
		std::vector<csd_score> sorted = mine;
		std::sort(sorted.begin(), sorted.end(), [](auto &a, auto &b) { return a.score > b.score; });
		assert_true(bounds_separate(bounds, taken, sorted[k - 1].score));
	}
	// A cold page whose bound reaches the hot scores: no longer separated, and the check says so.
	std::vector<PageBound> loose = bounds;
	loose[0].bound = 1e9f;
	const auto taken = bounds_first_pages(loose, 8, 1.0);
	assert_true((taken == std::vector<uint32_t>{0}));
	assert_false(bounds_separate(loose, taken, 0.0f));
}

// For many shapes, page sizes and choices, the bounds-first bytes never exceed the exact scan's whole
// slabs (equal to the K payload's blocks when every page is taken), and shrink with fewer pages.
void bounds_first_bytes__any_shape__at_most_exact(void **)
{
	std::mt19937 rng(3);
	for (int round = 0; round < 500; round++) {
		const uint32_t kvh = 1 + rng() % 8, hd = 8 * (1 + rng() % 32), qh = kvh * (1 + rng() % 4);
		const uint32_t pt = 1 + rng() % 64, dtype = rng() % 3;
		const KvGeometry g{qh, kvh, hd, dtype, pt};
		const uint64_t payload = std::max(g.k_payload(pt), pt * g.row_bytes());
		const uint64_t slab = (64 + payload + 4095) / 4096 * 4096;
		const size_t pages = 1 + rng() % 40;
		std::vector<PageBound> b;
		for (size_t i = 0; i < pages; i++)
			b.push_back({(uint32_t)i * pt, pt, (float)(rng() % 100)});
		std::vector<uint32_t> every(pages);
		for (size_t i = 0; i < pages; i++)
			every[i] = (uint32_t)i;
		const uint64_t all = bounds_first_bytes(g, b, every), exact = exact_scan_bytes(slab, pages);
		assert_true(all <= exact);
		assert_int_equal(all, pages * ((g.k_payload(pt) + 4095) / 4096 * 4096));
		const auto taken = bounds_first_pages(b, 1 + rng() % (pages * pt), 1 + (rng() % 4) / 2.0);
		const uint64_t some = bounds_first_bytes(g, b, taken);
		assert_true(some <= all);
		assert_int_equal(some, pages * bounds_layout(g).bound_blocks * 4096ull +
					       taken.size() * (bounds_layout(g).key_end(g, pt) - bounds_layout(g).bound_blocks) *
						       4096ull);
	}
}

uint16_t to_half(float f)
{
	// Round to nearest of fp16 for the values used here (normal range, |f| < 4).
	uint32_t b;
	std::memcpy(&b, &f, 4);
	const uint32_t sign = (b >> 16) & 0x8000u;
	int e = (int)((b >> 23) & 0xff) - 127 + 15;
	if (e <= 0)
		return (uint16_t)sign;
	const uint32_t m = (b & 0x7fffffu) + 0x1000u;
	if (m & 0x800000u)
		e++;
	return (uint16_t)(sign | (uint32_t)e << 10 | ((m >> 13) & 0x3ffu));
}

struct Keys {
	uint32_t kvh, hd, dims;
	std::vector<uint16_t> k, v;
};

// Structured keys: sink tokens and one page in 8 lean along dir (hot pages), the rest small random.
Keys make_keys(uint32_t n, uint32_t kvh, uint32_t hd, const std::vector<float> &dir, bool separated)
{
	Keys K{kvh, hd, kvh * hd, {}, {}};
	std::mt19937 rng(11);
	std::uniform_real_distribution<float> u(-1, 1);
	for (uint32_t t = 0; t < n; t++) {
		const bool hot = (t / 32) % 8 == 3 || t < 4;
		for (uint32_t d = 0; d < K.dims; d++) {
			const float x = hot ? dir[d] * (0.6f + 0.3f * (u(rng) + 1) / 2) : (separated ? 0.02f : 0.6f) * u(rng);
			K.k.push_back(to_half(x));
			K.v.push_back(to_half(u(rng)));
		}
	}
	return K;
}

// A KvStore with the emulated backend and bounds-first selection, against the pure functions run on
// the same keys and residency, and against the exact store: same selection as the pure choice, device
// bytes as predicted and below the exact scan's; on separated keys the exact store's selection.
void run_store(uint32_t kvh, uint32_t hd, bool separated, double margin)
{
	const uint32_t QH = 2 * kvh, P = 32, N = 2048, BUDGET = N / 10;
	std::vector<float> dir(kvh * hd);
	for (size_t i = 0; i < dir.size(); i++)
		dir[i] = ((i * 2654435761u) >> 7) & 1 ? 1.0f : -1.0f;
	const Keys K = make_keys(N + 8, kvh, hd, dir, separated);
	const KvGeometry g{QH, kvh, hd, CSD_FP16, P};
	std::unique_ptr<kv::KvStore> bf, ex;
	for (int which = 0; which < 2; which++) {
		kv::KvOptions o;
		o.device = kv_test::make_device(64ull << 20);
		o.backend = "emulated";
		o.emulated.internal_bandwidth = 1e12; // no pacing to speak of
		o.emulated.compute_rate = 1e15;
		o.cpu_budget = (uint64_t)N * 2 * g.row_bytes() / 4;
		o.recent_tokens = 64;
		o.device_select = which ? DeviceSelect::Exact : DeviceSelect::BoundsFirst;
		o.device_margin = margin;
		std::string err;
		assert_int_equal(kv::KvStore::open({1, QH, kvh, hd, CSD_FP16, N + 64}, o, which ? ex : bf, err), 0);
	}
	for (auto *s : {&bf, &ex})
		for (uint32_t t = 0; t < N; t++)
			assert_true((*s)->append(0, &K.k[(size_t)t * K.dims], &K.v[(size_t)t * K.dims]) >= 0);
	uint64_t pure_bytes = 0;
	const kv::KvStats b0 = bf->stats(), e0 = ex->stats();
	for (uint32_t step = 0; step < 4; step++) {
		std::vector<float> q(QH * hd);
		for (uint32_t h = 0; h < QH; h++)
			for (uint32_t d = 0; d < hd; d++)
				q[h * hd + d] = dir[(h / 2) * hd + d] + 0.3f * std::sin(1.0f + h * 7 + d * 3 + step);
		// The pure reference, on the residency the store has now.
		const uint32_t n = bf->tokens(0);
		const kv::policy::SelectPlan plan = kv::policy::plan_select(n, 4, 64, BUDGET);
		std::vector<PageBound> bounds;
		std::vector<csd_score> scores;
		auto page_scores = [&](uint32_t pg) {
			const uint32_t cnt = std::min(P, n - pg * P);
			std::vector<float> keys((size_t)cnt * K.dims);
			for (size_t i = 0; i < keys.size(); i++)
				keys[i] = csd_half_to_float(K.k[(size_t)pg * P * K.dims + i]);
			return std::make_pair(keys, cnt);
		};
		std::vector<uint32_t> dev_pages;
		for (uint32_t pg = 0; pg * P < n; pg++) {
			if (!plan.scored(pg, P))
				continue;
			auto [keys, cnt] = page_scores(pg);
			std::vector<uint32_t> words(keys.size() / 2);
			std::memcpy(words.data(), &K.k[(size_t)pg * P * K.dims], keys.size() * 2);
			if (bf->resident(0, pg * P)) {
				std::vector<csd_score> s(cnt);
				uint32_t blocks = 0;
				score_exact(q.data(), words.data(), cnt, pg * P, QH, kvh, hd, CSD_FP16, cnt, s.data(), &blocks);
				scores.insert(scores.end(), s.begin(), s.end());
				continue;
			}
			std::vector<float> mn(K.dims, INFINITY), mx(K.dims, -INFINITY);
			for (uint32_t t = 0; t < cnt; t++)
				for (uint32_t d = 0; d < K.dims; d++)
					mn[d] = std::min(mn[d], keys[t * K.dims + d]), mx[d] = std::max(mx[d], keys[t * K.dims + d]);
			csd_score b;
			uint32_t blocks = 0, pos = pg * P;
			score_quest_bounds(q.data(), mn.data(), mx.data(), 1, &pos, QH, kvh, hd, 1, &b, &blocks);
			bounds.push_back({pos, cnt, b.score});
			dev_pages.push_back(pg);
		}
		assert_false(dev_pages.empty());
		const auto taken = bounds_first_pages(bounds, plan.k, margin);
		assert_true(taken.size() < dev_pages.size());
		for (uint32_t i : taken) {
			const uint32_t pg = dev_pages[i];
			std::vector<uint32_t> words((size_t)P * K.dims / 2);
			std::memcpy(words.data(), &K.k[(size_t)pg * P * K.dims], (size_t)P * K.dims * 2);
			std::vector<csd_score> s(P);
			uint32_t blocks = 0;
			score_exact(q.data(), words.data(), P, pg * P, QH, kvh, hd, CSD_FP16, P, s.data(), &blocks);
			scores.insert(scores.end(), s.begin(), s.end());
		}
		const auto want = kv::policy::select_tokens(plan, scores);
		pure_bytes += bounds_first_bytes(g, bounds, taken);
		kv::KvSelection sb, se;
		assert_int_equal(bf->select(0, q.data(), BUDGET, sb), 0);
		assert_int_equal(ex->select(0, q.data(), BUDGET, se), 0);
		assert_true(sb.positions == want);
		if (separated)
			assert_true(sb.positions == se.positions);
		// the rows returned are the appended ones
		for (size_t i = 0; i < sb.positions.size(); i++)
			assert_memory_equal(&sb.k[i * g.row_bytes()], &K.k[(size_t)sb.positions[i] * K.dims], g.row_bytes());
		// next step's token, to both
		for (auto *s : {&bf, &ex})
			assert_true((*s)->append(0, &K.k[(size_t)(N + step) * K.dims], &K.v[(size_t)(N + step) * K.dims]) >= 0);
	}
	const kv::KvStats b1 = bf->stats(), e1 = ex->stats();
	const uint64_t bf_bytes = b1.device.flash_bytes - b0.device.flash_bytes;
	const uint64_t ex_bytes = e1.device.flash_bytes - e0.device.flash_bytes;
	assert_int_equal(bf_bytes, pure_bytes);
	assert_true(bf_bytes < ex_bytes);
	assert_int_equal(e1.device.bound_pages - e0.device.bound_pages, 0);
	assert_true(b1.device.exact_pages - b0.device.exact_pages < b1.device.bound_pages - b0.device.bound_pages);
}

// 4 KV heads x 128 (bounds 4 KiB: one block of their own) and 2 x 64 (bounds 1 KiB, sharing their
// block with the first keys), on separated and on overlapping keys. On separated keys the margin (2)
// takes every hot page: 8 pages of 32 tokens against k = 136.
void emulated_bounds_first__store__equals_pure_function(void **)
{
	run_store(4, 128, true, 2.0);
	run_store(4, 128, false, 1.5);
	run_store(2, 64, true, 2.0);
	run_store(2, 64, false, 1.0);
}

// The timing model's first stage, hand-computed (1 GB/s flash, 1 G MAC/s, no latencies or overheads):
// bounds read 1 MB (0-1 ms), scored 0.5 M MACs (1-1.5 ms); only then the chosen keys, 2 MB (1.5-3.5
// ms), scored 1 M MACs (3.5-4.5 ms). The exact scan of 8 MB takes 8 + 1 ms. More bounds work never
// predicts a faster step.
void predict_step__bounds_stage__before_the_key_read(void **)
{
	SmartSsdTiming p;
	p.flash_read_bw = 1e9, p.fpga_mac_rate = 1e9, p.pcie_bw = 1e9, p.host_score_rate = 1e8;
	p.flash_read_latency_s = 0, p.kernel_run_overhead_s = 0;
	StepWork w;
	w.pipelined = false;
	w.layer.bound_flash_bytes = 1e6, w.layer.bound_macs = 0.5e6, w.layer.bound_pages = 1;
	w.layer.device_flash_bytes = 2e6, w.layer.device_tokens = 1e3, w.layer.macs_per_token = 1e3, w.layer.kernel_runs = 1;
	const StepTiming t = predict_step(p, w);
	assert_true(std::fabs(t.step_s - 4.5e-3) < 1e-12);
	assert_true(std::fabs(t.critical_s[(unsigned)Resource::Flash] - 3e-3) < 1e-12);
	assert_true(std::fabs(t.critical_s[(unsigned)Resource::Fpga] - 1.5e-3) < 1e-12);
	StepWork exact = w;
	exact.layer.bound_flash_bytes = exact.layer.bound_macs = exact.layer.bound_pages = 0;
	exact.layer.device_flash_bytes = 8e6;
	assert_true(std::fabs(predict_step(p, exact).step_s - 9e-3) < 1e-12);
	for (double *q : {&w.layer.bound_flash_bytes, &w.layer.bound_macs, &w.layer.bound_runs}) {
		const double keep = *q;
		*q = keep * 1.5 + 1;
		assert_true(predict_step(p, w).step_s >= t.step_s);
		*q = keep;
	}
}

void open__margin_below_one__refused(void **)
{
	kv::KvOptions o;
	o.device_margin = 0.5;
	std::unique_ptr<kv::KvStore> s;
	std::string err;
	assert_int_equal(kv::KvStore::open({1, 2, 1, 8, CSD_FP16, 64}, o, s, err), -EINVAL);
	assert_true(err.find("margin") != std::string::npos);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bounds_first_pages__best_bounds_until_margin_k__ascending),
		cmocka_unit_test(bounds_first__separated_pages__exact_top_k),
		cmocka_unit_test(bounds_first_bytes__any_shape__at_most_exact),
		cmocka_unit_test(emulated_bounds_first__store__equals_pure_function),
		cmocka_unit_test(predict_step__bounds_stage__before_the_key_read),
		cmocka_unit_test(open__margin_below_one__refused),
	};
	const int r = cmocka_run_group_tests(tests, nullptr, nullptr);
	kv_test::cleanup_devices();
	return r;
}
