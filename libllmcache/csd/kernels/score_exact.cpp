// SPDX-License-Identifier: MIT
/*
 * score_exact: exact attention importance of each token, the sum over query heads of q_h . k_t.
 *
 * HillInfer's in-storage importance evaluation (Sec. 3.2, Alg. 1) scores every spilled token next to
 * the flash and streams <token position, score> Score Blocks of n tokens to the host, so only the
 * selected KV crosses PCIe. With grouped-query attention query head h reads KV head h / (q_heads /
 * kv_heads); summing the query heads of a group first gives the same sum with kv_heads dot products
 * per token instead of q_heads. Keys are [token][kv_head][dim] in fp32, fp16 or bf16 (kernel_common.h).
 * Each dot product keeps CSD_LANES partial sums (one per unrolled lane, as an II=1 pipeline needs), so
 * its rounding differs from a sequential sum but is the same wherever this source runs.
 * After each block of block_tokens tokens the kernel stores the block count in *blocks_done, so a
 * consumer polling that word can merge each block as soon as it is complete.
 *
 * Vitis HLS style: the same file is synthesised for the SmartSSD's FPGA and built with g++ for the host
 * CPU pool and the emulated backend. Fixed maxima bound every loop; no heap, no STL.
 */
#include "kernel_common.h"

static inline void publish(uint32_t *blocks_done, uint32_t n)
{
#ifdef __SYNTHESIS__
	*blocks_done = n;
#else
	__atomic_store_n(blocks_done, n, __ATOMIC_RELEASE);
#endif
}

#ifdef __SYNTHESIS__
static inline float half(uint16_t h) { return csd_half_to_float(h); }
#else
// On a CPU a table of every fp16 value, filled by csd_half_to_float before main, converts several
// times faster than the arithmetic; the values are the same bits.
static float half_table[65536];
static const bool half_table_filled = [] {
	for (uint32_t i = 0; i < 65536; i++)
		half_table[i] = csd_half_to_float((uint16_t)i);
	return true;
}();
static inline float half(uint16_t h) { return half_table[h]; }
const float *csd_host_half_table() { return half_table_filled ? half_table : nullptr; }
#endif

template <uint32_t DT> static inline float key_at(const uint32_t *w, uint64_t i)
{
	if (DT == CSD_FP32)
		return csd_bits_to_float(w[i]);
	const uint16_t h = (uint16_t)(w[i >> 1] >> ((i & 1) * 16));
	return DT == CSD_FP16 ? half(h) : csd_bf16_to_float(h);
}

// q . k for one token, in CSD_LANES partial sums. 16-bit keys whose row starts on a word boundary are
// taken two per word read.
template <uint32_t DT> static float dot(const float *qg, const uint32_t *keys, uint64_t row, uint32_t dims)
{
	float part[CSD_LANES];
	for (uint32_t l = 0; l < CSD_LANES; l++)
		part[l] = 0.0f;
	const bool pairs = DT != CSD_FP32 && (row & 1) == 0;
	for (uint32_t i = 0; i < CSD_MAX_DIMS; i += CSD_LANES) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II = 1
#endif
		if (i >= dims)
			break;
		if (i + CSD_LANES > dims) {
			for (uint32_t l = 0; l < CSD_LANES; l++)
				if (i + l < dims)
					part[l] += qg[i + l] * key_at<DT>(keys, row + i + l);
		} else if (pairs) {
			const uint32_t *w = keys + ((row + i) >> 1);
#ifdef __SYNTHESIS__
#pragma HLS UNROLL
#else
#pragma GCC unroll 8
#endif
			for (uint32_t l = 0; l < CSD_LANES; l += 2) {
				const uint32_t x = w[l >> 1];
				const float lo = DT == CSD_FP16 ? half((uint16_t)x) : csd_bf16_to_float((uint16_t)x);
				const float hi = DT == CSD_FP16 ? half((uint16_t)(x >> 16)) : csd_bf16_to_float((uint16_t)(x >> 16));
				part[l] += qg[i + l] * lo;
				part[l + 1] += qg[i + l + 1] * hi;
			}
		} else {
#ifdef __SYNTHESIS__
#pragma HLS UNROLL
#else
#pragma GCC unroll 16
#endif
			for (uint32_t l = 0; l < CSD_LANES; l++)
				part[l] += qg[i + l] * key_at<DT>(keys, row + i + l);
		}
	}
	float acc = 0.0f;
	for (uint32_t l = 0; l < CSD_LANES; l++)
		acc += part[l];
	return acc;
}

#if !defined(__SYNTHESIS__) && defined(__x86_64__)
#include <immintrin.h>
// Host CPUs with AVX2 and F16C: the same dot product, lane for lane. Lanes 0-7 and 8-15 of the
// kernel's partial sums live in two 8-wide registers; each lane still does part += q * k with the
// product rounded before the add (no FMA), and vcvtph2ps converts exactly, so the result has the
// same bits as dot() while reading keys at memory speed.
template <uint32_t DT> __attribute__((target("avx2,f16c"))) static float dot_avx2(const float *qg,
										 const uint32_t *keys, uint64_t row,
										 uint32_t dims)
{
	__m256 p0 = _mm256_setzero_ps(), p1 = _mm256_setzero_ps();
	const uint32_t full = dims / CSD_LANES * CSD_LANES;
	for (uint32_t i = 0; i < full; i += CSD_LANES) {
		__m256 k0, k1;
		if (DT == CSD_FP32) {
			k0 = _mm256_loadu_ps(reinterpret_cast<const float *>(keys + row + i));
			k1 = _mm256_loadu_ps(reinterpret_cast<const float *>(keys + row + i + 8));
		} else {
			auto h = reinterpret_cast<const uint16_t *>(keys) + row + i;
			k0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h)));
			k1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h + 8)));
		}
		p0 = _mm256_add_ps(p0, _mm256_mul_ps(_mm256_loadu_ps(qg + i), k0));
		p1 = _mm256_add_ps(p1, _mm256_mul_ps(_mm256_loadu_ps(qg + i + 8), k1));
	}
	float part[CSD_LANES];
	_mm256_storeu_ps(part, p0);
	_mm256_storeu_ps(part + 8, p1);
	for (uint32_t l = 0; full + l < dims; l++)
		part[l] += qg[full + l] * key_at<DT>(keys, row + full + l);
	float acc = 0.0f;
	for (uint32_t l = 0; l < CSD_LANES; l++)
		acc += part[l];
	return acc;
}
static const bool host_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif

// One token's score with the dtype's dot product (the AVX2 form on hosts that have it).
static inline float token_dot(const float *qg, const uint32_t *keys, uint64_t row, uint32_t dims, uint32_t dtype)
{
#if !defined(__SYNTHESIS__) && defined(__x86_64__)
	if (host_avx2 && dtype != CSD_BF16)
		return dtype == CSD_FP32 ? dot_avx2<CSD_FP32>(qg, keys, row, dims) : dot_avx2<CSD_FP16>(qg, keys, row, dims);
#endif
	return dtype == CSD_FP32   ? dot<CSD_FP32>(qg, keys, row, dims)
	       : dtype == CSD_FP16 ? dot<CSD_FP16>(qg, keys, row, dims)
				   : dot<CSD_BF16>(qg, keys, row, dims);
}

extern "C" void score_exact(const float *q, const uint32_t *keys, uint32_t n_tokens, uint32_t first_pos,
			    uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim, uint32_t dtype,
			    uint32_t block_tokens, csd_score *out, uint32_t *blocks_done)
{
#ifdef __SYNTHESIS__
#pragma HLS INTERFACE m_axi port = q offset = slave bundle = gmem0 depth = 32768
#pragma HLS INTERFACE m_axi port = keys offset = slave bundle = gmem1 max_read_burst_length = 256
#pragma HLS INTERFACE m_axi port = out offset = slave bundle = gmem2
#pragma HLS INTERFACE m_axi port = blocks_done offset = slave bundle = gmem2
#pragma HLS INTERFACE s_axilite port = n_tokens
#pragma HLS INTERFACE s_axilite port = first_pos
#pragma HLS INTERFACE s_axilite port = q_heads
#pragma HLS INTERFACE s_axilite port = kv_heads
#pragma HLS INTERFACE s_axilite port = head_dim
#pragma HLS INTERFACE s_axilite port = dtype
#pragma HLS INTERFACE s_axilite port = block_tokens
#pragma HLS INTERFACE s_axilite port = return
#endif
	float qg[CSD_MAX_DIMS]; // the query summed per KV-head group, on-chip
	const uint32_t dims = csd_group_query(q, q_heads, kv_heads, head_dim, qg);
	if (dims == 0 || n_tokens > CSD_MAX_TOKENS || block_tokens == 0)
		return;
	uint32_t blocks = 0;
	for (uint32_t t = 0; t < CSD_MAX_TOKENS; t++) {
#ifdef __SYNTHESIS__
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
#endif
		if (t >= n_tokens)
			break;
		const uint64_t row = (uint64_t)t * dims;
		const float acc = token_dot(qg, keys, row, dims, dtype);
		out[t].pos = first_pos + t;
		out[t].score = acc;
		if ((t + 1) % block_tokens == 0 || t + 1 == n_tokens)
			publish(blocks_done, ++blocks);
	}
}
