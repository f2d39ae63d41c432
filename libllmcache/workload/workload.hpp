// SPDX-License-Identifier: MIT
// Synthetic LLM file-access workloads as streams of struct llmcache_access: the four on-device apps of
// the page-cache paper (section 3.1) and a parametric decoder. A generator only says which blocks of
// which file are accessed, in what order; run.hpp performs them as real I/O or writes them as a trace.
// Layouts and the mapping of the paper's block numbers to files: Documentation/workloads.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

extern "C" {
#include "../../include/uapi/llmcache.h"
}

namespace llmcache::workload {

// Synthetic time: each record is stamped with the time of its first block, each block costs this long.
constexpr uint64_t ns_per_block = 1000;

// splitmix64: small, fast, and the same sequence on every platform for a given seed.
class Rng {
public:
	explicit Rng(uint64_t seed) : s_(seed) {}
	uint64_t next()
	{
		uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		return z ^ (z >> 31);
	}
	uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); } // [0, n)
	double unit() { return double(next() >> 11) * 0x1.0p-53; }                          // [0, 1)

private:
	uint64_t s_;
};

// What a file is for; decides how it is opened and filled in real-I/O mode and how it is documented.
enum class Role : uint8_t {
	config,  // read once, sequentially, at start-up
	hot,     // small, referenced at random throughout (tokenizer, metadata, index)
	model,   // weights: re-read in a loop
	scratch, // written (copies, temporary databases): write loops
};
std::string_view role_name(Role r);

struct File {
	std::string name;        // path relative to the workload directory, e.g. "ai-notes/setup.bin"
	uint64_t size;           // bytes
	Role role;
	uint64_t paper_block;    // apps: the paper's (figure 1) block number of this file's block 0, at scale 1
	uint64_t paper_blocks;   // apps: how many of the paper's blocks the file stands for, at scale 1
	uint64_t blocks() const { return (size + LLMCACHE_BLOCK_SIZE - 1) / LLMCACHE_BLOCK_SIZE; }
};

// A workload as a sequence of phases: phase 0 is start-up, then one phase per iteration (a token of the
// decoder, a loop period of an app). Records name their file by its index in files() in .inode; .dev and
// .pid are 0; .time_ns is synthetic (ns_per_block per block accessed before the record).
class Generator {
public:
	virtual ~Generator() = default;
	const std::string &name() const { return name_; }
	const std::vector<File> &files() const { return files_; }
	uint64_t iterations() const { return iterations_; }
	// Replace out with the records of the next phase. false (and out empty) when the workload is done.
	bool step(std::vector<llmcache_access> &out);
	// Phases returned so far: 1 after start-up, 1 + i after iteration i.
	uint64_t phases_done() const { return phase_; }

protected:
	Generator(std::string name, uint64_t iterations, uint64_t seed) : name_(std::move(name)), iterations_(iterations), rng_(seed) {}
	virtual void startup() = 0;
	virtual void iteration(uint64_t i) = 0;
	uint32_t add_file(std::string name, uint64_t size, Role role, uint64_t paper_block = 0, uint64_t paper_blocks = 0);
	// One record: blocks [first, first + n) of file, as one call.
	void access(uint32_t file, uint64_t first, uint32_t n, llmcache_op op);
	// The whole file in order, chunk_blocks per record (the last one may be shorter).
	void sweep(uint32_t file, uint64_t chunk_blocks, llmcache_op op);

	std::string name_;
	std::vector<File> files_;
	uint64_t iterations_;
	Rng rng_;
	std::vector<llmcache_access> *out_ = nullptr; // the phase being built

private:
	uint64_t phase_ = 0;
	uint64_t clock_ns_ = 0;
};

// The paper's apps: "ai-notes", "ai-translate", "text-embedder", "text-classification".
std::vector<std::string_view> app_names();
struct AppOptions {
	uint64_t iterations = 0; // loop periods; 0: the app's default (about 1.5 million block accesses)
	uint64_t seed = 1;
	double scale = 1.0;      // multiplies every file size (at least one block each)
};
// Throws std::invalid_argument for an unknown name (listing the known ones) or a scale <= 0.
std::unique_ptr<Generator> make_app(std::string_view name, const AppOptions &o);

enum class Access : uint8_t { pread, mmap };
struct DecoderOptions {
	uint64_t weights_size = 64ULL << 20;
	uint64_t tokenizer_size = 1ULL << 20;
	uint64_t config_size = 4ULL << 20;
	uint64_t tokens = 32;
	Access access = Access::pread;  // weights by pread64 (READ records) or by mmap (MMAP_FAULT records)
	uint64_t read_size = 128 << 10; // bytes per record; a positive multiple of LLMCACHE_BLOCK_SIZE
	uint32_t hot_reads = 4;         // random single-block tokenizer reads per token
	uint64_t seed = 1;
};
// Throws std::invalid_argument for a zero size or a read size that is not a multiple of 4 KiB.
std::unique_ptr<Generator> make_decoder(const DecoderOptions &o);

// Deterministic file content: the bytes at [offset, offset + out.size()) of a file whose content seed is
// `seed` (content_seed(name)), the same however the file is cut into chunks.
uint64_t content_seed(std::string_view file_name);
void fill_content(uint64_t seed, uint64_t offset, std::span<char> out);

} // namespace llmcache::workload
