// SPDX-License-Identifier: MIT
// Figure 5's data-fetch latency model; see latency.hpp for the model and Documentation/replay.md.
#include "sim/latency.hpp"

namespace llmcache::sim {

FetchLatency fetch_latency(uint64_t hits, uint64_t misses, double storage_bytes_per_s, const LatencyModel &m)
{
	const uint64_t per_page = m.request_bytes ? (m.page_bytes + m.request_bytes - 1) / m.request_bytes : 1;
	FetchLatency f;
	f.storage_ios = misses;
	f.transfers = (hits + misses) * per_page;
	f.storage_s = double(misses) * (m.io_setup_s + double(m.page_bytes) / storage_bytes_per_s);
	f.transfer_s = double(f.transfers) * (m.transfer_setup_s + double(m.request_bytes) / m.transfer_bytes_per_s);
	return f;
}

} // namespace llmcache::sim
