// SPDX-License-Identifier: MIT
// The in-storage scoring kernels built as plain C++: dtype conversion, exact GQA scores against a
// direct double-precision sum, Quest page bounds as true upper bounds, Score Block publication, CRC32C.
#include "cmocka_cpp.hpp"

#include "csd/kernels/kernel_common.h"
#include "kvio/crc32c.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace {

double half_reference(uint16_t h)
{
	const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
	return s ? -v : v;
}

void half_to_float__every_bit_pattern__matches_reference(void **)
{
	for (uint32_t h = 0; h < 65536; h++) {
		const float got = csd_half_to_float((uint16_t)h);
		const double want = half_reference((uint16_t)h);
		if (std::isnan(want)) {
			assert_true(std::isnan(got));
			continue;
		}
		assert_true((double)got == want);
		assert_int_equal(std::signbit(got), (h >> 15) != 0);
	}
	assert_true(csd_half_to_float(0x3c00) == 1.0f);
	assert_true(csd_half_to_float(0x7bff) == 65504.0f);
	assert_true(csd_bf16_to_float(0x3f80) == 1.0f);
	assert_true(csd_bf16_to_float(0xc040) == -3.0f);
}

uint16_t small_int_to_half(int v) // exact for |v| < 2048
{
	if (v == 0)
		return 0;
	const uint16_t sign = v < 0 ? 0x8000 : 0;
	uint32_t a = std::abs(v), e = 0;
	while ((a >> e) > 1)
		e++;
	return sign | (uint16_t)((e + 15) << 10) | (uint16_t)(((a << 10) >> e) & 0x3ff);
}

uint16_t small_int_to_bf16(int v)
{
	const float f = (float)v;
	uint32_t b;
	std::memcpy(&b, &f, 4);
	return (uint16_t)(b >> 16);
}

// Keys, query and expected scores for q_heads/kv_heads GQA with small integers: exact in every dtype.
void check_exact(uint32_t dtype, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim, uint32_t n, uint32_t block)
{
	std::mt19937 rng(dtype * 131 + q_heads * 7 + n);
	std::uniform_int_distribution<int> small(-4, 4);
	const uint32_t dims = kv_heads * head_dim;
	std::vector<int> kint((size_t)n * dims);
	std::vector<float> q((size_t)q_heads * head_dim);
	for (auto &x : kint)
		x = small(rng);
	for (auto &x : q)
		x = (float)small(rng);
	std::vector<uint32_t> words(dtype == CSD_FP32 ? kint.size() : (kint.size() + 1) / 2);
	for (size_t i = 0; i < kint.size(); i++) {
		if (dtype == CSD_FP32) {
			const float f = (float)kint[i];
			std::memcpy(&words[i], &f, 4);
		} else {
			const uint16_t h = dtype == CSD_FP16 ? small_int_to_half(kint[i]) : small_int_to_bf16(kint[i]);
			words[i / 2] |= (uint32_t)h << (i % 2 ? 16 : 0);
		}
	}
	std::vector<csd_score> out(n);
	uint32_t blocks = 0;
	score_exact(q.data(), words.data(), n, 1000, q_heads, kv_heads, head_dim, dtype, block, out.data(), &blocks);
	assert_int_equal(blocks, (n + block - 1) / block);
	const uint32_t group = q_heads / kv_heads;
	for (uint32_t t = 0; t < n; t++) {
		double want = 0;
		for (uint32_t h = 0; h < q_heads; h++)
			for (uint32_t d = 0; d < head_dim; d++)
				want += (double)q[h * head_dim + d] * kint[(size_t)t * dims + (h / group) * head_dim + d];
		assert_int_equal(out[t].pos, 1000 + t);
		assert_true((double)out[t].score == want);
	}
}

void score_exact__gqa_each_dtype__equals_direct_sum(void **)
{
	for (uint32_t dt : {CSD_FP32, CSD_FP16, CSD_BF16}) {
		check_exact(dt, 8, 2, 16, 37, 8);
		check_exact(dt, 4, 4, 7, 5, 64); // odd head dim: halves straddle words
		check_exact(dt, 32, 8, 128, 17, 4);
	}
}

// The kernel's rounding, written out: CSD_LANES partial sums (lane l takes dims l, l + 16, ...), each
// product rounded before its add, then the lanes summed in order. Whatever path the host takes (the
// AVX2 form where present), score_exact must give exactly these bits on random keys.
float sixteen_lane_dot(const float *qg, const std::vector<float> &k, size_t row, uint32_t dims)
{
	float part[CSD_LANES] = {};
	for (uint32_t i = 0; i < dims; i++) {
		const volatile float prod = qg[i] * k[row + i]; // volatile: no fused multiply-add
		part[i % CSD_LANES] += prod;
	}
	float acc = 0.0f;
	for (float p : part)
		acc += p;
	return acc;
}

void score_exact__random_keys_each_path__same_bits_as_sixteen_lanes(void **)
{
	std::mt19937 rng(7);
	std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
	for (uint32_t dt : {CSD_FP32, CSD_FP16}) {
		for (uint32_t head_dim : {128u, 40u, 7u}) {
			const uint32_t q_heads = 4, kv_heads = 2, dims = kv_heads * head_dim, n = 33;
			std::vector<float> q(q_heads * head_dim), keys((size_t)n * dims), qg(dims, 0.0f);
			for (auto &x : q)
				x = uni(rng);
			std::vector<uint32_t> words(dt == CSD_FP32 ? keys.size() : (keys.size() + 1) / 2);
			for (size_t i = 0; i < keys.size(); i++) {
				const uint16_t h = (uint16_t)(rng() & 0x7fff ? rng() & 0xfbff : 0); // finite halves
				keys[i] = dt == CSD_FP32 ? uni(rng) : csd_half_to_float(h);
				if (dt == CSD_FP32)
					std::memcpy(&words[i], &keys[i], 4);
				else
					words[i / 2] |= (uint32_t)h << (i % 2 ? 16 : 0);
			}
			for (uint32_t h = 0; h < q_heads; h++)
				for (uint32_t d = 0; d < head_dim; d++)
					qg[(h / 2) * head_dim + d] += q[h * head_dim + d];
			std::vector<csd_score> out(n);
			uint32_t blocks = 0;
			score_exact(q.data(), words.data(), n, 0, q_heads, kv_heads, head_dim, dt, 64, out.data(), &blocks);
			for (uint32_t t = 0; t < n; t++) {
				const float want = sixteen_lane_dot(qg.data(), keys, (size_t)t * dims, dims);
				assert_memory_equal(&out[t].score, &want, sizeof(float));
			}
		}
	}
}

void score_exact__invalid_shape__writes_nothing(void **)
{
	float q[4] = {1, 1, 1, 1};
	uint32_t keys[4] = {0, 0, 0, 0}, blocks = 0;
	csd_score out[2] = {{7, 7}, {7, 7}};
	score_exact(q, keys, 2, 0, 3, 2, 2, CSD_FP32, 1, out, &blocks); // 3 query heads on 2 KV heads
	assert_int_equal(blocks, 0);
	assert_int_equal(out[0].pos, 7);
}

void score_quest_bounds__random_pages__bound_every_token(void **)
{
	std::mt19937 rng(3);
	std::normal_distribution<float> nd;
	const uint32_t qh = 8, kvh = 2, hd = 16, dims = kvh * hd, P = 16, pages = 6;
	std::vector<float> q(qh * hd), keys((size_t)pages * P * dims), kmin((size_t)pages * dims, INFINITY),
		kmax((size_t)pages * dims, -INFINITY);
	for (auto &x : q)
		x = nd(rng);
	for (size_t i = 0; i < keys.size(); i++) {
		keys[i] = nd(rng);
		const size_t pg = i / (P * dims), d = i % dims;
		kmin[pg * dims + d] = std::min(kmin[pg * dims + d], keys[i]);
		kmax[pg * dims + d] = std::max(kmax[pg * dims + d], keys[i]);
	}
	std::vector<uint32_t> pos(pages);
	for (uint32_t p = 0; p < pages; p++)
		pos[p] = p * P;
	std::vector<csd_score> bounds(pages), exact(pages * P);
	uint32_t bb = 0, eb = 0;
	score_quest_bounds(q.data(), kmin.data(), kmax.data(), pages, pos.data(), qh, kvh, hd, 4, bounds.data(), &bb);
	assert_int_equal(bb, 2);
	score_exact(q.data(), reinterpret_cast<const uint32_t *>(keys.data()), pages * P, 0, qh, kvh, hd, CSD_FP32, 64,
		    exact.data(), &eb);
	for (uint32_t t = 0; t < pages * P; t++)
		assert_true(exact[t].score <= bounds[t / P].score + 1e-4f);
	for (uint32_t p = 0; p < pages; p++)
		assert_int_equal(bounds[p].pos, p * P);
}

void crc32c__check_value_and_chaining__standard(void **)
{
	using llmcache::kv::crc32c;
	assert_int_equal(crc32c("123456789", 9), 0xe3069283u);
	assert_int_equal(crc32c("", 0), 0);
	std::vector<uint8_t> buf(10007);
	for (size_t i = 0; i < buf.size(); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	const uint32_t whole = crc32c(buf.data(), buf.size());
	assert_int_equal(crc32c(buf.data() + 4001, buf.size() - 4001, crc32c(buf.data(), 4001)), whole);
	buf[5000] ^= 1;
	assert_int_not_equal(crc32c(buf.data(), buf.size()), whole);
}

// The fast form (three interleaved crc32 streams joined by carry-less multiplies) equals the byte
// table for every length around the round size and for unaligned starts and chained calls.
void crc32c__fast_form_and_combine__equal_table(void **)
{
	using llmcache::kv::crc32c;
	using llmcache::kv::crc32c_portable;
	std::vector<uint8_t> buf(3 * 3 * 4096 + 999);
	uint64_t x = 12345;
	for (auto &b : buf)
		x ^= x << 13, x ^= x >> 7, x ^= x << 17, b = (uint8_t)x;
	for (size_t len : {0ul, 1ul, 7ul, 8ul, 12287ul, 12288ul, 12289ul, 24576ul, 30000ul, buf.size() - 3})
		for (size_t off : {0ul, 1ul, 3ul}) {
			assert_int_equal(crc32c(buf.data() + off, len), crc32c_portable(buf.data() + off, len));
			assert_int_equal(crc32c(buf.data() + off, len, 0xdeadbeef), crc32c_portable(buf.data() + off, len, 0xdeadbeef));
		}
	assert_int_equal(crc32c_portable("123456789", 9), 0xe3069283u);
	for (size_t split : {0ul, 1ul, 100ul, 4096ul, 20000ul, buf.size()})
		assert_int_equal(llmcache::kv::crc32c_combine(crc32c(buf.data(), split), crc32c(buf.data() + split, buf.size() - split),
							      buf.size() - split),
				 crc32c(buf.data(), buf.size()));
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(half_to_float__every_bit_pattern__matches_reference),
		cmocka_unit_test(score_exact__gqa_each_dtype__equals_direct_sum),
		cmocka_unit_test(score_exact__random_keys_each_path__same_bits_as_sixteen_lanes),
		cmocka_unit_test(score_exact__invalid_shape__writes_nothing),
		cmocka_unit_test(score_quest_bounds__random_pages__bound_every_token),
		cmocka_unit_test(crc32c__check_value_and_chaining__standard),
		cmocka_unit_test(crc32c__fast_form_and_combine__equal_table),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
