// SPDX-License-Identifier: MIT
// llm: the llmcache policy core (libllmcache/core) driving a simulated cache, so that a replay measures
// exactly the classification the kernel module runs.
//
// The core classifies every block access and orders sequences; this file keeps which blocks are
// resident and evicts in Algorithm 1's order:
//   1. the oldest SEQ sequence's highest resident block (scans go first);
//   2. else, when HOT holds more than its reserve (PolicyOptions::hot_reserve of the cache), the least
//      recently used HOT block;
//   3. else the highest resident block of the longest-period LOOP.
// Blocks of one sequence are kept in the order they were admitted, which for sequential runs is block
// order, so "highest" is the last admitted (the paper's O(1) argument). Pinning is admission control:
// a missed block that would itself be the next victim is not admitted (bypass), so a loop of N blocks in
// a cache of C < N keeps its lowest C blocks and hits C times per iteration, where LRU hits none.
// Resident blocks of a sequence the core has recycled become orphans, evicted before anything else.
// Every SEQ sequence that holds a block is in the age queue: one that lost all its blocks leaves it and
// joins it again, as the newest scan, when it gets a block back (a scan that was drained by a newer one
// and then ran on); otherwise its blocks could never be evicted and, once the queue is empty, every miss
// would be refused. A scan that admitted a block since the queue last passed over it goes to its back
// instead of giving one up, once per pass (a second chance, as CLOCK gives a referenced page): a start-up
// scan of an engine's code that a later fault run extends, or a scan still being read, is not the one to
// drop. The module and the daemon drop a file's scans only once they stopped growing (seq_drop_ns,
// --scan-idle); Documentation/design/policy-core.md, "Scans that grow".
// Probation: a refused block of a loop the core marks retouch (its accesses come back to blocks just
// behind the cursor: an mmap fault stream's fault-around, two threads on one matrix), or of a scan, is
// admitted anyway into a small FIFO of min(32 blocks, 1% of the cache), none under 16, because it may be
// accessed again within a few dozen accesses (a window faulted again, a header read twice); a hit moves
// it to its sequence. The kernel does the same without being asked: a page the module does not pin stays
// in the page cache until reclaim reaches it. A loop that never re-touches (a clean sweep, every
// synthetic workload) gets no probation, and its refused block takes the probation's oldest, so that it
// keeps its pins whole (Documentation/design/policy-core.md, "Retouching loops").
// Fault-around windows: a SEQ sequence no longer than the mmap fault that reads it (one fault-around
// window of an engine's code) is not a scan here: its blocks join the HOT LRU list, as the module counts
// no SEQ block it sees through a fault and leaves such pages to the kernel's LRU (kmod/seq.c). And a scan
// that has no older scan to evict, rather than refuse its own block, takes the HOT list's least recently
// used block beyond the reserve if that block was last accessed before the scan began, as reclaim would
// (Documentation/corpus.md, "Fault-around windows are not scans"), or else the highest block of the
// least recently accessed loop that has been idle since before the scan began and longer than its period.
// Written blocks: a SEQ block that a write brought in is no scan to drop first either, and joins the HOT
// LRU list as a window's does. The module does not see writes (it hooks reads and faults), and a page
// just written is dirty: the module's invalidation skips it and the daemon's POSIX_FADV_DONTNEED only
// starts its writeback, so both leave it to the kernel's LRU (Documentation/design/policy-core.md,
// "Written blocks"). The core classifies a write as a read: the next pass of a write loop makes it a
// LOOP, and its blocks in the HOT list move to it.
// Reuse distance against idleness: a missed block of a loop displaces the oldest scan's highest block
// or the HOT list's least recently used one only if the loop's period is no longer than that block has
// been idle; otherwise it takes a longer-period loop's block or is refused, as LIRS refuses a block
// whose reuse distance exceeds the recency of its oldest protected block
// (Documentation/design/policy-core.md, "Reuse distance against idleness"). The HOT reserve is bounded
// by the same measure: a loop's block that would be refused takes the HOT list's least recently used
// block, even within the reserve, if that block has been idle for more than two periods of the biggest
// loop that runs (an engine's two tokens; a tokenizer page read at start-up and never again;
// policy-core.md, "The HOT reserve against a loop's period").
// Equal loops keep their pins: a loop that needs half the cache or more takes no blocks from a loop of
// the same period within an eighth, which the core's order puts after it by a hair: the pins would only
// move, and the pass in which they move is lost to both (two apps' model loops, one written and one
// read, both once an inference; policy-core.md, "Equal loops keep their pins").
// Cold chunks: at each iteration of a loop, its resident blocks in chunks the core calls cold (not
// reached in the two periods before the iteration, llc_block_cold()) become orphans, as the module's
// and the daemon's pin plans leave them out (Documentation/design/policy-core.md, "Cold chunks").
// When the working set fits: while the biggest loop accessed within the last cache size of accesses fits
// in the cache and fills half of it or more (an engine's weights, read every token), the oldest scan's
// next victim no longer goes first by its class. The HOT list's least recently used block beyond the
// reserve goes before it if that block was last accessed earlier, else the least recently accessed
// overdue loop's highest block if that loop has been idle since then; and a block that a loop must give
// comes first from the least recently accessed loop that stopped (the core keys it by its age), not the
// working set, before the longest-period one: what is not the working set is ordered by recency, as
// the kernel's LRU orders it for the module, which leaves mapped scans and, where the loops fit, every
// page to it (Documentation/design/policy-core.md, "When the working set fits").
// Reuse distance against the longest loop: a missed block that is not a loop's, outside the range of
// the longest-period loop holding blocks, and last accessed fewer than two of that loop's periods ago
// (the core's recent-access table, llc_reuse_within()) takes that loop's highest block before anything
// the order above would give: a page of the engine's code faulted again within a token is worth more
// than the last pin of a loop that comes back once in two tokens (Documentation/design/policy-core.md,
// "Reuse distance against the longest loop").
// The core is told each access's request length, the length of the trace record it came from, as the
// module and the daemon tell it theirs: a window faulted again is one access, not a loop (rule 3).
#include "policies.hpp"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <new>
#include <span>
#include <stdexcept>
#include <vector>

#include "util/flat_map.hpp"

extern "C" {
#include "core/core.h"
}

namespace llmcache::sim {
namespace {

constexpr uint32_t nil = ~uint32_t(0);
constexpr uint32_t orphan_seq = 0; // sequence id 0 is never used by the core: it holds orphans
constexpr uint32_t hot_list = 65536; // the HOT LRU list lives after the core's 65535 sequence ids
constexpr uint32_t probation_list = hot_list + 1; // refused blocks of retouching loops, FIFO
constexpr uint8_t probation_class = LLMCACHE_NR_CLASSES; // its own count in resident_
constexpr uint64_t probation_max_blocks = 32; // two 16-block fault-around windows
constexpr uint64_t probation_min_blocks = 16; // less than one window catches too little to pay for itself
constexpr uint64_t probation_share = 100;     // and at most 1% of the cache
constexpr unsigned idle_loop_walk = 4096;     // sequences a scan looks through for an overdue loop

class LlmPolicy final : public Policy {
public:
	LlmPolicy(uint64_t capacity, const PolicyOptions &opt)
		: Policy(capacity), index_(capacity), key_(capacity), seq_of_(capacity), prev_(capacity),
		  next_(capacity), touched_(capacity), lists_(probation_list + 1)
	{
		llc_config cfg;
		llc_config_default(&cfg);
		cfg.max_seqs = 65535;
		cfg.max_chunks = 1U << 18; // 16 Mi blocks (64 GiB) of remembered footprint
		uint64_t size = llc_core_size(&cfg);
		mem_ = std::aligned_alloc(8, (size + 7) & ~uint64_t(7));
		if (!mem_ || !(core_ = llc_core_init(mem_, size, &cfg)))
			throw std::bad_alloc();
		hot_reserve_ = uint64_t(opt.hot_reserve * double(capacity));
		probation_cap_ = std::min(probation_max_blocks, capacity / probation_share);
		if (probation_cap_ < probation_min_blocks)
			probation_cap_ = 0;
		for (uint32_t i = 0; i < capacity; i++)
			next_[i] = i + 1 < capacity ? i + 1 : nil;
		free_ = capacity ? 0 : nil;
		gen_.assign(hot_list, ~uint64_t(0));
		queued_.assign(hot_list, 0);
		lru_blocks_.assign(hot_list, 0);
		grew_.assign(hot_list, 0);
		cls_.assign(probation_list + 1, LLMCACHE_CLASS_SEQ);
		cls_[hot_list] = LLMCACHE_CLASS_HOT;
		cls_[probation_list] = probation_class;
	}
	~LlmPolicy() override { std::free(mem_); }

	std::string_view name() const override { return "llm"; }
	const ClassStats *class_stats() const override { return &stats_; }

	void prepare(std::span<const Request> all) override
	{
		stream_ = all;
		pos_ = run_end_ = 0;
	}

	bool access(const Request &r) override
	{
		const uint64_t req_blocks = request_blocks(r);
		llc_verdict v = llc_access_req(core_, key_file(r.key), key_block(r.key), req_blocks, r.time_ns);
		lru_block_ = v.cls == LLMCACHE_CLASS_SEQ && (r.write || (r.mmap_fault && seq_blocks(v.seq) <= req_blocks));
		sync_sequence(v);
		if (v.event == LLC_EV_ITERATION)
			release_cold(v.seq);
		stats_.accesses[v.cls]++;
		uint32_t *slot = index_.find(r.key);
		if (slot) {
			stats_.hits[v.cls]++;
			touched_[*slot] = llc_vtime(core_);
			refile(*slot, v);
			return true;
		}
		if (used_ == capacity_) {
			const uint32_t loop = reused_within_loop(v);
			if (loop != nil)
				evict(next_victim(loop));
			else if (!make_room(r.key, v))
				return probation(r.key, v); // the block would be the next victim: bypass, or probation
		}
		admit(r.key, v);
		return false;
	}

private:
	struct List {
		uint32_t head = nil, tail = nil;
		uint64_t count = 0;
	};

	// The length of the trace record r came from, for the core's re-read rule (llc_access_req()): the run of
	// requests of prepare()'s stream, from r on, with r's time and consecutive blocks of r's file (a
	// record's blocks share its time). 1 when access() is not replaying that stream.
	uint64_t request_blocks(const Request &r)
	{
		if (pos_ >= stream_.size() || stream_[pos_].key != r.key || stream_[pos_].time_ns != r.time_ns) {
			stream_ = {};
			return 1;
		}
		if (pos_ >= run_end_) {
			run_start_ = pos_;
			for (run_end_ = pos_ + 1; run_end_ < stream_.size() && stream_[run_end_].time_ns == r.time_ns &&
						  stream_[run_end_].key == stream_[run_end_ - 1].key + 1 &&
						  key_file(stream_[run_end_].key) == key_file(r.key);
			     run_end_++)
				;
		}
		pos_++;
		return run_end_ - run_start_;
	}

	uint64_t seq_blocks(uint32_t seq) const
	{
		const llc_seq *s = llc_seq_get(core_, seq);
		return s->end - s->start + 1;
	}

	// The list of the block accessed now: HOT blocks, fault-around windows and written SEQ blocks share
	// the HOT LRU list.
	uint32_t list_of(const llc_verdict &v) const
	{
		return v.cls == LLMCACHE_CLASS_HOT || lru_block_ ? hot_list : v.seq;
	}

	// Follow the core: a reused sequence id, a class change, a HOT run promoted to SEQ.
	void sync_sequence(const llc_verdict &v)
	{
		const llc_seq *s = llc_seq_get(core_, v.seq);
		if (gen_[v.seq] != s->created_vt) {
			orphan_all(v.seq);
			gen_[v.seq] = s->created_vt;
			lru_blocks_[v.seq] = 0;
			grew_[v.seq] = 0;
			cls_[v.seq] = v.cls;
			if (v.cls == LLMCACHE_CLASS_SEQ)
				queue_scan(v.seq);
			return;
		}
		if (cls_[v.seq] == v.cls)
			return;
		uint8_t was = cls_[v.seq];
		cls_[v.seq] = v.cls;
		if (was == LLMCACHE_CLASS_HOT) {
			// Its earlier blocks sit in the HOT list, where a window's stay: a promoted run is short.
			if (!lru_block_)
				take_from_hot_list(v.seq, false);
		} else {
			resident_[was] -= lists_[v.seq].count;
			resident_[v.cls] += lists_[v.seq].count;
			if (lru_blocks_[v.seq] && list_of(v) == v.seq) {
				// A window or a write that runs on as a loop: its blocks in the HOT list, the ones the
				// sequence still holds, move to it.
				lru_blocks_[v.seq] = 0;
				take_from_hot_list(v.seq, true);
			}
		}
		if (v.cls == LLMCACHE_CLASS_SEQ)
			queue_scan(v.seq);
	}

	// Move the blocks of seq's range that sit in the HOT list to seq's own list; with only_own, only
	// those the core still counts as seq's.
	void take_from_hot_list(uint32_t seq, bool only_own)
	{
		const llc_seq *s = llc_seq_get(core_, seq);
		for (uint64_t b = s->start; b <= s->end; b++)
			if (uint32_t *slot = index_.find(request_key(uint32_t(s->file), b)))
				if (seq_of_[*slot] == hot_list && (!only_own || llc_lookup(core_, s->file, b) == seq))
					move(*slot, seq);
	}

	// Put a SEQ sequence at the end of the age queue unless it is in it already (then it keeps its
	// place, as a recycled or reclassified id always did).
	void queue_scan(uint32_t seq)
	{
		if (queued_[seq])
			return;
		queued_[seq] = 1;
		seq_age_.push_back(seq);
	}

	// A new iteration of loop seq: its resident blocks in cold chunks, which the core's pin plan leaves
	// out, are no longer pins: they become orphans, the first to go.
	void release_cold(uint32_t seq)
	{
		uint64_t chunk = ~uint64_t(0);
		bool cold = false;
		for (uint32_t slot = lists_[seq].head, next; slot != nil; slot = next) {
			next = next_[slot];
			const uint64_t block = key_block(key_[slot]);
			if (block / LLC_CHUNK_BLOCKS != chunk) {
				chunk = block / LLC_CHUNK_BLOCKS;
				cold = llc_block_cold(core_, uint16_t(seq), block);
			}
			if (cold)
				move(slot, orphan_seq);
		}
	}

	void orphan_all(uint32_t seq)
	{
		while (lists_[seq].head != nil)
			move(lists_[seq].head, orphan_seq);
	}

	void refile(uint32_t slot, const llc_verdict &v)
	{
		uint32_t want = list_of(v);
		if (seq_of_[slot] != want)
			move(slot, want);
		else if (want == hot_list)
			move(slot, hot_list); // LRU touch
	}

	void link(uint32_t slot, uint32_t list)
	{
		List &l = lists_[list];
		if (list == orphan_seq && l.count == 0)
			seq_age_.push_front(orphan_seq); // orphans are the oldest scan of all
		else if (l.count == 0 && list < hot_list && cls_[list] == LLMCACHE_CLASS_SEQ)
			queue_scan(list); // a scan that was drained gets a block again
		seq_of_[slot] = list;
		prev_[slot] = l.tail;
		next_[slot] = nil;
		(l.tail != nil ? next_[l.tail] : l.head) = slot;
		l.tail = slot;
		l.count++;
		resident_[cls_[list]]++;
	}

	void unlink(uint32_t slot)
	{
		List &l = lists_[seq_of_[slot]];
		(prev_[slot] != nil ? next_[prev_[slot]] : l.head) = next_[slot];
		(next_[slot] != nil ? prev_[next_[slot]] : l.tail) = prev_[slot];
		l.count--;
		resident_[cls_[seq_of_[slot]]]--;
	}

	void move(uint32_t slot, uint32_t list)
	{
		unlink(slot);
		link(slot, list);
	}

	void admit(uint64_t key, const llc_verdict &v)
	{
		if (lru_block_)
			lru_blocks_[v.seq] = 1;
		else if (cls_[v.seq] == LLMCACHE_CLASS_SEQ && lists_[v.seq].count)
			grew_[v.seq] = 1;
		admit_to(key, list_of(v));
	}

	void admit_to(uint64_t key, uint32_t list)
	{
		uint32_t slot = free_;
		free_ = next_[slot];
		key_[slot] = key;
		touched_[slot] = llc_vtime(core_);
		index_.put(key, slot);
		link(slot, list);
		used_++;
	}

	// A refused block of a retouching loop or of a scan goes into the probation FIFO; a clean loop's
	// takes the FIFO's oldest block's place (the file's header comment). Always a miss: returns false.
	bool probation(uint64_t key, const llc_verdict &v)
	{
		List &p = lists_[probation_list];
		const bool retouch = llc_seq_get(core_, v.seq)->retouch;
		if (v.cls == LLMCACHE_CLASS_LOOP && !retouch) {
			if (p.count) {
				evict(p.head);
				admit(key, v);
			}
			return false;
		}
		if (!probation_cap_ || v.cls == LLMCACHE_CLASS_HOT)
			return false;
		if (p.count >= probation_cap_) {
			evict(p.head);
		} else {
			// Room from the usual order, as for a HOT block: a scan, HOT over its reserve, or the
			// highest block of the longest-period loop (a pin less, while the probation fills).
			llc_verdict h = v;
			h.cls = LLMCACHE_CLASS_HOT;
			if (!make_room(key, h)) {
				if (!p.count)
					return false;
				evict(p.head);
			}
		}
		admit_to(key, probation_list);
		return false;
	}

	void evict(uint32_t slot)
	{
		unlink(slot);
		index_.erase(key_[slot]);
		next_[slot] = free_;
		free_ = slot;
		used_--;
	}

	// The oldest sequence still holding SEQ-class blocks (orphans count as the oldest) that admitted no
	// block since the queue last passed over it; one that did goes to the back.
	uint32_t oldest_scan()
	{
		while (!seq_age_.empty()) {
			uint32_t s = seq_age_.front();
			if (lists_[s].count && cls_[s] == LLMCACHE_CLASS_SEQ) {
				if (!grew_[s]) // never set for orphans: the core gives out no sequence id 0
					return s;
				grew_[s] = 0;
				seq_age_.pop_front();
				seq_age_.push_back(s);
				continue;
			}
			seq_age_.pop_front();
			if (s != orphan_seq)
				queued_[s] = 0;
		}
		return nil;
	}

	// Whether loop `taker`, which needs half the cache or more, would only move the pins of `holder`, a
	// loop of the same period within an eighth (the core's hysteresis): both hit once a period, so the
	// pins gain nothing where they go, and the pass in which they move is lost to both
	// (Documentation/design/policy-core.md, "Equal loops keep their pins").
	bool only_moves_pins(uint32_t taker, uint32_t holder) const
	{
		const llc_seq *t = llc_seq_get(core_, uint16_t(taker)), *h = llc_seq_get(core_, uint16_t(holder));
		const uint64_t diff = t->order_vt > h->order_vt ? t->order_vt - h->order_vt : h->order_vt - t->order_vt;
		return t->order_vt && h->order_vt && diff <= h->order_vt / 8 && 2 * (t->end - t->start + 1) >= capacity_;
	}

	// The longest-period loop holding blocks, or nil. With stop_at, nil also when stop_at comes first
	// in the period order (a loop never takes blocks from a loop of shorter or equal period) or when it
	// would only move that loop's pins to stop_at.
	uint32_t longest_loop(uint32_t stop_at = nil) const
	{
		for (uint16_t id = llc_first(core_, LLMCACHE_CLASS_LOOP); id; id = llc_next(core_, id)) {
			if (lists_[id].count && cls_[id] == LLMCACHE_CLASS_LOOP)
				return stop_at != nil && id != stop_at && only_moves_pins(stop_at, id) ? nil : id;
			if (id == stop_at)
				return nil;
		}
		return nil;
	}

	// The longest-period loop holding blocks, when missed block v is not a loop's, lies outside that
	// loop's range (a piece of the loop the core took for HOT or SEQ is the loop's own) and was last
	// accessed within LLC_REUSE_PERIODS of its periods (llc_reuse_within()): v takes its highest
	// block, before any scan's or HOT block; else nil.
	uint32_t reused_within_loop(const llc_verdict &v) const
	{
		if (v.cls == LLMCACHE_CLASS_LOOP || !v.reuse_vt)
			return nil;
		const uint32_t loop = longest_loop();
		if (loop == nil)
			return nil;
		const llc_seq *l = llc_seq_get(core_, uint16_t(loop)), *s = llc_seq_get(core_, v.seq);
		if (s->file == l->file && s->start <= l->end && s->end >= l->start)
			return nil;
		return llc_reuse_within(v.reuse_vt, l->period_vt) ? loop : nil;
	}

	// Whether the HOT list holds more than its reserve and its least recently used block was last
	// accessed before virtual time vt: what a scan that began at vt, with no older scan to evict, takes.
	bool hot_idle_since(uint64_t vt) const
	{
		const List &h = lists_[hot_list];
		return h.count > hot_reserve_ && touched_[h.head] < vt;
	}

	// Whether the HOT list's least recently used block, within the reserve or not, has been idle for longer
	// than the core's limit (llc_hot_idle_limit(): unused for two iterations of the biggest loop), so
	// the reserve gives it up to a loop's block that would otherwise be refused.
	bool hot_past_idle_limit() const
	{
		const List &h = lists_[hot_list];
		const uint64_t limit = llc_hot_idle_limit(core_);
		return h.count && limit && llc_vtime(core_) - touched_[h.head] > limit;
	}

	// The least recently accessed loop holding blocks that has been idle longer than its period (it
	// missed an iteration) and since before virtual time vt: what a scan that began at vt takes when it
	// has no older scan to evict and the HOT list gives nothing. The walk, in the core's order of last
	// access, stops at the first sequence accessed since vt, or after idle_loop_walk sequences.
	uint32_t overdue_loop_idle_since(uint64_t vt) const
	{
		const uint64_t now = llc_vtime(core_);
		return least_recent_loop(vt, [now](uint16_t, const llc_seq *l) { return now - l->last_vt > l->period_vt; });
	}

	// The least recently accessed loop holding blocks that `wanted(id, seq)` accepts, walking the core's
	// order of last access up to idle_loop_walk sequences and stopping at the first one accessed at or
	// after virtual time `until`; else nil.
	template <typename Wanted> uint32_t least_recent_loop(uint64_t until, Wanted wanted) const
	{
		unsigned walk = idle_loop_walk;
		for (uint16_t id = llc_lru_first(core_); id && walk--; id = llc_seq_get(core_, id)->lru_next) {
			const llc_seq *l = llc_seq_get(core_, id);
			if (l->last_vt >= until)
				return nil;
			if (lists_[id].count && cls_[id] == LLMCACHE_CLASS_LOOP && wanted(id, l))
				return id;
		}
		return nil;
	}

	// Whether the cache holds the engine's working set: the biggest loop accessed within the last
	// capacity accesses fits in it and fills half of it or more. The start-up's code loops fit as well,
	// but fill a small part of a cache that holds the weights, and the weights of a cache they do not fit.
	bool working_set_fits() const
	{
		const uint64_t now = llc_vtime(core_);
		const uint64_t loop = llc_biggest_loop_since(core_, now > capacity_ ? now - capacity_ : 0);
		return loop <= capacity_ && 2 * loop >= capacity_;
	}

	// Where a loop's block comes from first when the working set fits: the least recently accessed loop
	// holding blocks that stopped (the core keys it by its iteration's age, or its period is unknown) and
	// is not the working set (under half the cache), other than `except`.
	uint32_t least_recent_stopped_loop(uint32_t except) const
	{
		return least_recent_loop(~uint64_t(0), [this, except](uint16_t id, const llc_seq *l) {
			return id != except && (!l->period_vt || l->order_vt != l->period_vt) &&
			       2 * (l->end - l->start + 1) < capacity_;
		});
	}

	// What goes before the next victim of scan, when the working set fits: the HOT list's least recently
	// used block beyond the reserve or the least recently accessed overdue loop, if idle since before
	// that victim was accessed; else the scan.
	uint32_t idle_before(uint32_t scan) const
	{
		const uint64_t vt = touched_[next_victim(scan)];
		if (hot_idle_since(vt))
			return hot_list;
		const uint32_t loop = overdue_loop_idle_since(vt);
		return loop != nil ? loop : scan;
	}

	// Whether a missed block of loop seq may displace the next victim of class `from` (SEQ or HOT): only
	// if the loop's period is unknown or no longer than that block has been idle (LIRS keeps a block
	// whose recency is shorter than the newcomer's reuse distance; the kernel activates a refaulted page
	// only if its refault distance is under the active list's size). Orphans always go.
	bool displaces(uint32_t seq, enum llmcache_class from)
	{
		const uint64_t period = llc_seq_get(core_, seq)->period_vt;
		const uint32_t list = from == LLMCACHE_CLASS_HOT ? hot_list : oldest_scan();
		if (!period || list == nil || list == orphan_seq || !lists_[list].count)
			return true;
		return period <= llc_vtime(core_) - touched_[next_victim(list)];
	}

	// The block a list gives up first: the HOT list its least recently used, a sequence its highest.
	uint32_t next_victim(uint32_t list) const
	{
		return list == hot_list ? lists_[list].head : lists_[list].tail;
	}

	// Evict the next victim to admit `key`, or return false when `key` itself would be that victim.
	bool make_room(uint64_t key, const llc_verdict &v)
	{
		uint64_t with_new[LLMCACHE_NR_CLASSES] = {resident_[0], resident_[1], resident_[2]};
		with_new[v.cls]++;
		uint32_t victim_list = nil;
		enum llmcache_class from = llc_evict_class(with_new, hot_reserve_);
		if (v.cls == LLMCACHE_CLASS_LOOP && (from == LLMCACHE_CLASS_SEQ || from == LLMCACHE_CLASS_HOT) &&
		    !displaces(v.seq, from))
			from = LLMCACHE_CLASS_LOOP;
		switch (from) {
		case LLMCACHE_CLASS_SEQ:
			victim_list = oldest_scan();
			if (victim_list != nil && victim_list != orphan_seq && victim_list != v.seq && working_set_fits())
				victim_list = idle_before(victim_list);
			if (v.cls == LLMCACHE_CLASS_SEQ && (victim_list == nil || victim_list == v.seq)) {
				const uint64_t began = llc_seq_get(core_, v.seq)->created_vt;
				victim_list = hot_idle_since(began) ? hot_list : overdue_loop_idle_since(began);
				if (victim_list == nil)
					return false; // the newest scan's highest block is the one to drop
			}
			break;
		case LLMCACHE_CLASS_HOT:
			victim_list = lists_[hot_list].count ? hot_list : nil;
			break;
		case LLMCACHE_CLASS_LOOP:
			victim_list = working_set_fits() ? least_recent_stopped_loop(v.seq) : nil;
			if (victim_list == nil)
				victim_list = longest_loop(v.cls == LLMCACHE_CLASS_LOOP ? v.seq : nil);
			if (v.cls == LLMCACHE_CLASS_LOOP &&
			    (victim_list == nil ||
			     (victim_list == v.seq && key_block(key) > key_block(key_[lists_[victim_list].tail])))) {
				if (!hot_past_idle_limit())
					return false; // pin the loop's lowest blocks: this one is above them
				victim_list = hot_list;
			}
			break;
		default:
			break;
		}
		if (victim_list == nil)
			return false;
		evict(next_victim(victim_list));
		return true;
	}

	llc_core *core_ = nullptr;
	void *mem_ = nullptr;
	std::span<const Request> stream_; // prepare()'s, while access() replays it
	size_t pos_ = 0, run_start_ = 0, run_end_ = 0;
	util::FlatMap<uint32_t> index_; // key -> slot
	std::vector<uint64_t> key_;
	std::vector<uint32_t> seq_of_, prev_, next_; // per slot: its list and the links in it
	std::vector<uint64_t> touched_;              // per slot: the core's virtual time of its last access
	std::vector<List> lists_;                    // per sequence id, plus the HOT LRU list
	std::vector<uint64_t> gen_;                  // created_vt of the sequence each id last stood for
	std::vector<uint8_t> cls_;                   // class of each list
	std::deque<uint32_t> seq_age_;               // sequences in the order they became SEQ or went round
	std::vector<uint8_t> queued_;                // per sequence id: in seq_age_
	std::vector<uint8_t> lru_blocks_;            // per sequence id: has SEQ blocks in the HOT list
	std::vector<uint8_t> grew_;                  // per sequence id: a scan that admitted a block since the
						     // age queue last passed over it
	bool lru_block_ = false;                     // the block accessed now is a window's or a write's SEQ block
	uint64_t resident_[LLMCACHE_NR_CLASSES + 1] = {}; // per class, then the probation
	uint64_t hot_reserve_ = 0;
	uint64_t probation_cap_ = 0;
	uint64_t used_ = 0;
	uint32_t free_ = nil;
	ClassStats stats_;
};

} // namespace

std::unique_ptr<Policy> make_llm_policy(uint64_t capacity, const PolicyOptions &opt)
{
	if (!capacity)
		throw std::invalid_argument("llm: the cache capacity must be at least one block");
	return std::make_unique<LlmPolicy>(capacity, opt);
}

} // namespace llmcache::sim
