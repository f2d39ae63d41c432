// SPDX-License-Identifier: MIT
#include "kv/kv_store.hpp"

#include "kv/kv_trace.hpp"
#include "kv/policy_pool_update.hpp"
#include "kv/policy_precision.hpp"
#include "kv/policy_spill.hpp"
#include "kv/score_merge.hpp"
#include "kvio/crc32c.hpp"
#include "kvio/planes.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

namespace llmcache::kv {

int KvStore::set_error(int e, std::string msg)
{
	err_ = std::move(msg);
	return e;
}

uint64_t KvStore::page_bytes() const { return geo_.k_payload(opt_.page_tokens) + opt_.page_tokens * geo_.row_bytes(); }

policy::Params KvStore::params() const
{
	policy::Params p;
	p.page_tokens = opt_.page_tokens;
	p.sink_tokens = opt_.sink_tokens;
	p.recent_tokens = opt_.recent_tokens;
	p.cpu_budget = opt_.cpu_budget;
	p.page_bytes = page_bytes();
	p.device = (bool)pool_;
	return p;
}

int KvStore::check_shape(const KvShape &shape, std::string &err)
{
	auto bad = [&](const char *field, uint32_t v, const std::string &range) {
		err = "invalid model shape: " + std::string(field) + " " + std::to_string(v) + ": " + range;
		return -EINVAL;
	};
	auto outside = [](uint32_t v, uint32_t hi) { return v == 0 || v > hi; };
	auto between = [](uint32_t hi) { return "must be 1-" + std::to_string(hi); };
	if (outside(shape.layers, MAX_LAYERS))
		return bad("layers", shape.layers, between(MAX_LAYERS));
	if (outside(shape.q_heads, CSD_MAX_Q_HEADS))
		return bad("q_heads", shape.q_heads, between(CSD_MAX_Q_HEADS));
	if (outside(shape.kv_heads, CSD_MAX_KV_HEADS))
		return bad("kv_heads", shape.kv_heads, between(CSD_MAX_KV_HEADS));
	if (shape.q_heads % shape.kv_heads)
		return bad("q_heads", shape.q_heads, "must be a multiple of kv_heads (" + std::to_string(shape.kv_heads) + ")");
	if (outside(shape.head_dim, CSD_MAX_HEAD_DIM))
		return bad("head_dim", shape.head_dim, between(CSD_MAX_HEAD_DIM));
	if (shape.dtype > CSD_BF16)
		return bad("dtype", shape.dtype, "use 0 (fp32), 1 (fp16) or 2 (bf16)");
	if (outside(shape.max_context, CSD_MAX_TOKENS))
		return bad("max_context", shape.max_context, between(CSD_MAX_TOKENS));
	return 0;
}

// The AERP options against the shape: the budget holds sink and recent, the session has no device,
// and W_K and W_V (both or neither) have layers x d_model x (kv_heads * head_dim) elements.
static int check_aerp_options(const KvShape &shape, const KvOptions &opt, std::string &err)
{
	const KvOptions::Aerp &a = opt.aerp;
	if (!a.budget) {
		if (a.d_model || !a.w_k.empty() || !a.w_v.empty()) {
			err = "invalid AERP options: W_K and W_V (recomputation) need an AERP budget";
			return -EINVAL;
		}
		return 0;
	}
	policy::AerpParams prm;
	prm.budget = a.budget;
	prm.sink_tokens = opt.sink_tokens;
	prm.recent_tokens = opt.recent_tokens;
	prm.q_heads = shape.q_heads;
	prm.kv_heads = shape.kv_heads;
	prm.head_dim = shape.head_dim;
	prm.d_model = a.d_model;
	if (int r = policy::check_aerp(prm, err))
		return r;
	if (!opt.device.empty()) {
		err = "invalid AERP options: an AERP session keeps its KV in memory; open it without a KV device";
		return -EINVAL;
	}
	if (a.d_model > KvStore::MAX_D_MODEL) {
		err = "invalid AERP options: d_model " + std::to_string(a.d_model) + ": must be 0-" +
		      std::to_string(KvStore::MAX_D_MODEL);
		return -EINVAL;
	}
	const uint64_t want = (uint64_t)shape.layers * a.d_model * shape.kv_heads * shape.head_dim;
	if (a.w_k.size() != want || a.w_v.size() != want) {
		err = "invalid AERP options: W_K has " + std::to_string(a.w_k.size()) + " and W_V " +
		      std::to_string(a.w_v.size()) + " elements; with d_model " + std::to_string(a.d_model) +
		      " each needs layers x d_model x kv_heads x head_dim = " + std::to_string(want) +
		      (a.d_model ? "" : " (d_model 0: no recomputation, no weights)");
		return -EINVAL;
	}
	return 0;
}

int KvStore::open(const KvShape &shape, const KvOptions &opt, std::unique_ptr<KvStore> &out, std::string &err)
{
	if (int r = check_shape(shape, err))
		return r;
	if (!opt.page_tokens || !opt.score_block || opt.score_block > CSD_MAX_BLOCK) {
		err = "invalid KV options: page tokens and score block size must be positive (score block at most " +
		      std::to_string(CSD_MAX_BLOCK) + ")";
		return -EINVAL;
	}
	if (int r = check_aerp_options(shape, opt, err))
		return r;
	if (!(opt.device_margin >= 1) || !std::isfinite(opt.device_margin)) {
		err = "invalid KV options: the bounds-first margin must be at least 1 (it is " +
		      std::to_string(opt.device_margin) + ")";
		return -EINVAL;
	}
	if (opt.planes.on && (!(opt.planes.full >= 0 && opt.planes.full <= 1) || opt.aerp.budget)) {
		err = "invalid two-plane precision options: the full-precision fraction must be in [0, 1] (it is " +
		      std::to_string(opt.planes.full) + ") and the session cannot use AERP, which keeps no device";
		return -EINVAL;
	}
	if (opt.memory.on && (!opt.aerp.budget || opt.memory.route_threshold >= shape.max_context)) {
		err = !opt.aerp.budget
			      ? "invalid compressed-memory options: the memory folds what AERP evicts, and a session "
				"without AERP never drops a token; give it an AERP budget"
			      : "invalid compressed-memory options: route threshold " +
					std::to_string(opt.memory.route_threshold) + ": must be below max_context (" +
					std::to_string(shape.max_context) + "), or the memory is never read";
		return -EINVAL;
	}
	std::unique_ptr<KvStore> s(new KvStore());
	s->shape_ = shape;
	s->opt_ = opt;
	s->geo_ = {shape.q_heads, shape.kv_heads, shape.head_dim, shape.dtype, opt.page_tokens};
	s->pages_.resize(shape.layers);
	if (opt.aerp.budget)
		s->aerp_.resize(shape.layers);
	if (opt.memory.on)
		s->memory_.resize(shape.layers);
	s->tokens_.assign(shape.layers, 0);
	const uint64_t payload = std::max(s->geo_.k_payload(opt.page_tokens), opt.page_tokens * s->geo_.row_bytes());
	s->slab_bytes_ = (sizeof(SlabHeader) + payload + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
	if (!opt.device.empty()) {
		StorageConfig sc{opt.device, opt.device_offset, opt.device_capacity, s->slab_bytes_, opt.queue_depth,
				 opt.io_uring};
		if (int r = StoragePool::open(sc, s->pool_, err))
			return r;
		s->note_ = s->pool_->note();
		csd::BackendConfig bc;
		bc.name = opt.backend;
		bc.geometry = s->geo_;
		bc.pool = s->pool_.get();
		bc.emulated = opt.emulated;
		bc.xclbin = opt.xclbin;
		std::string note;
		if (int r = csd::make_backend(bc, s->backend_, err, note))
			return r;
		s->note_ += (s->note_.empty() || note.empty() ? "" : "; ") + note;
	}
	if (!opt.trace.empty()) {
		KvTraceHeader h{shape.layers, shape.q_heads, shape.kv_heads, shape.head_dim, shape.dtype, shape.max_context,
				opt.page_tokens, opt.sink_tokens, opt.recent_tokens, opt.cpu_budget, opt.beta,
				(bool)s->pool_, opt.estimator == csd::Estimator::QuestBounds ? "quest" : "exact",
				opt.write_through && s->pool_, opt.aerp.budget, opt.aerp.budget ? opt.aerp.d_model : 0,
				opt.memory.on, opt.memory.on ? opt.memory.route_threshold : 0};
		if (int r = KvTraceWriter::open(opt.trace, h, s->trace_, err))
			return r;
	}
	out = std::move(s);
	return 0;
}

KvStore::~KvStore() = default;

double KvStore::beta() const { return opt_.beta < 0 ? stats_.beta() : opt_.beta; }

// HillInfer's adaptive split (Sec. 3.3, Eq. 1): M_c / f_c = M_s / f_s with M_c < M_0, i.e. the CPU
// pool holds beta / (1 + beta) of the session's KV, never more than the budget M_0. Without a beta
// (off, or adaptive before both rates are measured) the CPU pool fills its budget first.
uint64_t KvStore::budget() const
{
	return policy::cpu_target(params(), beta(), (stats_.cpu_pages + stats_.spilled_pages) * page_bytes());
}

uint64_t KvStore::hard_limit() const { return opt_.cpu_budget + std::max(opt_.cpu_budget / 4, 2 * page_bytes()); }

int KvStore::refuse(uint32_t layer, uint32_t pos, const std::string &why)
{
	return set_error(-ENOSPC, "the CPU KV pool is at its limit of " + std::to_string(hard_limit()) +
					  " bytes (the budget and a quarter, two pages at least) and " + why + ": token " +
					  std::to_string(pos) + " of layer " + std::to_string(layer) +
					  " was not stored; free the device, raise the budget or close the session");
}

int KvStore::append(uint32_t layer, const void *k, const void *v, const void *x)
{
	if (pending_.active)
		return set_error(-EBUSY, "append while a select is pending: call select_end first");
	if (layer >= shape_.layers)
		return set_error(-EINVAL, "layer " + std::to_string(layer) + " out of range (the model has " +
					     std::to_string(shape_.layers) + ")");
	const uint32_t pos = tokens_[layer];
	if (pos >= shape_.max_context)
		return set_error(-ENOSPC, "layer " + std::to_string(layer) + " is at the session's max context of " +
					     std::to_string(shape_.max_context) + " tokens");
	if (!aerp_.empty())
		return aerp_append(layer, k, v, x);
	const uint32_t P = opt_.page_tokens, dims = geo_.dims(), t = pos % P;
	const uint64_t row = geo_.row_bytes();
	auto &pages = pages_[layer];
	// What cannot be spilled stays in memory, up to a quarter over the budget: past that a new page is
	// refused, and the token with it, so that a session whose device fails (or that has none) cannot
	// take the machine's memory. Memory grows only when a page starts. While appends are refused, a
	// failed spill is tried again at most every RETRY_NS: what it rewrites is bounded by the limit, and
	// so is the time a failing device costs the daemon.
	if (t == 0 && stats_.cpu_bytes + page_bytes() > hard_limit()) {
		const uint64_t now = (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
					     std::chrono::steady_clock::now().time_since_epoch())
					     .count();
		if (pool_ && (!spill_failed_ || now - last_retry_ns_ >= RETRY_NS)) {
			last_retry_ns_ = now;
			spill_and_note();
		}
		if (stats_.cpu_bytes + page_bytes() > hard_limit())
			return refuse(layer, pos,
				      !pool_ ? std::string("no storage device is configured")
				      : spill_error_.empty() ? std::string("every page in memory holds sink or recent tokens")
							     : "its pages cannot be spilled (" + spill_error_ + ")");
	}
	if (t == 0) {
		Page p;
		p.k = SlabBuffer(slab_bytes_, geo_.k_payload(P));
		p.v = SlabBuffer(slab_bytes_, P * row);
		auto mm = reinterpret_cast<float *>(p.k.get());
		std::fill(mm, mm + dims, std::numeric_limits<float>::infinity());
		std::fill(mm + dims, mm + 2 * dims, -std::numeric_limits<float>::infinity());
		// Fed from the first block holding keys only: the key bounds before them change with every append.
		if (pool_) {
			p.kb = BlockCrcs(slab_bytes_, (8ull * dims + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN);
			p.vb = BlockCrcs(slab_bytes_, 0);
		}
		pages.push_back(std::move(p));
		stats_.cpu_bytes += page_bytes();
		stats_.cpu_pages++;
	}
	Page &p = pages.back();
	uint8_t *keys = p.k.get() + 8ull * dims;
	std::memcpy(keys + t * row, k, row);
	std::memcpy(p.v.get() + t * row, v, row);
	p.keys_crc = crc32c(keys + t * row, row, p.keys_crc);
	p.v_crc = crc32c(p.v.get() + t * row, row, p.v_crc);
	if (pool_) { // the block tables are for partial reads from the device
		p.kb.feed(8ull * dims + t * row, keys + t * row, row);
		p.vb.feed(t * row, p.v.get() + t * row, row);
	}
	auto kmin = reinterpret_cast<float *>(p.k.get()), kmax = kmin + dims;
	auto words = reinterpret_cast<const uint32_t *>(keys);
	static const float *const half = csd_host_half_table();
	for (uint32_t d = 0; d < dims; d++) {
		const uint64_t i = (uint64_t)t * dims + d;
		const float x = geo_.dtype == CSD_FP16 ? half[(uint16_t)(words[i >> 1] >> ((i & 1) * 16))]
						       : csd_key(words, i, geo_.dtype);
		kmin[d] = std::min(kmin[d], x);
		kmax[d] = std::max(kmax[d], x);
	}
	p.n_tokens++;
	tokens_[layer]++;
	if (trace_)
		trace_->append(layer);
	if (opt_.write_through && pool_ && p.n_tokens == P)
		write_through(layer, (uint32_t)pages.size() - 1);
	if (!policy::must_spill_after_append(params(), stats_.cpu_bytes, budget(), p.n_tokens == P))
		return 0;
	// A device that fails (I/O errors, gone, full) fails every spill, and every spill of an append
	// over the budget wrote all its victims again: the pages that could not leave piled up, so each
	// token cost more failed writes than the last, and the single-threaded daemon stalled every
	// other session behind them (tests/vm/kv-fault-check.sh: 4.5 ms per token and layer under TCG
	// with 8 MiB stuck, growing with it). So after a failure, retry when a page fills (the pages
	// become movable at page boundaries anyway) and meanwhile report the same failure.
	if (spill_failed_ && p.n_tokens != P)
		return set_error(spill_failed_, spill_error_);
	return spill_and_note();
}

int KvStore::spill_and_note()
{
	const int r = spill();
	spill_failed_ = r < 0 ? r : 0;
	spill_error_ = r < 0 ? err_ : std::string();
	return r;
}

// Spills the pages policy::choose_spill_victims() chooses (policy_spill.hpp), in one batch.
int KvStore::spill()
{
	const uint64_t over = stats_.cpu_bytes - std::min(stats_.cpu_bytes, opt_.cpu_budget);
	if (!pool_)
		return set_error(-ENOSPC, "the CPU KV pool is over its budget of " + std::to_string(opt_.cpu_budget) +
					     " bytes by " + std::to_string(over) +
					     " and no storage device is configured: the KV stays in memory; configure a KV "
					     "device or raise the budget");
	const uint64_t pb = page_bytes();
	policy::PoolSnapshot snap;
	snap.pages.resize(shape_.layers);
	snap.tokens = tokens_;
	snap.cpu_bytes = stats_.cpu_bytes;
	for (uint32_t l = 0; l < shape_.layers; l++) {
		snap.pages[l].reserve(pages_[l].size());
		for (const Page &p : pages_[l])
			snap.pages[l].push_back(page_info(p));
	}
	const std::vector<policy::PageRef> victims = policy::choose_spill_victims(snap, params(), budget());
	auto leave_memory = [&](Page &p) {
		p.k.reset();
		p.v.reset();
		stats_.cpu_bytes -= pb;
		stats_.cpu_pages--;
		stats_.spilled_pages++;
	};
	// Clean demotion: a victim whose device copy holds the tokens it holds points at that copy again.
	std::vector<policy::PageRef> cand; // the victims that need a write
	for (const policy::PageRef &c : victims) {
		Page &p = pages_[c.layer][c.page];
		if (p.clean()) {
			leave_memory(p);
			stats_.clean_spills++;
			continue;
		}
		if (p.k_off >= 0) // a stale copy: the page changed since it was written
			drop_device_copy(p);
		cand.push_back(c);
	}
	// Slots for the writes: copies kept of resident pages give theirs up if the device is short.
	const uint64_t free_pages = pool_->slots_free() / 2;
	if (cand.size() > free_pages)
		for (const policy::PageRef &c : policy::choose_copies_to_drop(snap, victims, cand.size() - free_pages)) {
			drop_device_copy(pages_[c.layer][c.page]);
			stats_.copies_dropped++;
		}
	std::vector<bool> written;
	const int r = write_pages(cand, written);
	stats_.spill_batches++;
	std::vector<policy::PageRef> failed;
	for (size_t i = 0; i < cand.size(); i++) {
		if (!written[i]) {
			stats_.spill_failures++;
			failed.push_back(cand[i]);
			continue;
		}
		leave_memory(pages_[cand[i].layer][cand[i].page]);
	}
	if (trace_)
		trace_->spill(victims, failed);
	if (r < 0)
		return r;
	if (stats_.cpu_bytes > opt_.cpu_budget)
		return set_error(-ENOSPC, "the CPU KV pool is over its budget of " + std::to_string(opt_.cpu_budget) +
					     " bytes: every page left in memory holds sink or recent tokens; raise the "
					     "budget or lower sink/recent tokens");
	return 0;
}

int KvStore::write_pages(const std::vector<policy::PageRef> &pages, std::vector<bool> &written)
{
	const uint32_t P = opt_.page_tokens;
	std::vector<SlabWrite> w;
	std::vector<SlabBuffer> planar; // two-plane precision: the V slabs as written, until the write is done
	for (const policy::PageRef &c : pages) {
		Page &p = pages_[c.layer][c.page];
		p.kb.finish(p.k.slab());
		const uint64_t bounds = 8ull * geo_.dims(), keys = (uint64_t)P * geo_.row_bytes();
		const uint32_t k_crc = crc32c_combine(crc32c(p.k.get(), bounds), p.keys_crc, keys);
		w.push_back({{pool_->pool_id(), c.layer, c.page, SlabKind::K}, P, p.k.get(), bounds + keys, nullptr, 0, p.k.slab(),
			     k_crc, true});
		const SlabId vid{pool_->pool_id(), c.layer, c.page, SlabKind::V};
		if (!opt_.planes.on) {
			p.vb.finish(p.v.slab());
			w.push_back({vid, P, p.v.get(), keys, nullptr, 0, p.v.slab(), p.v_crc, true});
			continue;
		}
		// The rows as two planes in a slab of their own; the block table describes what is on the device.
		const SlabBuffer &pv = planar.emplace_back(slab_bytes_, keys);
		planes_split(p.v.get(), (size_t)P * geo_.dims(), csd_dtype_bytes(geo_.dtype), pv.get(), pv.get() + keys / 2);
		p.vb = BlockCrcs(slab_bytes_, 0);
		p.vb.finish(pv.slab());
		w.push_back({vid, P, pv.get(), keys, nullptr, 0, pv.slab()});
	}
	std::vector<int64_t> res;
	std::string err;
	const int r = w.empty() ? 0 : pool_->write(w, res, err);
	written.assign(pages.size(), false);
	for (size_t i = 0; i < pages.size(); i++) {
		const int64_t ko = res[2 * i], vo = res[2 * i + 1];
		if (ko < 0 || vo < 0) {
			if (ko >= 0)
				pool_->release(ko);
			if (vo >= 0)
				pool_->release(vo);
			continue;
		}
		Page &p = pages_[pages[i].layer][pages[i].page];
		p.k_off = ko;
		p.v_off = vo;
		p.device_tokens = p.n_tokens;
		written[i] = true;
	}
	return r < 0 ? set_error(r, err) : 0;
}

// Write-through: the page that just filled goes to the device now and keeps the copy, so that its
// first spill is clean. The policy is unchanged (the page stays in memory, and is a spill victim like
// any other); only when the write happens moves. A device without two free slots, or a failed write,
// leaves the page as it was without the option: its spill writes it.
void KvStore::write_through(uint32_t layer, uint32_t page)
{
	std::vector<bool> written;
	const std::string err = err_;
	if (pool_->slots_free() < 2 || write_pages(std::vector<policy::PageRef>{policy::PageRef{layer, page}}, written) < 0 || !written[0]) {
		stats_.write_through_failures++;
		err_ = err; // not the append's error: the page is stored, and spills as if never written
		return;
	}
	stats_.written_through++;
}

void KvStore::drop_device_copy(Page &p)
{
	pool_->release((uint64_t)p.k_off);
	pool_->release((uint64_t)p.v_off);
	p.k_off = p.v_off = -1;
	p.device_tokens = 0;
}

bool KvStore::resident(uint32_t layer, uint32_t pos) const
{
	if (!aerp_.empty())
		return layer < shape_.layers && std::binary_search(aerp_[layer].pos.begin(), aerp_[layer].pos.end(), pos);
	return layer < shape_.layers && pos < tokens_[layer] && (bool)pages_[layer][pos / opt_.page_tokens].k;
}

int64_t KvStore::slab_offset(uint32_t layer, uint32_t pos, SlabKind kind) const
{
	if (layer >= shape_.layers || pos >= tokens_[layer] || !aerp_.empty())
		return -1;
	const Page &p = pages_[layer][pos / opt_.page_tokens];
	return p.k ? -1 : kind == SlabKind::K ? p.k_off : p.v_off;
}

int KvStore::fetch(uint32_t layer, std::span<const uint32_t> positions, uint8_t *k, uint8_t *v,
		   const std::vector<uint32_t> &whole, std::vector<Page> &whole_pages, std::span<const uint32_t> high_only)
{
	const uint32_t P = opt_.page_tokens;
	const uint64_t row = geo_.row_bytes(), keys_at = 8ull * geo_.dims(), half = row / 2, plane = P * half;
	const size_t elem = csd_dtype_bytes(geo_.dtype);
	const bool planes = opt_.planes.on;
	auto row_at = [&](SlabKind kind, uint32_t pos) { return (kind == SlabKind::K ? keys_at : 0) + (pos % P) * row; };
	std::vector<SlabRead> reads;
	struct Use {
		SlabKind kind;
		size_t from, to; // the rows positions[from, to) this read serves
		int64_t stage = -1; // two-plane V: the page's staging buffer (partial reads), -2 for a whole read
	};
	std::vector<Use> uses;
	// Two-plane V slabs: the blocks read of a page land in its staging buffer (the slab's payload), and
	// the rows are merged from their planes once every read is in.
	struct Stage {
		size_t from, to;
		std::vector<uint8_t> payload;
	};
	std::vector<Stage> stages;
	std::vector<std::pair<size_t, size_t>> whole_rows; // two-plane, pages read whole: positions[from, to)
	auto is_high_only = [&](uint32_t pos) { return std::binary_search(high_only.begin(), high_only.end(), pos); };
	uint32_t pages = 0;
	for (size_t lo = 0, hi; lo < positions.size(); lo = hi) {
		const uint32_t pg = positions[lo] / P;
		for (hi = lo + 1; hi < positions.size() && positions[hi] / P == pg;)
			hi++;
		const Page &p = pages_[layer][pg];
		if (p.k)
			continue;
		pages++;
		auto j = std::lower_bound(whole.begin(), whole.end(), pg);
		for (SlabKind kind : {SlabKind::K, SlabKind::V}) {
			const SlabId id{pool_->pool_id(), layer, pg, kind};
			const uint64_t off = (uint64_t)(kind == SlabKind::K ? p.k_off : p.v_off);
			if (j != whole.end() && *j == pg) { // comes back to memory: the whole slab, copied as it is verified
				Page &in = whole_pages[j - whole.begin()];
				auto &buf = kind == SlabKind::K ? in.k : in.v;
				buf = SlabBuffer(slab_bytes_, kind == SlabKind::K ? geo_.k_payload(P) : P * row);
				reads.push_back({id, off, nullptr, 0, 0, buf.get()});
				const bool planar = planes && kind == SlabKind::V;
				uses.push_back({kind, lo, hi, planar ? -2 : -1});
				if (planar)
					whole_rows.emplace_back(lo, hi);
				continue;
			}
			// Only the blocks holding the rows, adjacent blocks coalesced into one read.
			const uint32_t *crcs = (kind == SlabKind::K ? p.kb : p.vb).data();
			if (planes && kind == SlabKind::V) {
				// Each row's high-plane bytes, and its low-plane bytes unless it is high-only.
				std::vector<uint8_t> need(slab_bytes_ / SLAB_ALIGN);
				auto mark = [&](uint64_t a) {
					for (uint64_t b = a / SLAB_ALIGN; b <= (a + half - 1) / SLAB_ALIGN; b++)
						need[b] = 1;
				};
				for (size_t i = lo; i < hi; i++) {
					const uint64_t t = positions[i] % P;
					mark(t * half);
					if (is_high_only(positions[i]))
						stats_.plane_high_rows++;
					else
						mark(plane + t * half), stats_.plane_full_rows++;
				}
				const int64_t st = (int64_t)stages.size();
				stages.push_back({lo, hi, std::vector<uint8_t>(P * row)});
				for (uint32_t b = 0; b < need.size();) {
					if (!need[b]) {
						b++;
						continue;
					}
					uint32_t e = b;
					while (e < need.size() && need[e])
						e++;
					reads.push_back({id, off, crcs, b, e - b, nullptr});
					uses.push_back({kind, lo, hi, st});
					b = e;
				}
				continue;
			}
			for (size_t i = lo; i < hi; i++) {
				const uint64_t a = row_at(kind, positions[i]);
				const uint32_t b0 = (uint32_t)(a / SLAB_ALIGN), b1 = (uint32_t)((a + row - 1) / SLAB_ALIGN);
				SlabRead *last = i > lo ? &reads.back() : nullptr;
				if (last && b0 <= last->first + last->count) {
					last->count = std::max(last->count, b1 + 1 - last->first);
					uses.back().to = i + 1;
				} else {
					reads.push_back({id, off, crcs, b0, b1 + 1 - b0, nullptr});
					uses.push_back({kind, i, i + 1});
				}
			}
		}
	}
	std::string err;
	int r = pool_->read(reads, [&](size_t ri, const uint8_t *data) {
		const SlabRead &rd = reads[ri];
		const Use &u = uses[ri];
		if (u.stage == -2) // a two-plane V slab read whole: merged below
			return 0;
		if (u.stage >= 0) {
			std::vector<uint8_t> &pl = stages[u.stage].payload;
			const uint64_t at = (uint64_t)rd.first * SLAB_ALIGN;
			std::memcpy(pl.data() + at, data, std::min<uint64_t>((uint64_t)rd.count * SLAB_ALIGN, pl.size() - at));
			return 0;
		}
		uint8_t *dst = u.kind == SlabKind::K ? k : v;
		for (size_t i = u.from; i < u.to; i++)
			std::memcpy(dst + i * row, data + row_at(u.kind, positions[i]) - (uint64_t)rd.first * SLAB_ALIGN, row);
		return 0;
	}, err);
	stats_.fetched_pages += pages;
	if (r < 0)
		return set_error(r, err);
	for (const Stage &st : stages)
		for (size_t i = st.from; i < st.to; i++) {
			const uint64_t t = positions[i] % P;
			const uint8_t *pl = st.payload.data();
			planes_merge(pl + t * half, is_high_only(positions[i]) ? nullptr : pl + plane + t * half, geo_.dims(), elem,
				     v + i * row);
		}
	// Pages coming back to memory hold their V rows as planes: back to rows, every row full.
	for (const auto &[lo, hi] : whole_rows) {
		const uint32_t pg = positions[lo] / P;
		uint8_t *pv = whole_pages[std::lower_bound(whole.begin(), whole.end(), pg) - whole.begin()].v.get();
		const std::vector<uint8_t> pl(pv, pv + P * row);
		planes_merge(pl.data(), pl.data() + plane, (size_t)P * geo_.dims(), elem, pv);
		for (size_t i = lo; i < hi; i++)
			std::memcpy(v + i * row, pv + (positions[i] % P) * row, row);
		stats_.plane_full_rows += hi - lo;
	}
	return 0;
}

int KvStore::read(uint32_t layer, uint32_t pos, void *k, void *v)
{
	if (layer >= shape_.layers || pos >= tokens_[layer])
		return set_error(-EINVAL, "no token " + std::to_string(pos) + " in layer " + std::to_string(layer));
	if (!aerp_.empty()) {
		const auto &ps = aerp_[layer].pos;
		const auto it = std::lower_bound(ps.begin(), ps.end(), pos);
		if (it == ps.end() || *it != pos)
			return set_error(-ENOENT, "token " + std::to_string(pos) + " of layer " + std::to_string(layer) +
							  " was evicted by every head (AERP)");
		aerp_rows(layer, it - ps.begin(), static_cast<uint8_t *>(k), static_cast<uint8_t *>(v));
		return 0;
	}
	const uint32_t pg = pos / opt_.page_tokens, t = pos % opt_.page_tokens;
	const uint64_t row = geo_.row_bytes(), keys_at = 8ull * geo_.dims();
	const Page &p = pages_[layer][pg];
	if (p.k) {
		std::memcpy(k, p.k.get() + keys_at + t * row, row);
		std::memcpy(v, p.v.get() + t * row, row);
		return 0;
	}
	std::vector<Page> none;
	return fetch(layer, std::span(&pos, 1), static_cast<uint8_t *>(k), static_cast<uint8_t *>(v), {}, none);
}

int KvStore::select(uint32_t layer, const float *q, uint32_t budget, KvSelection &out)
{
	const int r = select_begin(layer, q, budget);
	return r < 0 ? (out = {}, r) : select_end(out);
}

int KvStore::select_begin(uint32_t layer, const float *q, uint32_t budget)
{
	if (pending_.active)
		return set_error(-EBUSY, "a select is already pending: finish it with select_end first");
	if (layer >= shape_.layers)
		return set_error(-EINVAL, "layer " + std::to_string(layer) + " out of range");
	Pending &pd = pending_;
	pd = {};
	pd.layer = layer;
	pd.budget = budget;
	pd.plan = policy::plan_select(tokens_[layer], opt_.sink_tokens, opt_.recent_tokens, budget);
	pd.q.assign(q, q + (size_t)shape_.q_heads * shape_.head_dim);
	if (pd.plan.k > 0 && aerp_.empty()) {
		csd::ScoreJob job;
		job.q = pd.q.data();
		job.layer = layer;
		job.block_tokens = opt_.score_block;
		job.estimator = opt_.estimator;
		job.device_select = opt_.device_select;
		job.top_k = pd.plan.k;
		job.margin = opt_.device_margin;
		const uint32_t P = opt_.page_tokens;
		for (uint32_t pg = 0; pg < pages_[layer].size(); pg++) {
			const Page &p = pages_[layer][pg];
			if (!p.k && pd.plan.scored(pg, P))
				job.pages.push_back({pg, pg * P, p.n_tokens, (uint64_t)p.k_off, p.kb.data()});
		}
		pd.submitted = std::chrono::steady_clock::now();
		if (!job.pages.empty() && backend_->submit(job) < 0)
			return set_error(-EIO, std::string("cannot start the ") + backend_->name() + " backend");
		stats_.storage_runs += !job.pages.empty();
		pd.storage_pages = job.pages.size();
		for (const auto &pr : job.pages)
			stats_.scored_storage += pr.n_tokens;
	}
	pd.active = true;
	stats_.selects++;
	return 0;
}

int KvStore::select_end(KvSelection &out)
{
	out = {};
	if (!pending_.active)
		return set_error(-EINVAL, "no select pending: call select_begin first");
	Pending &pd = pending_;
	pd.active = false;
	if (!aerp_.empty())
		return aerp_select(out);
	const uint32_t layer = pd.layer, P = opt_.page_tokens;
	const policy::SelectPlan &plan = pd.plan;
	// policy::select_tokens() as the Score Blocks arrive: the same ScoreMerge, fed incrementally.
	ScoreMerge merge(plan.k, plan.sink, plan.recent_from);
	std::vector<csd_score> traced; // with a trace: every score, which the replay selects from
	auto add = [&](const csd_score *s, size_t cnt) {
		merge.add(s, cnt);
		if (trace_)
			traced.insert(traced.end(), s, s + cnt);
	};
	if (plan.k > 0) {
		using Clock = std::chrono::steady_clock;
		auto ns = [](Clock::time_point a, Clock::time_point b) {
			return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
		};
		// The CPU pool is scored here, while the backend scores the spilled pages.
		const auto t0 = Clock::now();
		stats_.cpu_runs++;
		for (uint32_t pg = 0; pg < pages_[layer].size() && pg * P < plan.n; pg++) {
			const Page &p = pages_[layer][pg];
			if (p.k && plan.scored(pg, P)) {
				csd::score_page(geo_, opt_.estimator, pd.q.data(), p.k.get(), pg * P, std::min(p.n_tokens, plan.n - pg * P),
						opt_.score_block, add);
				stats_.scored_cpu += p.n_tokens;
			}
		}
		stats_.cpu_score_ns += ns(t0, Clock::now());
		if (pd.storage_pages) {
			std::string err;
			if (int r = backend_->wait(add, err))
				return set_error(r, err);
			stats_.storage_score_ns += ns(pd.submitted, Clock::now());
		}
	}
	out.positions = merge.select(plan.n);
	if (trace_) {
		trace_->select(layer, pd.budget, plan.n, std::move(traced));
		trace_->selected(layer, out.positions);
	}
	for (uint32_t pg : policy::pages_hit(plan, out.positions, P))
		pages_[layer][pg].hits++;
	const uint64_t row = geo_.row_bytes(), keys_at = 8ull * geo_.dims();
	out.k.resize(out.positions.size() * row);
	out.v.resize(out.positions.size() * row);
	std::vector<uint32_t> need; // spilled pages holding selected tokens
	for (size_t i = 0; i < out.positions.size(); i++) {
		const uint32_t pos = out.positions[i], pg = pos / P, t = pos % P;
		const Page &p = pages_[layer][pg];
		if (p.k) {
			std::memcpy(&out.k[i * row], p.k.get() + keys_at + t * row, row);
			std::memcpy(&out.v[i * row], p.v.get() + t * row, row);
		} else if (need.empty() || need.back() != pg) {
			need.push_back(pg);
		}
	}
	if (need.empty())
		return 0;
	// Pool update (policy_pool_update.hpp): which fetched pages come back to memory.
	std::vector<policy::PageInfo> snap;
	snap.reserve(pages_[layer].size());
	for (const Page &p : pages_[layer])
		snap.push_back(page_info(p));
	const std::vector<uint32_t> promoted =
		policy::choose_promotions(snap, need, params(), plan.recent_from, stats_.cpu_bytes, budget());
	std::vector<Page> incoming(promoted.size());
	const std::vector<uint32_t> high_only =
		opt_.planes.on ? policy::high_plane_only(merge.top(), opt_.planes.full) : std::vector<uint32_t>();
	if (int r = fetch(layer, out.positions, out.k.data(), out.v.data(), promoted, incoming, high_only); r < 0) {
		out = {};
		return r;
	}
	if (trace_)
		trace_->promoted(layer, promoted);
	for (size_t i = 0; i < promoted.size(); i++) { // each keeps its device copy: its next spill is clean
		Page &p = pages_[layer][promoted[i]];
		p.k = std::move(incoming[i].k);
		p.v = std::move(incoming[i].v);
		stats_.cpu_bytes += page_bytes();
		stats_.cpu_pages++;
		stats_.spilled_pages--;
		stats_.promoted_pages++;
	}
	if (stats_.cpu_bytes > budget())
		spill_and_note(); // a failure keeps the pages in memory; it is counted and the next append reports it
	return 0;
}

KvStats KvStore::stats() const
{
	KvStats s = stats_;
	if (pool_) {
		s.storage = pool_->stats();
		s.storage_slots_used = pool_->slots() - pool_->slots_free();
	}
	if (backend_)
		s.device = backend_->counters();
	for (const auto &layer : pages_)
		for (const Page &p : layer) {
			(p.k ? s.cpu_tokens : s.storage_tokens) += p.n_tokens;
			s.resident_copies += p.k && p.k_off >= 0;
		}
	s.storage_bytes = (s.spilled_pages + s.resident_copies) * 2 * slab_bytes_;
	for (const AerpLayer &l : aerp_) {
		s.aerp_tokens += l.tok.size();
		for (const AerpToken &t : l.tok) {
			s.aerp_x_tokens += t.form == Form::X;
			s.aerp_bytes += t.bytes();
		}
	}
	for (const policy::CompressedMemory &m : memory_)
		if (!m.empty())
			s.memory_bytes += m.kv_heads * policy::CompressedMemory::bytes_per_head(m.head_dim);
	s.cpu_tokens += s.aerp_tokens;
	s.cpu_bytes += s.aerp_bytes + s.memory_bytes;
	return s;
}

} // namespace llmcache::kv
