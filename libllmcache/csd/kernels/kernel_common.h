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

// IEEE binary16 -> binary32, exact for every input (normals, subnormals, inf, NaN).
static inline float csd_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
	if (exp == 0x1f)
		return csd_bits_to_float(sign | 0x7f800000u | (man << 13));
	if (exp != 0)
		return csd_bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
	if (man == 0)
		return csd_bits_to_float(sign);
	uint32_t e = 113; // a subnormal is man * 2^-24: shift the leading one up to bit 10
	for (int i = 0; i < 10; i++) {
#ifdef __SYNTHESIS__
#pragma HLS UNROLL
#endif
		if (man & 0x400u)
			break;
		man <<= 1;
		e--;
	}
	return csd_bits_to_float(sign | (e << 23) | ((man & 0x3ffu) << 13));
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

extern "C" {
void score_exact(const float *q, const uint32_t *keys, uint32_t n_tokens, uint32_t first_pos, uint32_t q_heads,
		 uint32_t kv_heads, uint32_t head_dim, uint32_t dtype, uint32_t block_tokens, csd_score *out,
		 uint32_t *blocks_done);
void score_quest_bounds(const float *q, const float *kmin, const float *kmax, uint32_t n_pages,
			const uint32_t *page_pos, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
			uint32_t block_pages, csd_score *out, uint32_t *blocks_done);
}
