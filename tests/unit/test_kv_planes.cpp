// SPDX-License-Identifier: MIT
// Two-plane precision (Documentation/kv.md, "Two-plane precision"): the split of elements into a high
// and a low plane and the merge back are bit-exact for fp16, bf16 and fp32; the high plane alone gives
// each element with its low half zeroed; the decision of which selected tokens get both planes ranks
// them as the selection does; and a store with the option on a device file (fp16, and fp32) reads fewer
// bytes for the low-importance tokens' V rows, returns them truncated, and full rows for the others.
// Devices: a loop device over a file in /tmp when root, else a file in /var/tmp, removed at the end.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"

#include "kv/kv_store.hpp"
#include "kv/policy_precision.hpp"
#include "kvio/planes.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

using namespace llmcache::kv;

namespace {

using kv_test::cleanup_devices;
using kv_test::make_device;

void split_merge(size_t elem)
{
	std::mt19937_64 rng(elem);
	const size_t n = 1001;
	std::vector<uint8_t> src(n * elem), hi(n * elem / 2), lo(n * elem / 2), back(n * elem), trunc(n * elem);
	for (auto &b : src)
		b = (uint8_t)rng();
	planes_split(src.data(), n, elem, hi.data(), lo.data());
	planes_merge(hi.data(), lo.data(), n, elem, back.data());
	assert_memory_equal(back.data(), src.data(), src.size());
	planes_merge(hi.data(), nullptr, n, elem, trunc.data());
	for (size_t i = 0; i < n; i++) {
		if (elem == 2) {
			uint16_t x, t;
			std::memcpy(&x, &src[2 * i], 2), std::memcpy(&t, &trunc[2 * i], 2);
			assert_int_equal(t, x & 0xff00u);
			assert_int_equal(hi[i], x >> 8);
		} else {
			uint32_t x, t;
			std::memcpy(&x, &src[4 * i], 4), std::memcpy(&t, &trunc[4 * i], 4);
			assert_int_equal(t, x & 0xffff0000u);
		}
	}
}

void planes__fp16_bf16_split_merge__bit_exact_and_high_only_truncated(void **) { split_merge(2); }
void planes__fp32_split_merge__bit_exact_and_high_only_truncated(void **) { split_merge(4); }

// fp16 keeps 2 mantissa bits in its high byte: the truncated value is within 25% below the value.
void planes__fp16_high_only__within_documented_error(void **)
{
	static const float *const half = csd_host_half_table();
	for (uint32_t x = 0x0400; x < 0x7c00; x += 7) { // every 7th normal positive fp16
		const float v = half[x], t = half[x & 0xff00];
		assert_true(t <= v && t > 0.75f * v);
	}
}

void precision__fraction__worst_scores_high_only(void **)
{
	const std::vector<csd_score> top = {{10, 0.5f}, {3, 2.0f}, {7, -1.0f}, {12, 0.5f}, {5, 1.0f}};
	assert_true(policy::high_plane_only(top, 1.0).empty());
	assert_true((policy::high_plane_only(top, 0.0) == std::vector<uint32_t>{3, 5, 7, 10, 12}));
	// ceil(0.5 * 5) = 3 full: 3, 5, then 10 before 12 at equal score; 12 and 7 high-only
	assert_true((policy::high_plane_only(top, 0.5) == std::vector<uint32_t>{7, 12}));
	assert_true((policy::high_plane_only(top, 0.2) == std::vector<uint32_t>{5, 7, 10, 12}));
}

void open__bad_planes_options__refused(void **)
{
	KvShape s;
	s.layers = 1, s.q_heads = 2, s.kv_heads = 1, s.head_dim = 64, s.dtype = CSD_FP16, s.max_context = 1024;
	KvOptions o;
	o.planes.on = true, o.planes.full = 1.5;
	std::unique_ptr<KvStore> kv;
	std::string err;
	assert_int_equal(KvStore::open(s, o, kv, err), -EINVAL);
	assert_true(err.find("two-plane") != std::string::npos);
	o.planes.full = 0.5, o.aerp.budget = 128;
	assert_int_equal(KvStore::open(s, o, kv, err), -EINVAL);
}

// 8 KiB rows, pages of 32: 32 KV heads x 128 in fp16 (a multi-head-attention model), or 16 in fp32: a
// row's high plane is one 4 KiB block, its two planes two, as is the whole row without planes. (With
// rows of less than 4 KiB scattered rows cost a block either way: Documentation/kv.md.) Set by each
// store test before it runs.
uint32_t DTYPE = CSD_FP16, ELEM = 2, HEADS = 32, DIMS = HEADS * 128, ROW = 2 * DIMS;
constexpr uint32_t N = 1200;

void set_geometry(uint32_t dtype)
{
	DTYPE = dtype, ELEM = dtype == CSD_FP32 ? 4 : 2, HEADS = 64 / ELEM, DIMS = HEADS * 128, ROW = ELEM * DIMS;
}

std::unique_ptr<KvStore> make_store(bool planes, double full, const std::vector<uint8_t> &k, const std::vector<uint8_t> &v)
{
	KvShape s;
	s.layers = 1, s.q_heads = HEADS, s.kv_heads = HEADS, s.head_dim = 128, s.dtype = DTYPE, s.max_context = 8192;
	KvOptions o;
	o.device = make_device(96 << 20);
	o.page_tokens = 32, o.sink_tokens = 4, o.recent_tokens = 64, o.score_block = 16, o.queue_depth = 8;
	o.backend = "emulated"; // scores on its own fd: the pool's reads are the fetches alone
	o.cpu_budget = 8 * (8ull * DIMS + 2ull * 32 * ROW);
	o.planes.on = planes, o.planes.full = full;
	std::unique_ptr<KvStore> kv;
	std::string err;
	assert_int_equal(KvStore::open(s, o, kv, err), 0);
	for (uint32_t t = 0; t < N; t++)
		assert_int_equal(kv->append(0, &k[t * ROW], &v[t * ROW]), 0);
	assert_true(kv->stats().spilled_pages >= 20);
	return kv;
}

// The scores the store ranks by, computed here from the keys with the same kernel.
std::vector<float> scores_of(const std::vector<uint8_t> &k, const std::vector<float> &q)
{
	llmcache::csd::KvGeometry g{HEADS, HEADS, 128, DTYPE, 32};
	std::vector<uint8_t> payload(8ull * DIMS + (size_t)N * ROW);
	std::memcpy(payload.data() + 8ull * DIMS, k.data(), k.size());
	std::vector<float> out(N);
	llmcache::csd::score_page(g, llmcache::csd::Estimator::Exact, q.data(), payload.data(), 0, N, 16,
				  [&](const csd_score *s, size_t n) {
					  for (size_t i = 0; i < n; i++)
						  out[s[i].pos] = s[i].score;
				  });
	return out;
}

void store_test(uint32_t dtype)
{
	set_geometry(dtype);
	std::mt19937_64 rng(41);
	std::vector<uint8_t> k((size_t)N * ROW), v((size_t)N * ROW);
	for (auto &b : v)
		b = (uint8_t)rng();
	for (size_t i = 0; i < k.size() / ELEM; i++) {
		// keys: finite, of magnitude 1/8 to 8, random signs
		if (ELEM == 2) {
			const uint16_t hk = (uint16_t)((rng() & 0x83ff) | (12 + rng() % 6) << 10);
			std::memcpy(&k[2 * i], &hk, 2);
		} else {
			const uint32_t fk = (uint32_t)((rng() & 0x807fffff) | (124 + rng() % 6) << 23);
			std::memcpy(&k[4 * i], &fk, 4);
		}
	}
	const double full = 0.25;
	auto off = make_store(false, full, k, v), on = make_store(true, full, k, v);
	uint64_t high_rows = 0;
	for (uint32_t step = 0; step < 4; step++) {
		std::mt19937 qr(step);
		std::normal_distribution<float> nd;
		std::vector<float> q(HEADS * 128);
		for (auto &x : q)
			x = nd(qr);
		std::vector<bool> spilled(N);
		for (uint32_t t = 0; t < N; t++) {
			spilled[t] = !on->resident(0, t);
			assert_int_equal(spilled[t], !off->resident(0, t));
		}
		const KvStats b_off = off->stats(), b_on = on->stats();
		KvSelection s_off, s_on;
		assert_int_equal(off->select(0, q.data(), 150, s_off), 0);
		assert_int_equal(on->select(0, q.data(), 150, s_on), 0);
		const KvStats a_off = off->stats(), a_on = on->stats();
		assert_true(s_on.positions == s_off.positions);
		assert_memory_equal(s_on.k.data(), s_off.k.data(), s_off.k.size());
		// The expected decision, from the scores of the top-k (not sink, not recent).
		const std::vector<float> sc = scores_of(k, q);
		const uint32_t recent_from = N - 64;
		std::vector<csd_score> top;
		for (uint32_t p : s_on.positions)
			if (p >= 4 && p < recent_from)
				top.push_back({p, sc[p]});
		const std::vector<uint32_t> low = policy::high_plane_only(top, full);
		assert_true(!low.empty());
		uint64_t truncated = 0;
		for (size_t i = 0; i < s_on.positions.size(); i++) {
			const uint32_t p = s_on.positions[i];
			assert_memory_equal(&s_off.v[i * ROW], &v[(size_t)p * ROW], ROW);
			// truncated: spilled, not brought back whole, and among the low-importance ones
			const bool t = spilled[p] && !on->resident(0, p) && std::binary_search(low.begin(), low.end(), p);
			if (!t) {
				assert_memory_equal(&s_on.v[i * ROW], &v[(size_t)p * ROW], ROW);
				continue;
			}
			truncated++;
			for (uint32_t b = 0; b < ROW; b++) // each element's low half zero, its high half as appended
				assert_int_equal(s_on.v[i * ROW + b], b % ELEM < ELEM / 2 ? 0 : v[(size_t)p * ROW + b]);
		}
		assert_int_equal(a_on.plane_high_rows - b_on.plane_high_rows, truncated);
		high_rows += truncated;
		assert_true(a_on.storage.bytes_read - b_on.storage.bytes_read < a_off.storage.bytes_read - b_off.storage.bytes_read);
		assert_int_equal(a_off.plane_high_rows + a_off.plane_full_rows, 0);
	}
	assert_true(high_rows > 0);
	// A single token's read is full precision from the planes.
	for (uint32_t t = 100; t < 400; t += 37) {
		std::vector<uint8_t> kk(ROW), vv(ROW);
		assert_int_equal(on->read(0, t, kk.data(), vv.data()), 0);
		assert_memory_equal(vv.data(), &v[(size_t)t * ROW], ROW);
		assert_memory_equal(kk.data(), &k[(size_t)t * ROW], ROW);
	}
}

void select__planes_on_fp16__fewer_bytes_truncated_low_full_important(void **) { store_test(CSD_FP16); }
void select__planes_on_fp32__fewer_bytes_truncated_low_full_important(void **) { store_test(CSD_FP32); }

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(planes__fp16_bf16_split_merge__bit_exact_and_high_only_truncated),
		cmocka_unit_test(planes__fp32_split_merge__bit_exact_and_high_only_truncated),
		cmocka_unit_test(planes__fp16_high_only__within_documented_error),
		cmocka_unit_test(precision__fraction__worst_scores_high_only),
		cmocka_unit_test(open__bad_planes_options__refused),
		cmocka_unit_test(select__planes_on_fp16__fewer_bytes_truncated_low_full_important),
		cmocka_unit_test(select__planes_on_fp32__fewer_bytes_truncated_low_full_important),
	};
	const int r = cmocka_run_group_tests(tests, nullptr, nullptr);
	cleanup_devices();
	return r;
}
