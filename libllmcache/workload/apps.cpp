// SPDX-License-Identifier: MIT
/*
 * The four on-device LLM apps of Kim, Lee and Bahn, section 3.1 (figure 1): AI Notes, AI Translate,
 * Text Embedder and Text Classification, rebuilt from the block ranges the paper reports.
 *
 * Every app has the three traits the paper finds: a one-time sequential scan of configuration/setup
 * files at start-up, a small hot set (tokenizer, metadata, index) referenced at random throughout, and
 * periodic loops over model files (reads) or model copies (writes). Each of the paper's block ranges
 * becomes one file whose blocks are numbered from 0; the table below keeps the paper's global block
 * number of each file's first block so the layout can be checked against the figure. One iteration is
 * one loop period: every loop whose `every` divides the iteration number sweeps its whole file in
 * 128 KiB records, and the iteration's hot references are spread evenly between those records.
 * Hot blocks are drawn from a Zipf(0.9) distribution over a seeded permutation of the hot files' blocks.
 */
#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llmcache::workload {
namespace {

constexpr uint64_t chunk_blocks = 32; // 128 KiB per read/write call
constexpr double zipf_s = 0.9;

struct FileSpec {
	const char *name;
	Role role;
	uint64_t paper_first, paper_blocks;
};

struct LoopSpec {
	const char *file;
	llmcache_op op;
	uint64_t every; // runs in iterations i with i % every == 0
};

struct AppSpec {
	const char *name;
	std::vector<FileSpec> files;
	std::vector<LoopSpec> loops; // in the order they run within an iteration
	uint32_t hot_refs;           // per iteration
	uint64_t default_iterations;
};

const std::vector<AppSpec> &specs()
{
	using enum Role;
	static const std::vector<AppSpec> all = {
		// Scan 0-7499, hot set at 7500, write loop 10000-14999, read loop 15000-24999 (60 MB per period).
		{"ai-notes",
		 {{"config.json", config, 0, 100},
		  {"setup.bin", config, 100, 7400},
		  {"tokenizer.bin", hot, 7500, 256},
		  {"index.bin", hot, 7756, 128},
		  {"handwriting.bin", scratch, 10000, 5000},
		  {"nmt-weights.bin", model, 15000, 10000}},
		 {{"handwriting.bin", LLMCACHE_OP_WRITE, 1}, {"nmt-weights.bin", LLMCACHE_OP_READ, 1}},
		 32, 100},
		// Scan, sequential database-copy writes at 600-699, hot set, two ~1 MiB dictation-model read loops
		// (source language low, target language higher): a ~2 MB loop.
		{"ai-translate",
		 {{"config.bin", config, 0, 600},
		  {"db-copy.tmp", scratch, 600, 100},
		  {"tokenizer.bin", hot, 700, 192},
		  {"metadata.bin", hot, 892, 64},
		  {"dictation-src.bin", model, 1000, 256},
		  {"dictation-tgt.bin", model, 4000, 256}},
		 {{"dictation-src.bin", LLMCACHE_OP_READ, 1},
		  {"dictation-tgt.bin", LLMCACHE_OP_READ, 1},
		  {"db-copy.tmp", LLMCACHE_OP_WRITE, 100}},
		 4, 3000},
		// Scan, hot set, write loop 1500-7999: the model copied out of the .apk again and again.
		{"text-embedder",
		 {{"config.bin", config, 0, 1200},
		  {"vocab.bin", hot, 1200, 128},
		  {"metadata.bin", hot, 1328, 32},
		  {"model-copy.tflite", scratch, 1500, 6500}},
		 {{"model-copy.tflite", LLMCACHE_OP_WRITE, 1}},
		 16, 230},
		// Scan, then writes dominate: write loop 1800-7999, a small and rarely used hot set.
		{"text-classification",
		 {{"config.bin", config, 0, 1500},
		  {"labels.bin", hot, 1600, 64},
		  {"model-copy.tflite", scratch, 1800, 6200}},
		 {{"model-copy.tflite", LLMCACHE_OP_WRITE, 1}},
		 4, 240},
	};
	return all;
}

class App final : public Generator {
public:
	App(const AppSpec &spec, const AppOptions &o)
		: Generator(spec.name, o.iterations ? o.iterations : spec.default_iterations, o.seed), spec_(spec)
	{
		for (const auto &f : spec.files) {
			uint64_t blocks = std::max<uint64_t>(1, std::llround(double(f.paper_blocks) * o.scale));
			uint32_t id = add_file(std::string(spec.name) + "/" + f.name, blocks * LLMCACHE_BLOCK_SIZE, f.role,
					       f.paper_first, f.paper_blocks);
			if (f.role == Role::hot)
				for (uint64_t b = 0; b < blocks; b++)
					hot_.push_back({id, b});
		}
		for (size_t i = hot_.size(); i > 1; i--)
			std::swap(hot_[i - 1], hot_[rng_.below(i)]);
		double sum = 0;
		for (size_t r = 0; r < hot_.size(); r++)
			hot_cdf_.push_back(sum += std::pow(double(r + 1), -zipf_s));
		for (auto &c : hot_cdf_)
			c /= sum;
		for (const auto &l : spec.loops)
			loops_.push_back({file_id(l.file), l.op, l.every});
	}

private:
	struct Loop {
		uint32_t file;
		llmcache_op op;
		uint64_t every;
	};

	uint32_t file_id(const char *name) const
	{
		for (size_t i = 0; i < spec_.files.size(); i++)
			if (std::string_view(spec_.files[i].name) == name)
				return uint32_t(i);
		throw std::logic_error("app table names an unknown file");
	}

	void startup() override
	{
		for (uint32_t f = 0; f < files_.size(); f++)
			if (files_[f].role == Role::config)
				sweep(f, chunk_blocks, LLMCACHE_OP_READ);
	}

	void iteration(uint64_t i) override
	{
		for (const auto &l : loops_)
			if (i % l.every == 0)
				sweep(l.file, chunk_blocks, l.op);
		std::vector<llmcache_access> loop;
		loop.swap(*out_);
		uint64_t k = hot_.empty() ? 0 : spec_.hot_refs, j = 0;
		for (size_t p = 0; p <= loop.size(); p++) {
			for (; j < k && (j + 1) * loop.size() / (k + 1) == p; j++) {
				size_t r = std::lower_bound(hot_cdf_.begin(), hot_cdf_.end(), rng_.unit()) - hot_cdf_.begin();
				const auto &[file, block] = hot_[std::min(r, hot_.size() - 1)];
				access(file, block, 1, LLMCACHE_OP_READ);
			}
			if (p < loop.size())
				out_->push_back(loop[p]);
		}
	}

	const AppSpec &spec_;
	std::vector<Loop> loops_;
	std::vector<std::pair<uint32_t, uint64_t>> hot_; // (file, block), most popular first
	std::vector<double> hot_cdf_;
};

} // namespace

std::vector<std::string_view> app_names()
{
	std::vector<std::string_view> names;
	for (const auto &s : specs())
		names.push_back(s.name);
	return names;
}

std::unique_ptr<Generator> make_app(std::string_view name, const AppOptions &o)
{
	if (!(o.scale > 0) || !std::isfinite(o.scale))
		throw std::invalid_argument("scale must be a number > 0");
	std::string known;
	for (const auto &s : specs()) {
		if (s.name == name)
			return std::make_unique<App>(s, o);
		known += std::string(known.empty() ? "" : ", ") + s.name;
	}
	throw std::invalid_argument("unknown app '" + std::string(name) + "'; the apps are " + known);
}

} // namespace llmcache::workload
