// SPDX-License-Identifier: MIT
/*
 * Computational-storage backends: who scores the KV pages that live in the storage pool.
 *   none      the host reads the K slabs back through the storage pool and runs the kernel itself;
 *   emulated  the same kernel source on a dedicated thread reading the device node directly, paced to
 *             a configurable internal bandwidth and compute rate (a SmartSSD without the card);
 *   xrt       a real SmartSSD through XRT (p2p buffers filled from the O_DIRECT NVMe fd).
 * A job is submitted, the caller scores its CPU pool meanwhile, then wait() hands it the Score Blocks
 * as they complete. One backend object serves one job at a time.
 */
#pragma once
#include "csd/kernels/kernel_common.h"
#include "kvio/slab.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmcache::kv {
class StoragePool;
}

namespace llmcache::csd {

enum class Estimator { Exact, QuestBounds };
// How a device that scores in storage chooses what to read (select_bounds_first.hpp): every key of
// every page (Exact), or the pages' Quest bounds first and the keys of the best pages only.
enum class DeviceSelect { Exact, BoundsFirst };

struct KvGeometry {
	uint32_t q_heads, kv_heads, head_dim, dtype, page_tokens;
	uint32_t dims() const { return kv_heads * head_dim; }
	uint64_t row_bytes() const { return (uint64_t)dims() * csd_dtype_bytes(dtype); }
	// K payload: kmin, kmax (f32 each), keys.
	uint64_t k_payload(uint32_t n_tokens) const { return 8ull * dims() + n_tokens * row_bytes(); }
};

struct PageRef {
	uint32_t page, first_pos, n_tokens;
	uint64_t k_offset; // byte offset of the page's K slab on the device
	// The K slab's CRC32C per 4 KiB block (kvio/slab.hpp, BlockCrcs; host memory, valid until the job
	// is waited for): what a device reading some blocks of the slab checks them against.
	const uint32_t *k_block_crcs = nullptr;
};

struct ScoreJob {
	const float *q = nullptr; // q_heads * head_dim
	uint32_t layer = 0;
	std::vector<PageRef> pages;
	uint32_t block_tokens = 64;
	Estimator estimator = Estimator::Exact;
	// With the Exact estimator, on a device that scores in storage (emulated): BoundsFirst scores only
	// the best pages by bound, enough to hold margin x top_k tokens (select_bounds_first.hpp).
	DeviceSelect device_select = DeviceSelect::Exact;
	size_t top_k = 0;
	double margin = 2.0;
};

// What a device read and scored, summed over its jobs.
struct DeviceCounters {
	uint64_t flash_bytes = 0;		 // bytes the device read from its flash (bounds and keys)
	uint64_t bound_pages = 0;		 // pages scored by their bound (bounds-first stage 1)
	uint64_t exact_pages = 0, exact_tokens = 0; // pages and tokens scored exactly
	uint64_t score_entries = 0;		 // Score Block entries sent to the host
};

using BlockFn = std::function<void(const csd_score *, size_t)>;

// Runs the estimator's kernel over the K payload of one page (from a slab or from the CPU pool), one
// Score Block of up to block_tokens entries at a time, handing each to fn. Shared by every backend.
void score_page(const KvGeometry &g, Estimator est, const float *q, const uint8_t *k_payload, uint32_t first_pos,
		uint32_t n_tokens, uint32_t block_tokens, const BlockFn &fn);

// Defaults from published SmartSSD figures (Documentation/kv.md, "Backends").
struct EmulatedConfig {
	double internal_bandwidth = 4.0e9; // bytes/s flash to FPGA: HillInfer Sec. 4.2, "approximately 4 GB/s"
	double compute_rate = 9.6e9;	   // MAC/s: 32 lanes (one 512-bit beat of fp16) x 300 MHz, an assumption
};

struct BackendConfig {
	std::string name = "none";
	KvGeometry geometry{};
	kv::StoragePool *pool = nullptr; // the pool whose slabs are scored
	EmulatedConfig emulated;
	std::string xclbin; // xrt: the kernel binary
	unsigned xrt_device = 0;
};

class Backend {
public:
	virtual ~Backend() = default;
	virtual const char *name() const = 0;
	virtual int submit(const ScoreJob &job) = 0;
	// Hands every Score Block of the submitted job to fn (on the caller's thread), then returns 0 or
	// the job's first error with a sentence in err.
	virtual int wait(const BlockFn &fn, std::string &err) = 0;
	// The device's own reads and scoring; zero for a backend that scores on the host (none).
	virtual DeviceCounters counters() const { return {}; }
};

// Makes the named backend. When xrt cannot run (no card, no XRT in this build) it makes the emulated
// backend instead and says why in note (one line); other failures return -errno with err.
int make_backend(const BackendConfig &cfg, std::unique_ptr<Backend> &out, std::string &err, std::string &note);

std::unique_ptr<Backend> make_none_backend(const BackendConfig &cfg);
int make_emulated_backend(const BackendConfig &cfg, std::unique_ptr<Backend> &out, std::string &err);
int make_xrt_backend(const BackendConfig &cfg, std::unique_ptr<Backend> &out, std::string &err);

} // namespace llmcache::csd
