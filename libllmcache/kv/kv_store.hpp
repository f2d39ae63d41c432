// SPDX-License-Identifier: MIT
/*
 * The KV store of one session: the CPU pool (pages of tokens in memory, within a byte budget) and the
 * storage pool (pages spilled as K and V slabs, kvio/storage_pool.hpp), with HillInfer's hierarchical
 * importance evaluation on top (Sec. 3.2, Alg. 1):
 *  - append: a token's K and V for one layer land in the layer's current page in memory; when the CPU
 *    pool goes over budget, whole pages are spilled in one batch down to 7/8 of the budget. Pages that
 *    hold sink tokens or recent tokens never leave memory; among the others the least often selected
 *    (hit count) and then the oldest go first. A page that cannot be written stays in memory: nothing
 *    the CPU pool holds is ever dropped. A page that comes back to memory keeps its device copy, so
 *    spilling it again writes nothing (clean demotion; policy_spill.hpp). With KvOptions::write_through
 *    a page is also written when it fills, and keeps that copy, so its first spill is clean as well.
 *  - the decisions (which pages spill, which tokens are selected, which pages come back) are the pure
 *    functions of policy_*.hpp; this file executes them, and writes a KV trace of them when asked
 *    (KvOptions::trace, kv_trace.hpp) that the KV replay (kv_replay.hpp) reproduces.
 *  - select: the storage backend scores the spilled pages (in the device for emulated/xrt, on the host
 *    for none) while this thread scores the resident ones with the same kernel; Score Blocks from
 *    both are merged incrementally (score_merge.hpp); the result is sink + recent + the top-k of the
 *    rest within the token budget, and only the spilled pages holding selected tokens are fetched.
 * With KvOptions::aerp (Kelle's AERP, policy_aerp.hpp) a session is different: it stays in memory,
 * every KV head of a layer keeps at most aerp.budget tokens chosen by accumulated attention, evicted
 * rows are freed, popular tokens keep their input vector x instead of K and V when that is smaller, and
 * select recomputes their K and V (x.W_K, x.W_V) and returns them as if they were stored.
 * With KvOptions::memory on top of AERP (EdgeInfinite's compressed memory, policy_memory.hpp), what a
 * head evicts is folded into that head's memory before its rows are freed, and select also returns the
 * memory's readout for the query, when the layer's context is past the routing threshold.
 * One KvStore serves one session from one thread.
 */
#pragma once
#include "csd/backend.hpp"
#include "kv/policy.hpp"
#include "kv/policy_aerp.hpp"
#include "kv/policy_memory.hpp"
#include "kv/policy_select.hpp"
#include "kvio/storage_pool.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llmcache::kv {

class KvTraceWriter;

struct KvShape {
	uint32_t layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
	uint32_t dtype = CSD_FP16; // csd_dtype
	uint32_t max_context = 0;
};

struct KvOptions {
	uint64_t cpu_budget = 256ull << 20; // bytes of KV pages kept in memory
	std::string device;		    // storage pool: block device or file; empty = memory only
	uint64_t device_offset = 0;	    // first byte of the device to use (multiple of 4096)
	uint64_t device_capacity = 0;	    // bytes of the device to use; 0 = all
	uint32_t page_tokens = 32, sink_tokens = 4, recent_tokens = 64, score_block = 64;
	unsigned queue_depth = 32;
	bool io_uring = true; // false: synchronous pread/pwrite
	// HillInfer's beta, the CPU:storage split of the KV (M_c / M_s): 0 = off (the CPU pool fills
	// cpu_budget before anything spills); > 0 = the CPU pool keeps beta / (1 + beta) of the KV, within
	// cpu_budget; < 0 = adaptive: beta = f_c / f_s as measured online (KvStats::beta()).
	double beta = 0;
	csd::Estimator estimator = csd::Estimator::Exact;
	// How an in-storage backend (emulated) chooses what it reads with the exact estimator
	// (csd/select_bounds_first.hpp; Documentation/kv.md, "Bounds-first device selection"): every key
	// (Exact), or every page's Quest bounds and then the keys of the best pages by bound, enough to hold
	// device_margin x the select's top-k places (BoundsFirst). The none backend always scans every key.
	csd::DeviceSelect device_select = csd::DeviceSelect::Exact;
	double device_margin = 2.0; // at least 1
	std::string backend = "none"; // none, emulated, xrt
	csd::EmulatedConfig emulated;
	std::string xclbin;
	std::string trace; // a file to write the session's KV trace to (kv_trace.hpp); empty = none
	// Kelle's AERP (policy_aerp.hpp; Documentation/kv.md): budget 0 = off. On, the session has no
	// device (its trace records the AERP events, kv_trace.hpp); sink_tokens and recent_tokens are the
	// always-kept ones.
	struct Aerp {
		uint32_t budget = 0;  // tokens each KV head of a layer keeps
		uint32_t d_model = 0; // elements of a token's input vector x; 0 = no recomputation
		// layers x d_model x (kv_heads * head_dim) fp32, row-major per layer (K = x . W_K); both empty
		// when d_model is 0
		std::vector<float> w_k, w_v;
	} aerp;
	// Two-plane precision (Documentation/kv.md, "Two-plane precision"; kvio/planes.hpp,
	// policy_precision.hpp): off by default, and then nothing changes. On, every V slab spilled holds
	// its rows as a high plane and a low plane, and a select fetches both planes of the spilled V rows
	// of the best `full` fraction of its top-k tokens (by score) and the high plane alone of the others.
	// K slabs keep their layout: the in-storage scoring kernels read it. Not with AERP (no device).
	struct Planes {
		bool on = false;
		double full = 0.5; // in [0, 1]
	} planes;
	// EdgeInfinite's compressed memory (policy_memory.hpp; Documentation/kv.md, "EdgeInfinite's
	// compressed memory"): off by default. On (AERP sessions only: nothing else ever drops a token),
	// every (token, KV head) the AERP eviction removes is folded into that head's M and z, and select
	// returns sigma(q) M / (sigma(q) z) per query head when the layer's context exceeds route_threshold.
	struct Memory {
		bool on = false;
		uint32_t route_threshold = 0; // tokens; below max_context
	} memory;
	// Write full pages through (Documentation/kv.md, "Writing full pages through"): off by default. On
	// (sessions with a device), a page is written to the device when its last token is appended and
	// keeps that copy while it stays in memory, so that its first spill is clean (no write in the pool
	// update's swaps after the prefill), at the cost of also writing the pages that never leave memory.
	// A write that fails, or finds the device without two free slots, leaves the page without a copy
	// (its spill writes it, as without the option); it is counted, not returned.
	bool write_through = false;
};

struct KvSelection {
	std::vector<uint32_t> positions; // ascending
	std::vector<uint8_t> k, v;	 // the selected rows, in positions order
	// AERP sessions: positions.size() x kv_heads, 1 where that KV head keeps the token (its rows are
	// zero where it does not, except for recomputed tokens, whose rows are whole); empty otherwise.
	std::vector<uint8_t> heads;
	// Sessions with the compressed memory: the readout, q_heads x head_dim floats, and per query head a
	// policy::MemoryState (Short: not routed, Used, Empty); both empty otherwise.
	std::vector<float> memory;
	std::vector<uint8_t> memory_state;
};

struct KvStats {
	uint64_t cpu_bytes = 0, cpu_pages = 0, spilled_pages = 0, spill_batches = 0, spill_failures = 0;
	uint64_t fetched_pages = 0, promoted_pages = 0, selects = 0, scored_cpu = 0, scored_storage = 0;
	// Clean demotion: pages spilled without a write (their device copy was kept when they came back),
	// and device copies of resident pages dropped to make room for pages that needed a write.
	uint64_t clean_spills = 0, copies_dropped = 0;
	// Write-through (KvOptions::write_through): pages written when they filled, and those whose write
	// failed or found no free slots (they spill as pages never written). Their slabs are in
	// storage.slabs_written, two a page, with those of the spills.
	uint64_t written_through = 0, write_through_failures = 0;
	// Scoring throughput measured online (HillInfer's f_c and f_s): tokens scored and the time taken by
	// the CPU pool, and by the backend from submit to its last Score Block. beta() = f_c / f_s is the
	// CPU:storage capacity ratio at which both finish together (HillInfer Eq. 1).
	uint64_t cpu_score_ns = 0, storage_score_ns = 0;
	uint64_t cpu_runs = 0, storage_runs = 0; // selects that scored CPU pages / storage backend jobs
	// Held now (stats() counts them): storage_bytes are the device slots in use, those of the spilled
	// pages and of the copies kept of resident pages (resident_copies of them).
	uint64_t cpu_tokens = 0, storage_tokens = 0, storage_bytes = 0, resident_copies = 0;
	uint64_t storage_slots_used = 0; // the storage pool's own count: its slots less its free list
	double beta() const
	{
		return cpu_score_ns && storage_score_ns && scored_storage
			       ? ((double)scored_cpu / cpu_score_ns) / ((double)scored_storage / storage_score_ns)
			       : 0.0;
	}
	StorageStats storage;
	csd::DeviceCounters device; // what the in-storage backend read and scored (zero for none)
	// AERP: tokens and bytes held now (K, V rows and x vectors; stats() counts them, and adds them to
	// cpu_tokens and cpu_bytes), of which tokens
	// stored as x; (token, head) pairs and whole tokens evicted; tokens recomputed (by selects, and by
	// folds into the compressed memory) and the time that took.
	uint64_t aerp_tokens = 0, aerp_x_tokens = 0, aerp_bytes = 0;
	uint64_t aerp_evicted_heads = 0, aerp_evicted_tokens = 0, aerp_recomputed = 0, aerp_recompute_ns = 0;
	// Two-plane precision: spilled V rows fetched with the high plane alone, and with both planes.
	uint64_t plane_high_rows = 0, plane_full_rows = 0;
	// Compressed memory: (token, KV head) pairs folded, bytes of M and z held (stats() counts them, and
	// adds them to cpu_bytes), selects that read it and selects the routing sent past it (short).
	uint64_t memory_folded = 0, memory_bytes = 0, memory_reads = 0, memory_short = 0;
};

class KvStore {
public:
	static int open(const KvShape &shape, const KvOptions &opt, std::unique_ptr<KvStore> &out, std::string &err);
	// Checks a model shape field by field: 0, or -EINVAL with err naming the first field out of range
	// and its range. The daemon calls it on OPEN before anything is sized from the shape.
	static int check_shape(const KvShape &shape, std::string &err);
	static constexpr uint32_t MAX_LAYERS = 4096; // each layer costs a page table, whatever its use
	static constexpr uint32_t MAX_D_MODEL = 1u << 16; // AERP's input vectors
	~KvStore();

	// Appends the next token's K and V (kv_heads * head_dim elements of the dtype each) to a layer.
	// The token is stored even when spilling fails; the return value then says why (-ENOSPC, -EIO).
	// After a failed spill, spilling is tried again when a page fills, not at every token: until then
	// each append over the budget returns that failure again.
	// AERP sessions with recomputation also take the token's input vector x (d_model elements of the
	// dtype; nullptr: the token keeps K and V); other sessions ignore x.
	int append(uint32_t layer, const void *k, const void *v, const void *x = nullptr);
	// Selects at most max(budget, sink + recent) tokens of a layer for query q (q_heads * head_dim
	// floats) and gathers their K and V. Often-selected spilled pages come back to memory, and the
	// least selected are spilled if the budget requires it.
	int select(uint32_t layer, const float *q, uint32_t budget, KvSelection &out);
	// The same in two halves, so that the storage backend scores layer i+1 while the engine computes
	// layer i: begin submits the spilled pages to the backend and returns; end scores the CPU pool,
	// merges, fetches. One select may be pending; appends wait until it ends (-EBUSY).
	int select_begin(uint32_t layer, const float *q, uint32_t budget);
	int select_end(KvSelection &out);
	// Copies one token's K and V out, from memory or from the storage pool (AERP: recomputed from x
	// where stored so, zero for heads that evicted it; -ENOENT when every head evicted it).
	int read(uint32_t layer, uint32_t pos, void *k, void *v);

	uint32_t tokens(uint32_t layer) const { return layer < tokens_.size() ? tokens_[layer] : 0; }
	bool resident(uint32_t layer, uint32_t pos) const;
	// Byte offset on the device of the slab holding a spilled token's K or V; -1 if it is in memory.
	int64_t slab_offset(uint32_t layer, uint32_t pos, SlabKind kind) const;
	const std::string &error() const { return err_; }
	const char *backend_name() const { return backend_ ? backend_->name() : "none"; }
	const std::string &backend_note() const { return note_; } // fallbacks taken at open, one line
	KvStats stats() const;
	double beta() const;	  // the split in force: the configured one, or the measured one when adaptive (0 = none)
	uint64_t budget() const; // the CPU pool's byte target under the split, at most cpu_budget
	uint64_t hard_limit() const; // the CPU pool's bytes past which appends are refused
	uint64_t row_bytes() const { return geo_.row_bytes(); }
	// A layer's compressed memory; nullptr without the option, or before the layer evicted anything.
	const policy::CompressedMemory *memory(uint32_t layer) const
	{
		return layer < memory_.size() && !memory_[layer].empty() ? &memory_[layer] : nullptr;
	}

private:
	struct Page {
		SlabBuffer k, v; // k: kmin, kmax, keys (the K slab payload); empty when spilled
		uint32_t n_tokens = 0, hits = 0;
		// CRC32C of the keys and of the V rows, chained as tokens are appended (the rows are hot in
		// the cache then), so a spill seals the slabs without reading the page again. Only full pages
		// spill and a full page never changes, so the values stay right when it comes back.
		uint32_t keys_crc = 0, v_crc = 0;
		// CRC32C per 4 KiB block of the K and V slabs (kvio/slab.hpp), fed as rows are appended and completed
		// at the first spill: what a read of only the selected rows' blocks is verified against.
		BlockCrcs kb, vb;
		// The device copy's K and V slabs (-1: none). A page that comes back to memory keeps them, so
		// that spilling it again writes nothing while it holds the tokens the copy holds.
		int64_t k_off = -1, v_off = -1;
		uint32_t device_tokens = 0; // tokens the device copy holds
		bool clean() const { return k_off >= 0 && device_tokens == n_tokens; }
	};
	// AERP: one retained token, its storage in one of three forms.
	enum class Form : uint8_t { Recent, Kv, X };
	struct AerpToken {
		Form form = Form::Recent; // Recent: every head's K and V, and x if given (undecided)
		std::vector<uint8_t> k, v; // Kv: the rows of the heads that keep it, in head order
		std::vector<uint8_t> x;	   // X: the input vector
		uint64_t bytes() const { return k.size() + v.size() + x.size(); }
	};
	struct AerpLayer {
		std::vector<uint32_t> pos;  // ascending
		std::vector<float> score;   // pos.size() x kv_heads: accumulated importance (Kelle Eq. 3)
		std::vector<uint8_t> kept;  // pos.size() x kv_heads
		std::vector<AerpToken> tok;
	};
	struct Pending {
		bool active = false;
		uint32_t layer = 0, budget = 0;
		policy::SelectPlan plan; // the always-kept tokens and the top-k places (policy_select.hpp)
		size_t storage_pages = 0;
		std::vector<float> q;
		std::chrono::steady_clock::time_point submitted;
	};
	KvStore() = default;
	policy::AerpParams aerp_params() const;
	bool aerp_recompute() const { return !opt_.aerp.w_k.empty(); }
	int aerp_append(uint32_t layer, const void *k, const void *v, const void *x);
	int aerp_select(KvSelection &out);
	// Token i's whole K and V rows: stored, zero for heads that dropped it, or recomputed from x.
	void aerp_rows(uint32_t layer, size_t i, uint8_t *k, uint8_t *v);
	// K = x.W_K and V = x.W_V of a token stored as x, every head's rows, timed in the stats.
	void aerp_recompute_rows(uint32_t layer, const AerpToken &tk, uint8_t *k, uint8_t *v);
	std::vector<AerpLayer> aerp_;
	// Folds what an eviction removed (ev, from the keep mask `before`) into the layer's memory.
	void memory_fold_evicted(uint32_t layer, const std::vector<policy::Eviction> &ev, const std::vector<uint8_t> &before);
	std::vector<policy::CompressedMemory> memory_; // per layer, allocated at its first eviction
	// What the policy functions decide from: the parameters, and the pages' states.
	policy::Params params() const;
	policy::PageInfo page_info(const Page &p) const { return {p.n_tokens, p.hits, (bool)p.k, p.clean()}; }
	// Gives up a page's device slots (its copy is gone).
	void drop_device_copy(Page &p);
	int set_error(int e, std::string msg);
	// Writes the K and V slabs of the full, resident pages in one batch; each page written points at its
	// copy (k_off, v_off, device_tokens) and stays in memory; written[i] says whether pages[i] was.
	// 0, or the first error with err_ set.
	int write_pages(const std::vector<policy::PageRef> &pages, std::vector<bool> &written);
	// Write-through of a page that just filled (KvOptions::write_through).
	void write_through(uint32_t layer, uint32_t page);
	int spill();
	// spill(), remembering a failure so that append does not retry before a page fills.
	int spill_and_note();
	int refuse(uint32_t layer, uint32_t pos, const std::string &why); // -ENOSPC: not stored
	// Copies the K and V rows of the spilled tokens among positions (ascending) to k and v (row i of
	// each for positions[i]). The pages listed in `whole` (ascending) are read whole and land, verified,
	// in whole_pages[j]'s buffers; of the others only the blocks holding the rows are read.
	// With two-plane precision, the spilled V rows of the positions in high_only (ascending, a subset of
	// positions) are read and returned with the high plane alone; those of pages read whole are full.
	int fetch(uint32_t layer, std::span<const uint32_t> positions, uint8_t *k, uint8_t *v,
		  const std::vector<uint32_t> &whole, std::vector<Page> &whole_pages,
		  std::span<const uint32_t> high_only = {});
	uint64_t page_bytes() const;
	uint64_t slab_bytes_ = 0; // a page's K or V in slab layout: header, the larger payload, 4096-aligned

	KvShape shape_;
	KvOptions opt_;
	csd::KvGeometry geo_{};
	std::vector<std::vector<Page>> pages_;
	std::vector<uint32_t> tokens_;
	std::unique_ptr<StoragePool> pool_;
	std::unique_ptr<csd::Backend> backend_;
	std::string err_, note_;
	KvStats stats_;
	Pending pending_;
	std::unique_ptr<KvTraceWriter> trace_; // with KvOptions::trace
	int spill_failed_ = 0;	  // the last spill's error (0: it succeeded), until one succeeds
	std::string spill_error_; // its message
	uint64_t last_retry_ns_ = 0; // the last spill tried while appends were refused
	static constexpr uint64_t RETRY_NS = 100'000'000;
};

} // namespace llmcache::kv
