// SPDX-License-Identifier: MIT
/*
 * EdgeInfinite's compressed memory (shared/seeds/003_eecbd89e69c48ed7.txt, Sec. 3.1.2 and 3.2.2), as
 * pure functions over one layer's memory state; KvStore (kv_store_aerp.cpp) executes them on the tokens
 * that Kelle's AERP eviction (policy_aerp.hpp) removes for good, instead of losing them.
 *  - The state, per KV head: M (head_dim x head_dim) and z (head_dim), both zero at first (Sec. 3.1.2:
 *    "initialized as zero matrices").
 *  - Compression (Eq. 5 and 6): M += sigma(K)^T V and z += sum_j sigma(k_j), here one token at a time:
 *    M[i][j] += sigma(k_i) * v_j, z[i] += sigma(k_i). sigma is ELU + 1 (sigma(x) = x + 1 for x > 0,
 *    exp(x) otherwise). The paper names "a nonlinear activation function" and follows Infini-Transformer
 *    and linearized attention (Katharopoulos et al.), whose activation is ELU + 1; it keeps every
 *    sigma(k) positive, so z stays positive once a token is folded. State and arithmetic are fp32,
 *    K and V rows are read in the session's dtype.
 *  - Decompression (Eq. 7): A_mem = sigma(q) M / (sigma(q) z) for each query head, with the M and z of
 *    its KV head (grouped-query attention: query head qh reads KV head qh / (q_heads / kv_heads), as the
 *    store's scoring does). The sums are in double, rounded once to fp32. When sigma(q) . z is 0 (nothing
 *    folded in that head yet) the readout is zero and its state says so (MemoryState::Empty).
 *  - Routing (Sec. 3.2.2): short contexts keep the base model's attention and skip the memory; here a
 *    layer's readout is used only when the layer's context exceeds the session's threshold
 *    (memory_routed). The memory-gating module (Eq. 8 and 9: an MLP and a trained gate) is the engine's:
 *    it holds the weights; the service returns A_mem and whether to use it.
 * Layouts: m is kv_heads x head_dim x head_dim (m[(h * D + i) * D + j], row i of sigma(k), column j of
 * v); z is kv_heads x head_dim; readouts are q_heads x head_dim.
 */
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace llmcache::kv::policy {

// What a query head's readout is.
enum class MemoryState : uint8_t {
	Short = 0, // the layer's context is within the routing threshold: no readout (zero)
	Used = 1,  // sigma(q) M / (sigma(q) z)
	Empty = 2, // sigma(q) . z is 0: nothing folded in that KV head yet; the readout is zero
};

// One layer's compressed memory.
struct CompressedMemory {
	uint32_t kv_heads = 0, head_dim = 0;
	std::vector<float> m; // kv_heads x head_dim x head_dim
	std::vector<float> z; // kv_heads x head_dim
	std::vector<uint64_t> folded; // tokens folded per KV head
	CompressedMemory() = default;
	CompressedMemory(uint32_t kv_heads, uint32_t head_dim);
	bool empty() const { return m.empty(); }
	// Bytes the state takes per KV head: M, z and the count.
	static uint64_t bytes_per_head(uint32_t head_dim) { return 4ull * head_dim * head_dim + 4ull * head_dim + 8; }
};

// sigma = ELU + 1.
float elu_plus_one(float x);

// Folds one token of one KV head (k and v: head_dim elements of dtype, a csd_dtype) into the memory.
void memory_fold(CompressedMemory &mem, uint32_t head, const void *k, const void *v, uint32_t dtype);

// The readout of one query vector q (head_dim floats) against one KV head's memory, into out (head_dim
// floats): Used, or Empty with out zeroed.
MemoryState memory_readout(const CompressedMemory &mem, uint32_t head, const float *q, float *out);

// Every query head of a query (q_heads x head_dim floats) at once, with the routing: out gets q_heads x
// head_dim floats and state q_heads entries. routed false: every head Short, out zeroed. A memory not
// allocated yet (nothing evicted in the layer) reads as Empty.
void memory_readout_all(const CompressedMemory &mem, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
			bool routed, const float *q, std::span<float> out, std::span<uint8_t> state);

// The long/short routing: the memory is read only when the layer's context (tokens appended to it)
// exceeds the session's threshold. Threshold 0: always, once a token is appended.
inline bool memory_routed(uint32_t context_tokens, uint32_t threshold) { return context_tokens > threshold; }

} // namespace llmcache::kv::policy
