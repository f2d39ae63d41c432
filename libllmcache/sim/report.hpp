// SPDX-License-Identifier: MIT
// Output of a replay sweep: aligned text tables, CSV, JSON, and two hand-written SVG plots (hit ratio against
// cache size, one line per policy: the paper's Figure 4; fetch latency against cache size, one line per
// storage bandwidth: its Figure 5).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "sim/latency.hpp"
#include "sim/replay.hpp"

namespace llmcache::sim {

struct Report {
	// The trace.
	std::string trace_path;
	std::string trace_name; // for titles: the file name without directories
	std::string format;
	std::string producer;
	uint64_t records = 0;
	uint64_t accesses = 0; // 4 KiB block requests
	uint64_t files = 0;
	uint64_t footprint = 0; // distinct blocks
	std::vector<std::string> notes;

	// The sweep: results[p * sizes.size() + s] is policies[p] at capacities[s] blocks.
	std::vector<std::string> policies;
	std::vector<CacheSize> sizes;
	std::vector<uint64_t> capacities;
	std::vector<RunResult> results;

	// Latency: empty bandwidths = not asked for. The text table and the latency SVG show latency_policy.
	std::vector<uint64_t> bandwidths; // bytes per second
	std::string latency_policy;
	LatencyModel model;

	// Hits by file (llmreplay --by-file): the files shown, most accessed first; each run's file_hits.
	struct FileRow {
		uint32_t number;    // the trace's file number
		std::string name;   // its path, or "file N" when the trace does not name it
		uint64_t accesses;  // its block accesses
	};
	std::vector<FileRow> top_files;

	const RunResult &at(size_t policy, size_t size) const { return results[policy * sizes.size() + size]; }
	// Fill the trace fields from a loaded trace.
	void set_trace(const Trace &t, const std::string &path, const std::string &format_name);
	// Choose the n files of t with the most block accesses (ties: the lower file number) for top_files.
	void set_top_files(const Trace &t, size_t n);
};

// "100MB/s", "1GB/s", "1.5GB/s" (decimal units, as units::parse_bandwidth reads them).
std::string format_bandwidth(uint64_t bytes_per_s);

// Trace summary: path, format, records, accesses, files, footprint, notes.
void write_summary(std::ostream &os, const Report &r);
// Hit ratios (rows: cache sizes, columns: policies), the per-class breakdown of policies that classify, the
// hit ratio of each of top_files at each size when set, and the latency table when bandwidths are set.
void write_tables(std::ostream &os, const Report &r);
// One row per (policy, size): policy,size,capacity_blocks,capacity_bytes,capacity_fraction,accesses,hits,
// misses,hit_ratio,{seq,loop,hot}_{accesses,hits} (empty for policies without classes), then one
// fetch_s@<bandwidth> column per bandwidth.
void write_csv(std::ostream &os, const Report &r);
// {"trace": {...}, "sizes": [...], "bandwidths_bytes_per_s": [...], "results": [...]}; with top_files, each
// result has "files": [{"file", "accesses", "hits"}, ...] in top_files' order.
void write_json(std::ostream &os, const Report &r);
// Figure 4: hit ratio (0-100%) against cache size; x in % of the footprint when every size was given in %,
// in MiB otherwise.
void write_hit_ratio_svg(std::ostream &os, const Report &r);
// Figure 5: total fetch latency of latency_policy against cache size, one line per bandwidth.
void write_latency_svg(std::ostream &os, const Report &r);

} // namespace llmcache::sim
