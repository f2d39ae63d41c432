// SPDX-License-Identifier: MIT
/*
 * Kelle's attention-based eviction and recomputation policy (AERP, Kelle Sec. 4.1), as pure functions
 * over one layer's retained tokens; KvStore (kv_store.cpp) executes them with real rows.
 *  - Importance (Kelle Eq. 3): per KV head, each retained token accumulates the attention probability
 *    every query gives it (Eq. 1: the softmax of q.k / sqrt(head_dim) over the tokens that head keeps).
 *    With grouped-query attention, the query heads sharing a KV head add their probabilities up.
 *  - Eviction: every KV head keeps at most `budget` tokens (N'). The sink tokens [0, sink) and the
 *    recent window (the last `recent` appended) are always kept; above the budget a head drops its
 *    lowest-ranked other tokens. A token ranks above another when its importance is higher, or equal
 *    and it is older; NaN ranks lowest. The eviction patterns differ per head (Kelle Sec. 4.1.1); a
 *    token that no head keeps is gone.
 *  - Recomputation (Kelle Sec. 4.1.2): when a token leaves the recent window its format is decided
 *    once: its popularity is the number of KV heads in which it would survive the eviction (it ranks
 *    within the head's budget left after sink and recent); kept in more than half of the heads, and
 *    its input vector x (d_model elements) smaller than the K and V rows of those heads
 *    (2 * head_dim * kept elements), the token stores x and K, V are recomputed as x.W_K, x.W_V.
 *  - recompute() defines the arithmetic exactly (fp32 products and sums over x's index ascending, no
 *    fused multiply-add, one rounding to the dtype at the end, to nearest even), so a client that
 *    computes its K and V the same way gets them back bit for bit.
 * Layouts: `kept` and `scores` are token-major (token i, KV head h at i * kv_heads + h); `logits` is
 * token-major over query heads (i * q_heads + qh); positions are ascending.
 */
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace llmcache::kv::policy {

struct AerpParams {
	uint32_t budget = 0; // tokens each KV head keeps (N'), sink and recent included
	uint32_t sink_tokens = 4, recent_tokens = 64;
	uint32_t q_heads = 0, kv_heads = 0, head_dim = 0;
	uint32_t d_model = 0; // elements of a token's input vector x; 0 = no recomputation
};

// 0, or -EINVAL with err saying which parameter is wrong and what it must be.
int check_aerp(const AerpParams &prm, std::string &err);

// Always kept: a sink token or one of the recent window, given n_total tokens appended to the layer.
inline bool aerp_always_kept(const AerpParams &prm, uint32_t pos, uint32_t n_total)
{
	return pos < prm.sink_tokens || pos + prm.recent_tokens >= n_total;
}

// Eq. 1 and 3 for one query over n retained tokens: for each query head, the softmax of its logits
// over the tokens its KV head keeps, added to their importance. Tokens a head does not keep get nothing.
void accumulate_importance(const AerpParams &prm, uint32_t n, std::span<const float> logits,
			   std::span<const uint8_t> kept, std::span<float> scores);

// The number of KV heads in which token i would survive the eviction: heads that keep it and in which
// fewer than the budget left after the always-kept tokens of the other tokens they keep rank above it
// (always-kept tokens: all heads).
uint32_t popularity(const AerpParams &prm, std::span<const uint32_t> positions, uint32_t n_total, size_t i,
		    std::span<const uint8_t> kept, std::span<const float> scores);

// Drops the tokens that no KV head keeps any more from positions, kept and scores, keeping the order;
// move(from, to) is called for every surviving token that moves, so that the caller moves its own
// per-token state alike and then resizes it to positions.size(). Returns how many were dropped.
template <class Move>
size_t drop_unkept(uint32_t kv_heads, std::vector<uint32_t> &positions, std::vector<uint8_t> &kept,
		   std::vector<float> &scores, Move move)
{
	const uint32_t H = kv_heads;
	size_t w = 0;
	for (size_t i = 0; i < positions.size(); i++) {
		const uint8_t *kb = &kept[i * H];
		bool any = false;
		for (uint32_t h = 0; h < H; h++)
			any |= kb[h] != 0;
		if (!any)
			continue;
		if (w != i) {
			positions[w] = positions[i];
			for (uint32_t h = 0; h < H; h++) {
				kept[w * H + h] = kb[h];
				scores[w * H + h] = scores[i * H + h];
			}
			move(i, w);
		}
		w++;
	}
	const size_t dropped = positions.size() - w;
	positions.resize(w);
	kept.resize(w * H);
	scores.resize(w * H);
	return dropped;
}

// Whether a token kept in kept_heads KV heads stores its input vector instead of K and V.
bool aerp_store_input(const AerpParams &prm, uint32_t kept_heads);

struct Eviction {
	uint32_t token, head; // token: index into positions
};
// Drops, per KV head, the lowest-ranked tokens above the budget, clearing their bits in kept. Returns
// the pairs cleared, by head then rank (lowest first).
std::vector<Eviction> evict(const AerpParams &prm, std::span<const uint32_t> positions, uint32_t n_total,
			    std::span<uint8_t> kept, std::span<const float> scores);

// A select over a layer's retained tokens (positions ascending, scores: positions x kv_heads): the
// indices it returns, all of them when they fit the budget, else the sink, the recent window and the
// highest importance summed over the heads. The store's select and the KV replay both run it.
std::vector<uint32_t> select_retained(const AerpParams &prm, std::span<const uint32_t> positions, std::span<const float> scores,
				      uint32_t n_total, uint32_t budget);

// out[j] = x . W[:, j] for j < cols: x has d_model elements of dtype (csd_dtype), W is d_model x cols
// fp32, row-major; out gets cols elements of dtype. See the header comment for the exact arithmetic.
void recompute(const void *x, uint32_t dtype, const float *w, uint32_t d_model, uint32_t cols, void *out);

// Element conversions of the recomputation (round to nearest even; NaN stays NaN).
uint16_t float_to_half(float f);
uint16_t float_to_bf16(float f);
float element(const void *row, uint32_t dtype, uint64_t i);

} // namespace llmcache::kv::policy
