// SPDX-License-Identifier: MIT
#include "kv/policy_memory.hpp"

#include "kv/policy_aerp.hpp"

#include <algorithm>
#include <cmath>

namespace llmcache::kv::policy {

CompressedMemory::CompressedMemory(uint32_t heads, uint32_t dim)
	: kv_heads(heads), head_dim(dim), m((size_t)heads * dim * dim, 0.0f), z((size_t)heads * dim, 0.0f),
	  folded(heads, 0)
{
}

float elu_plus_one(float x) { return x > 0 ? x + 1.0f : std::exp(x); }

void memory_fold(CompressedMemory &mem, uint32_t head, const void *k, const void *v, uint32_t dtype)
{
	const uint32_t D = mem.head_dim;
	std::vector<float> sk(D), vf(D);
	for (uint32_t i = 0; i < D; i++) {
		sk[i] = elu_plus_one(element(k, dtype, i));
		vf[i] = element(v, dtype, i);
	}
	float *m = mem.m.data() + (size_t)head * D * D, *z = mem.z.data() + (size_t)head * D;
	for (uint32_t i = 0; i < D; i++) {
		float *row = m + (size_t)i * D;
		for (uint32_t j = 0; j < D; j++)
			row[j] += sk[i] * vf[j];
		z[i] += sk[i];
	}
	mem.folded[head]++;
}

MemoryState memory_readout(const CompressedMemory &mem, uint32_t head, const float *q, float *out)
{
	const uint32_t D = mem.head_dim;
	const float *m = mem.m.data() + (size_t)head * D * D, *z = mem.z.data() + (size_t)head * D;
	std::vector<double> num(D, 0.0);
	double den = 0;
	for (uint32_t i = 0; i < D; i++) {
		const double sq = elu_plus_one(q[i]);
		den += sq * z[i];
		const float *row = m + (size_t)i * D;
		for (uint32_t j = 0; j < D; j++)
			num[j] += sq * row[j];
	}
	if (den == 0 || !std::isfinite(den)) {
		std::fill(out, out + D, 0.0f);
		return MemoryState::Empty;
	}
	for (uint32_t j = 0; j < D; j++)
		out[j] = (float)(num[j] / den);
	return MemoryState::Used;
}

void memory_readout_all(const CompressedMemory &mem, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
			bool routed, const float *q, std::span<float> out, std::span<uint8_t> state)
{
	const uint32_t D = head_dim, group = kv_heads ? q_heads / kv_heads : 0;
	for (uint32_t qh = 0; qh < q_heads; qh++) {
		float *o = out.data() + (size_t)qh * D;
		if (!routed || mem.empty() || !group) {
			std::fill(o, o + D, 0.0f);
			state[qh] = (uint8_t)(routed ? MemoryState::Empty : MemoryState::Short);
			continue;
		}
		state[qh] = (uint8_t)memory_readout(mem, qh / group, q + (size_t)qh * D, o);
	}
}

} // namespace llmcache::kv::policy
