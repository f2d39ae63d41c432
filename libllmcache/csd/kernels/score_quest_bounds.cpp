// SPDX-License-Identifier: MIT
/*
 * score_quest_bounds: Quest-style upper bound of q . k over a page of tokens, from the page's per-dim
 * key minimum and maximum.
 *
 * For every dimension d, q_d * k_d <= max(q_d * min_d, q_d * max_d) whatever token of the page k is,
 * so summing that over the dimensions (and over query heads, with GQA groups summed first as in
 * score_exact) bounds the exact score of every token of the page from above. The bound needs 2 * dims
 * floats per page instead of page_tokens * dims keys: it is the cheap estimator to run next to the
 * flash, and a page whose bound is below the k-th exact score cannot hold a top-k token.
 * Output: one <first token position of the page, bound> entry per page, published in Score Blocks of
 * block_pages entries through *blocks_done as in score_exact.
 *
 * Vitis HLS style: same source for the FPGA and the host; fixed maxima bound every loop.
 */
#include "kernel_common.h"

extern "C" void score_quest_bounds(const float *q, const float *kmin, const float *kmax, uint32_t n_pages,
				   const uint32_t *page_pos, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
				   uint32_t block_pages, csd_score *out, uint32_t *blocks_done)
{
#ifdef __SYNTHESIS__
#pragma HLS INTERFACE m_axi port = q offset = slave bundle = gmem0 depth = 32768
#pragma HLS INTERFACE m_axi port = kmin offset = slave bundle = gmem1
#pragma HLS INTERFACE m_axi port = kmax offset = slave bundle = gmem3
#pragma HLS INTERFACE m_axi port = page_pos offset = slave bundle = gmem0
#pragma HLS INTERFACE m_axi port = out offset = slave bundle = gmem2
#pragma HLS INTERFACE m_axi port = blocks_done offset = slave bundle = gmem2
#pragma HLS INTERFACE s_axilite port = n_pages
#pragma HLS INTERFACE s_axilite port = q_heads
#pragma HLS INTERFACE s_axilite port = kv_heads
#pragma HLS INTERFACE s_axilite port = head_dim
#pragma HLS INTERFACE s_axilite port = block_pages
#pragma HLS INTERFACE s_axilite port = return
#endif
	float qg[CSD_MAX_DIMS]; // the query summed per KV-head group, on-chip
	const uint32_t dims = csd_group_query(q, q_heads, kv_heads, head_dim, qg);
	if (dims == 0 || n_pages > CSD_MAX_TOKENS || block_pages == 0)
		return;
	uint32_t blocks = 0;
	for (uint32_t p = 0; p < CSD_MAX_TOKENS; p++) {
#ifdef __SYNTHESIS__
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
#endif
		if (p >= n_pages)
			break;
		float acc = 0.0f;
		const uint64_t row = (uint64_t)p * dims;
		for (uint32_t i = 0; i < CSD_MAX_DIMS; i++) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II = 1
#endif
			if (i >= dims)
				break;
			const float lo = qg[i] * kmin[row + i], hi = qg[i] * kmax[row + i];
			acc += lo > hi ? lo : hi;
		}
		out[p].pos = page_pos[p];
		out[p].score = acc;
		if ((p + 1) % block_pages == 0 || p + 1 == n_pages) {
#ifdef __SYNTHESIS__
			*blocks_done = ++blocks;
#else
			__atomic_store_n(blocks_done, ++blocks, __ATOMIC_RELEASE);
#endif
		}
	}
}
