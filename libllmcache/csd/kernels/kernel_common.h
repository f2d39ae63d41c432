// SPDX-License-Identifier: MIT
/*
 * Shared definitions of the in-storage scoring kernels (score_exact.cpp, score_quest_bounds.cpp).
 * The kernels are written in Vitis HLS style so the same source is synthesised for the SmartSSD's FPGA
 * and compiled as plain C++ for the host and the emulated backend: no STL, no heap, fixed loop bounds
 * with compile-time maxima, scalar types only. Keys arrive as 32-bit words (an m_axi port wants a
 * scalar element type): fp32 keys are one word each, fp16/bf16 keys two per word, low half first.
 * The HLS pragmas sit under __SYNTHESIS__ (defined by Vitis HLS) so g++ builds them without warnings.
 */
#pragma once
#include <stdint.h>

#define CSD_MAX_HEAD_DIM 256
#define CSD_MAX_Q_HEADS 128
#define CSD_MAX_KV_HEADS 128
#define CSD_MAX_DIMS (CSD_MAX_KV_HEADS * CSD_MAX_HEAD_DIM)
#define CSD_MAX_TOKENS (1u << 20)
#define CSD_MAX_BLOCK 1024
#define CSD_LANES 16 // partial sums per dot product: breaks the floating-point add dependency

enum csd_dtype : uint32_t { CSD_FP32 = 0, CSD_FP16 = 1, CSD_BF16 = 2 };

// One entry of a Score Block: a token (or a page's first token) and its importance.
struct csd_score {
	uint32_t pos;
	float score;
};

static inline float csd_bits_to_float(uint32_t b)
{
	union {
		uint32_t u;
		float f;
	} c;
	c.u = b;
	return c.f;
}

static inline uint32_t csd_float_bits(float f)
{
	union {
		float f;
		uint32_t u;
	} c;
	c.f = f;
	return c.u;
}

// IEEE binary16 -> binary32, exact for every input, without loops or data-dependent branches: the
// exponent and mantissa bits move into float position, which reads as the half's value times 2^-112
// (a subnormal half becomes a float subnormal of the same significand), and one multiplication by
// 2^112 rebiases it exactly. Inf and NaN get the all-ones exponent.
static inline float csd_half_to_float(uint16_t h)
{
	const float mag = csd_bits_to_float((uint32_t)(h & 0x7fffu) << 13) * csd_bits_to_float(0x77800000u);
	const uint32_t special = (h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u;
	return csd_bits_to_float(((uint32_t)(h & 0x8000u) << 16) | csd_float_bits(mag) | special);
}

static inline float csd_bf16_to_float(uint16_t h) { return csd_bits_to_float((uint32_t)h << 16); }

// Element i of a key array of the given dtype, as float.
static inline float csd_key(const uint32_t *words, uint64_t i, uint32_t dtype)
{
	if (dtype == CSD_FP32)
		return csd_bits_to_float(words[i]);
	uint32_t w = words[i >> 1];
	uint16_t h = (i & 1) ? (uint16_t)(w >> 16) : (uint16_t)w;
	return dtype == CSD_FP16 ? csd_half_to_float(h) : csd_bf16_to_float(h);
}

static inline uint32_t csd_dtype_bytes(uint32_t dtype) { return dtype == CSD_FP32 ? 4 : 2; }

/*
 * Both kernels score against the query summed per KV-head group (grouped-query attention: the query
 * heads that share a KV head add up, so one pass over the keys serves them all). Fills qg[0, dims) and
 * returns dims = kv_heads * head_dim, or 0 when the shape exceeds the kernels' fixed bounds.
 */
static inline uint32_t csd_group_query(const float *q, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
				       float qg[CSD_MAX_DIMS])
{
	if (q_heads == 0 || kv_heads == 0 || kv_heads > CSD_MAX_KV_HEADS || head_dim == 0 || head_dim > CSD_MAX_HEAD_DIM ||
	    q_heads > CSD_MAX_Q_HEADS || q_heads % kv_heads != 0)
		return 0;
	const uint32_t dims = kv_heads * head_dim, group = q_heads / kv_heads;
	for (uint32_t i = 0; i < CSD_MAX_DIMS; i++) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II = 1
#endif
		if (i >= dims)
			break;
		qg[i] = 0.0f;
	}
	for (uint32_t h = 0; h < CSD_MAX_Q_HEADS; h++) {
		if (h >= q_heads)
			break;
		const uint32_t base = (h / group) * head_dim;
		for (uint32_t d = 0; d < CSD_MAX_HEAD_DIM; d++) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II = 1
#endif
			if (d >= head_dim)
				break;
			qg[base + d] += q[h * head_dim + d];
		}
	}
	return dims;
}

#ifndef __SYNTHESIS__
// Host builds: every fp16 value as float (csd_half_to_float of its index), for hot host loops.
const float *csd_host_half_table();
#endif

extern "C" {
void score_exact(const float *q, const uint32_t *keys, uint32_t n_tokens, uint32_t first_pos, uint32_t q_heads,
		 uint32_t kv_heads, uint32_t head_dim, uint32_t dtype, uint32_t block_tokens, csd_score *out,
		 uint32_t *blocks_done);
void score_quest_bounds(const float *q, const float *kmin, const float *kmax, uint32_t n_pages,
			const uint32_t *page_pos, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
			uint32_t block_pages, csd_score *out, uint32_t *blocks_done);
}
