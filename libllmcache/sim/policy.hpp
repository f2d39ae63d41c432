// SPDX-License-Identifier: MIT
// The simulator's cache-policy interface: a cache of `capacity` 4 KiB blocks that answers hit or miss
// for each block access. One policy per file in this directory; make_policy() knows them all.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llmcache::sim {

// One 4 KiB block access, after the replay has split multi-block records and numbered the files. 16
// bytes: a replay keeps every one of them in memory, and no policy looks at more (the file is the key's
// top bits, key_file(); whether it was an mmap fault or a write, the time's top two bits).
struct Request {
	uint64_t key;                // (file << 40) | block: unique per block of the trace; the file numbers are dense, from 0
	uint64_t time_ns : 62;       // access time
	uint64_t mmap_fault : 1 = 0; // the record was a fault on a file mapping, not a read() or a write()
	uint64_t write : 1 = 0;      // the record was a write()
};
static_assert(sizeof(Request) == 16);

constexpr uint64_t request_key(uint32_t file, uint64_t block) { return (uint64_t(file) << 40) | block; }
constexpr uint64_t key_block(uint64_t key) { return key & ((uint64_t(1) << 40) - 1); }
constexpr uint32_t key_file(uint64_t key) { return uint32_t(key >> 40); }

struct PolicyOptions {
	uint64_t seed = 42;            // for randomised policies (LeCaR)
	double hot_reserve = 0.01;     // llm: fraction of the cache reserved for HOT blocks
};

class Policy {
public:
	explicit Policy(uint64_t capacity) : capacity_(capacity) {}
	virtual ~Policy() = default;
	// Called once with the whole request stream before replay, for offline policies (Belady). Default: no-op.
	virtual void prepare(std::span<const Request> all) { (void)all; }
	// Access one block; true on a hit. Request i of prepare()'s span is the i-th call.
	virtual bool access(const Request &r) = 0;
	virtual std::string_view name() const = 0;
	uint64_t capacity() const { return capacity_; }

	// Policies that classify blocks (llm) report accesses and hits per enum llmcache_class.
	struct ClassStats {
		uint64_t accesses[3] = {};
		uint64_t hits[3] = {};
	};
	virtual const ClassStats *class_stats() const { return nullptr; }

protected:
	uint64_t capacity_;
};

// Names: llm, lru, fifo, clock, mru, arc, 2q, lirs, lecar, s3fifo, sieve, wtinylfu, ubm, belady.
std::vector<std::string> policy_names();
// Throws std::invalid_argument for an unknown name (the message lists the known ones) or capacity 0.
std::unique_ptr<Policy> make_policy(std::string_view name, uint64_t capacity, const PolicyOptions &opt = {});

} // namespace llmcache::sim
