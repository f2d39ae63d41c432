// SPDX-License-Identifier: MIT
/*
 * A parametric LLM decoder, the access pattern of llama.cpp-style engines reduced to its bones:
 * start-up reads the config file once (sequentially) and the whole tokenizer once; then every token
 * makes a few random single-block tokenizer reads (the hot set) and sweeps the whole weights file in
 * order, read_size bytes per record. With Access::pread the sweep is READ records (one pread64 each in
 * real-I/O mode); with Access::mmap it is MMAP_FAULT records (one run of page touches each).
 */
#include "workload.hpp"

#include <stdexcept>

namespace llmcache::workload {
namespace {

class Decoder final : public Generator {
public:
	explicit Decoder(const DecoderOptions &o) : Generator("decoder", o.tokens, o.seed), o_(o)
	{
		config_ = add_file("decoder/config.bin", o.config_size, Role::config);
		tokenizer_ = add_file("decoder/tokenizer.bin", o.tokenizer_size, Role::hot);
		weights_ = add_file("decoder/weights.bin", o.weights_size, Role::model);
		chunk_ = o.read_size / LLMCACHE_BLOCK_SIZE;
	}

private:
	void startup() override
	{
		sweep(config_, chunk_, LLMCACHE_OP_READ);
		sweep(tokenizer_, chunk_, LLMCACHE_OP_READ);
	}

	void iteration(uint64_t) override
	{
		for (uint32_t i = 0; i < o_.hot_reads; i++)
			access(tokenizer_, rng_.below(files_[tokenizer_].blocks()), 1, LLMCACHE_OP_READ);
		sweep(weights_, chunk_, o_.access == Access::mmap ? LLMCACHE_OP_MMAP_FAULT : LLMCACHE_OP_READ);
	}

	DecoderOptions o_;
	uint32_t config_, tokenizer_, weights_;
	uint64_t chunk_;
};

} // namespace

std::unique_ptr<Generator> make_decoder(const DecoderOptions &o)
{
	if (!o.weights_size || !o.tokenizer_size || !o.config_size)
		throw std::invalid_argument("the weights, tokenizer and config sizes must be at least 1 byte");
	if (!o.read_size || o.read_size % LLMCACHE_BLOCK_SIZE || o.read_size > (1ULL << 30))
		throw std::invalid_argument("the read size must be a multiple of 4 KiB between 4 KiB and 1 GiB, not " +
					    std::to_string(o.read_size) + " bytes");
	return std::make_unique<Decoder>(o);
}

} // namespace llmcache::workload
