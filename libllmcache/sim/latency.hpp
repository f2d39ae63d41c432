// SPDX-License-Identifier: MIT
// The data-fetch latency model of the page-cache paper's Figure 5 (004_402885012752c522.txt, section 5),
// computed from the hit and miss counts of a replay, so one replay serves every storage bandwidth.
//
// The inference engine asks for data in 1 KiB requests; the page cache and the storage device work in 4 KiB
// pages. Each 4 KiB block access of the trace therefore stands for four 1 KiB requests to that page, of which
// at most the first misses: a miss reads the page from storage once, and the next three requests find it
// cached. Every request then moves its 1 KiB from host memory to the GPU.
//
//   storage I/O (per miss)      = io_setup + page / storage_bw              50 us + 4 KiB / BW
//   host-to-GPU (per request)   = transfer_setup + request / transfer_bw     2 us + 1 KiB / 20 GB/s
//   total = misses * storage I/O + accesses * (page / request) * host-to-GPU
//
// At 100 MB/s a miss costs 50 + 40.96 = 90.96 us and every block access 4 * 2.0512 = 8.2048 us of
// transfers. I/Os are serial: the model adds latencies, it does not overlap them. Bandwidths are in bytes per
// second (MB = 10^6 bytes, as units::parse_bandwidth reads "100MB/s").
#pragma once

#include <cstdint>

namespace llmcache::sim {

struct LatencyModel {
	uint64_t request_bytes = 1024;       // granularity of the engine's requests
	uint64_t page_bytes = 4096;          // cache accounting and storage transfer unit (one trace block)
	double io_setup_s = 50e-6;           // per storage I/O
	double transfer_bytes_per_s = 20e9;  // host to GPU
	double transfer_setup_s = 2e-6;      // per host-to-GPU transfer
};

// The paper's storage bandwidths, bytes per second: 100, 200, 500 and 1000 MB/s.
inline constexpr uint64_t default_bandwidths[] = {100000000, 200000000, 500000000, 1000000000};

struct FetchLatency {
	double storage_s = 0;    // time in storage I/Os
	double transfer_s = 0;   // time in host-to-GPU transfers
	uint64_t storage_ios = 0;
	uint64_t transfers = 0;
	double total_s() const { return storage_s + transfer_s; }
};

// hits + misses block accesses at storage bandwidth `storage_bytes_per_s` (> 0).
FetchLatency fetch_latency(uint64_t hits, uint64_t misses, double storage_bytes_per_s, const LatencyModel &m = {});

} // namespace llmcache::sim
