// SPDX-License-Identifier: MIT
// The trace-replay engine: a trace loaded once into a compact vector of 4 KiB block requests, then replayed
// through one policy at one capacity, or through policies x cache sizes on a pool of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/policy.hpp"
#include "trace/trace.hpp"

namespace llmcache::sim {

// A trace in memory: one Request per 4 KiB block accessed, files numbered densely in order of first
// appearance.
struct Trace {
	std::vector<Request> requests;
	std::vector<trace::FileKey> files; // (dev, inode) of file number i
	std::vector<std::string> paths;    // path of file number i, "" when the trace does not name it
	uint64_t records = 0;              // access records read (one may cover several blocks)
	uint64_t footprint = 0;            // distinct blocks accessed
	std::vector<std::string> notes;    // the reader's notes for the user
	std::string producer;              // what wrote the trace, when the format says
};

// Read every record of `reader` (streaming: only the Request vector grows). Records of nr_blocks blocks become
// nr_blocks Requests with the record's time, pid and op; empty records are skipped. `on_records`, when set,
// is called every 2^20 records with the count so far. Throws std::runtime_error when a block number does not
// fit the 40 bits of request_key() or there are more than 2^24 files; the reader's own errors pass through.
Trace load_trace(trace::Reader &reader, const std::function<void(uint64_t records)> &on_records = {});

struct RunResult {
	uint64_t hits = 0;
	uint64_t misses = 0;
	bool has_classes = false; // the policy reported class_stats()
	Policy::ClassStats classes;
	std::vector<uint64_t> file_hits; // hits per file number, when the replay was asked to count them
	uint64_t accesses() const { return hits + misses; }
	double hit_ratio() const { return accesses() ? double(hits) / double(accesses()) : 0.0; }
};

// Replay `requests` through `policy` (calling prepare() first). `progress`, when set, is advanced by the
// number of requests replayed every progress_stride requests and once at the end. With by_file, the hits
// are also counted per file number (RunResult::file_hits).
constexpr size_t progress_stride = size_t(1) << 16;
RunResult run_policy(Policy &policy, std::span<const Request> requests, std::atomic<uint64_t> *progress = nullptr,
		     bool by_file = false);

// A cache size as written by the user: "10%" (of the footprint), "64MiB" (bytes, any units::parse_bytes
// unit) or "1000" (blocks).
struct CacheSize {
	enum class Kind { fraction, bytes, blocks } kind;
	double value;     // the fraction (0.1 for "10%"), the bytes, or the blocks
	std::string text; // as given
};

// Throws std::invalid_argument saying what is wrong (no number, unknown unit, zero, negative, fractional
// block count).
CacheSize parse_cache_size(std::string_view text);
// Comma-separated list; empty items are errors.
std::vector<CacheSize> parse_cache_sizes(std::string_view list);
// "10%,20%,...,100%".
std::vector<CacheSize> default_cache_sizes();
// In blocks: a fraction of the footprint or a byte size is rounded to the nearest whole block, and never
// less than 1 block; a block count is taken as is.
uint64_t resolve_cache_size(const CacheSize &size, uint64_t footprint);

using PolicyFactory =
	std::function<std::unique_ptr<Policy>(std::string_view name, uint64_t capacity, const PolicyOptions &opt)>;

struct SweepOptions {
	unsigned jobs = 0; // worker threads; 0 = std::thread::hardware_concurrency()
	PolicyOptions policy;
	// Called from the calling thread about every progress_interval_ms while the sweep runs, and once at the
	// end, with the request-replays done so far and the total (requests x policies x capacities).
	std::function<void(uint64_t done, uint64_t total)> on_progress;
	unsigned progress_interval_ms = 200;
	bool by_file = false; // count each run's hits per file (RunResult::file_hits)
};

// Every policy at every capacity; result [p * capacities.size() + c]. Each run has its own policy instance,
// so the results do not depend on the number of threads. The first exception thrown by a run (e.g. the
// factory rejecting a name) is rethrown once every thread has stopped.
std::vector<RunResult> sweep(std::span<const Request> requests, const std::vector<std::string> &policies,
			     const std::vector<uint64_t> &capacities, const PolicyFactory &factory,
			     const SweepOptions &opt = {});

} // namespace llmcache::sim
