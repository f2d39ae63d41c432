// SPDX-License-Identifier: MIT
#include "kv/policy_aerp.hpp"

#include "csd/kernels/kernel_common.h"
#include "kv/policy_select.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

namespace llmcache::kv::policy {

namespace {

// NaN ranks lowest.
float rank_score(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

// Token a ranks above token b in a head: higher importance, or equal and older.
bool ranks_above(float sa, uint32_t pa, float sb, uint32_t pb)
{
	sa = rank_score(sa);
	sb = rank_score(sb);
	return sa != sb ? sa > sb : pa < pb;
}

uint32_t always_count(const AerpParams &prm, std::span<const uint32_t> positions, uint32_t n_total)
{
	uint32_t c = 0;
	for (uint32_t p : positions)
		c += aerp_always_kept(prm, p, n_total);
	return c;
}

} // namespace

int check_aerp(const AerpParams &prm, std::string &err)
{
	if (!prm.kv_heads || !prm.q_heads || prm.q_heads % prm.kv_heads || !prm.head_dim) {
		err = "invalid AERP parameters: the model shape needs kv_heads, q_heads (a multiple of kv_heads) and "
		      "head_dim";
		return -EINVAL;
	}
	if (!prm.budget || (uint64_t)prm.budget < (uint64_t)prm.sink_tokens + prm.recent_tokens) {
		err = "invalid AERP budget " + std::to_string(prm.budget) + ": it must hold the " +
		      std::to_string(prm.sink_tokens) + " sink and " + std::to_string(prm.recent_tokens) +
		      " recent tokens that are always kept, at least " +
		      std::to_string(std::max<uint64_t>(1, (uint64_t)prm.sink_tokens + prm.recent_tokens)) + " tokens";
		return -EINVAL;
	}
	return 0;
}

void accumulate_importance(const AerpParams &prm, uint32_t n, std::span<const float> logits,
			   std::span<const uint8_t> kept, std::span<float> scores)
{
	const uint32_t H = prm.kv_heads, QH = prm.q_heads, group = QH / H;
	for (uint32_t qh = 0; qh < QH; qh++) {
		const uint32_t h = qh / group;
		float mx = -std::numeric_limits<float>::infinity();
		for (uint32_t i = 0; i < n; i++)
			if (kept[(size_t)i * H + h])
				mx = std::max(mx, logits[(size_t)i * QH + qh]);
		if (mx == -std::numeric_limits<float>::infinity())
			continue; // the head keeps nothing, or every logit is -inf: no attention to give
		double sum = 0;
		for (uint32_t i = 0; i < n; i++)
			if (kept[(size_t)i * H + h])
				sum += std::exp((double)logits[(size_t)i * QH + qh] - mx);
		for (uint32_t i = 0; i < n; i++)
			if (kept[(size_t)i * H + h])
				scores[(size_t)i * H + h] += (float)(std::exp((double)logits[(size_t)i * QH + qh] - mx) / sum);
	}
}

uint32_t popularity(const AerpParams &prm, std::span<const uint32_t> positions, uint32_t n_total, size_t i,
		    std::span<const uint8_t> kept, std::span<const float> scores)
{
	const uint32_t H = prm.kv_heads;
	if (aerp_always_kept(prm, positions[i], n_total))
		return H;
	const uint32_t fixed = always_count(prm, positions, n_total);
	const uint32_t slots = prm.budget > fixed ? prm.budget - fixed : 0;
	uint32_t heads = 0;
	for (uint32_t h = 0; h < H; h++) {
		if (!kept[i * H + h])
			continue;
		const float si = scores[i * H + h];
		uint32_t above = 0;
		for (size_t j = 0; j < positions.size() && above < slots; j++)
			if (j != i && kept[j * H + h] && !aerp_always_kept(prm, positions[j], n_total) &&
			    ranks_above(scores[j * H + h], positions[j], si, positions[i]))
				above++;
		heads += above < slots;
	}
	return heads;
}

bool aerp_store_input(const AerpParams &prm, uint32_t kept_heads)
{
	return prm.d_model && 2ull * kept_heads > prm.kv_heads && prm.d_model < 2ull * prm.head_dim * kept_heads;
}

std::vector<Eviction> evict(const AerpParams &prm, std::span<const uint32_t> positions, uint32_t n_total,
			    std::span<uint8_t> kept, std::span<const float> scores)
{
	const uint32_t H = prm.kv_heads;
	std::vector<Eviction> out;
	std::vector<uint32_t> cand;
	for (uint32_t h = 0; h < H; h++) {
		uint32_t held = 0;
		cand.clear();
		for (uint32_t i = 0; i < positions.size(); i++) {
			if (!kept[(size_t)i * H + h])
				continue;
			held++;
			if (!aerp_always_kept(prm, positions[i], n_total))
				cand.push_back(i);
		}
		if (held <= prm.budget)
			continue;
		const size_t drop = std::min<size_t>(held - prm.budget, cand.size());
		std::partial_sort(cand.begin(), cand.begin() + drop, cand.end(), [&](uint32_t a, uint32_t b) {
			return ranks_above(scores[(size_t)b * H + h], positions[b], scores[(size_t)a * H + h], positions[a]);
		});
		for (size_t k = 0; k < drop; k++) {
			kept[(size_t)cand[k] * H + h] = 0;
			out.push_back({cand[k], h});
		}
	}
	return out;
}

uint16_t float_to_half(float f)
{
	uint32_t b;
	std::memcpy(&b, &f, 4);
	const uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
	const uint32_t exp = (b >> 23) & 0xff, mant = b & 0x7fffff;
	if (exp == 0xff)
		return sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0);
	const int e = (int)exp - 127 + 15;
	if (e >= 0x1f)
		return sign | 0x7c00;
	if (e <= 0) { // a half subnormal, or zero
		if (e < -10)
			return sign;
		const uint32_t m = mant | 0x800000, shift = (uint32_t)(14 - e);
		uint32_t h = m >> shift;
		const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		h += rem > half || (rem == half && (h & 1));
		return sign | (uint16_t)h;
	}
	uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
	const uint32_t rem = mant & 0x1fff;
	h += rem > 0x1000 || (rem == 0x1000 && (h & 1)); // a carry into the exponent is right, up to inf
	return sign | (uint16_t)h;
}

uint16_t float_to_bf16(float f)
{
	uint32_t b;
	std::memcpy(&b, &f, 4);
	if ((b & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((b >> 16) | 0x40);
	b += 0x7fff + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

float element(const void *row, uint32_t dtype, uint64_t i)
{
	if (dtype == CSD_FP32) {
		float f;
		std::memcpy(&f, static_cast<const uint8_t *>(row) + 4 * i, 4);
		return f;
	}
	uint16_t h;
	std::memcpy(&h, static_cast<const uint8_t *>(row) + 2 * i, 2);
	return dtype == CSD_FP16 ? csd_half_to_float(h) : csd_bf16_to_float(h);
}

void recompute(const void *x, uint32_t dtype, const float *w, uint32_t d_model, uint32_t cols, void *out)
{
	std::vector<float> acc(cols, 0.0f);
	for (uint32_t i = 0; i < d_model; i++) {
		const float xi = element(x, dtype, i);
		const float *wr = w + (size_t)i * cols;
		for (uint32_t j = 0; j < cols; j++) {
			const float p = xi * wr[j];
			acc[j] = acc[j] + p;
		}
	}
	auto o = static_cast<uint8_t *>(out);
	for (uint32_t j = 0; j < cols; j++) {
		if (dtype == CSD_FP32) {
			std::memcpy(o + 4ull * j, &acc[j], 4);
			continue;
		}
		const uint16_t h = dtype == CSD_FP16 ? float_to_half(acc[j]) : float_to_bf16(acc[j]);
		std::memcpy(o + 2ull * j, &h, 2);
	}
}

std::vector<uint32_t> select_retained(const AerpParams &prm, std::span<const uint32_t> positions, std::span<const float> scores,
				      uint32_t n_total, uint32_t budget)
{
	const uint32_t H = prm.kv_heads, n = (uint32_t)positions.size();
	std::vector<uint32_t> idx;
	if (n <= budget) {
		idx.resize(n);
		for (uint32_t i = 0; i < n; i++)
			idx[i] = i;
		return idx;
	}
	// The select's own budget is smaller than what AERP keeps: the best of it, by summed importance.
	uint32_t sink = 0, recent = 0;
	for (uint32_t p : positions) {
		sink += p < prm.sink_tokens;
		recent += p >= prm.sink_tokens && aerp_always_kept(prm, p, n_total);
	}
	const SelectPlan plan = plan_select(n, sink, recent, budget);
	std::vector<csd_score> sc;
	for (uint32_t i = plan.sink; i < plan.recent_from; i++) {
		float s = 0;
		for (uint32_t h = 0; h < H; h++)
			s += scores[(size_t)i * H + h];
		sc.push_back({i, s});
	}
	return select_tokens(plan, sc);
}

} // namespace llmcache::kv::policy
