// SPDX-License-Identifier: MIT
// A writer of llama-architecture GGUF models with random weights, so that a real engine (llama.cpp) can
// be run on a model of any size without downloading one: the benchmarks and tests of the real-engine
// work (Documentation/engine-bench.md) make their own. The file is a complete GGUF v3 model: the llama
// hyperparameters, a SentencePiece-style vocabulary (the special tokens, 256 byte tokens and numbered
// word pieces), and every tensor llama.cpp loads, laid out as the usual converters lay them out (the
// token embedding, then each block's tensors, then the output norm and matrix). Weights are F16 or Q8_0,
// drawn uniformly from +-1/sqrt(fan-in) so that the activations stay finite, the token embedding from
// +-1 so that each token steers the next (greedy decoding then wanders through the vocabulary, and a
// corrupted weight shows in the output); norm weights are 1.
#pragma once

#include <cstdint>
#include <string>

namespace llmcache::workload {

enum class GgufType : uint8_t { f16, q8_0 };

struct GgufModel {
	uint32_t layers = 24;
	uint32_t embd = 1024;      // n_embd
	uint32_t ff = 2816;        // n_ff
	uint32_t heads = 16;       // query heads
	uint32_t kv_heads = 16;    // key/value heads: fewer than heads is GQA
	uint32_t vocab = 4096;     // at least 259 (the special and byte tokens)
	uint32_t context = 2048;   // llama.context_length
	GgufType type = GgufType::f16;
	uint64_t seed = 1;
};

// Throws std::invalid_argument saying which field is wrong (zero, heads not dividing embd, a row length
// that Q8_0's 32-element blocks do not divide, ...).
void validate(const GgufModel &m);

// The size of the file write_gguf() writes, in bytes.
uint64_t gguf_size(const GgufModel &m);

// The number of layers whose model comes closest to size_bytes with the other fields of m (at least 1).
uint32_t layers_for_size(GgufModel m, uint64_t size_bytes);

// Write the model to path through a temporary file renamed into place: a failure leaves path as it was.
// Throws std::system_error (with the path) on I/O errors, std::invalid_argument on a bad model.
void write_gguf(const GgufModel &m, const std::string &path);

} // namespace llmcache::workload
