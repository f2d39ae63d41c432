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
// would be refused.
// Probation: a refused block of a loop the core marks retouch (its accesses come back to blocks just
// behind the cursor: an mmap fault stream's fault-around, two threads on one matrix) is admitted anyway
// into a small FIFO of min(32 blocks, 1% of the cache), none under 16, evicted before everything else,
// because it will be accessed again within a few dozen accesses; a hit moves it to its sequence. The
// kernel does the same without being asked: a page the module does not pin stays in the page cache
// until reclaim reaches it. A loop that never re-touches (a clean sweep, every synthetic workload) gets
// no probation and keeps its pins whole (Documentation/design/policy-core.md, "Retouching loops").
// The core is told each access's request length, the length of the trace record it came from, as the
// module and the daemon tell it theirs: a window faulted again is one access, not a loop (rule 3).
//
// Two rules weigh blocks against the pins with per-block history the core does not keep (it keeps a few
// words per sequence; the kernel has it in the page cache's shadow entries and referenced bits):
// - Ghosts and an adaptive HOT target (ARC's p). The last capacity/2 blocks dropped from the unpinned
//   part (a scan's, HOT's, an orphan's or the probation's victim, or a SEQ/HOT miss refused) are
//   remembered with the time of their last access. A miss on such a block that comes back within half
//   the period of the loop holding the most pins (one slot for it then earns at least two of that
//   loop's hits) is admitted to the HOT LRU list, where it stays on hits, and raises the HOT target by
//   one block: one more unpinned slot would have hit. The target drops by one block when a pin at the
//   margin would have hit: a refused loop block at most capacity/2 blocks above its loop's highest
//   resident block, or a miss on one of the last capacity/4 pins released to make room for HOT. The
//   target replaces the fixed HOT reserve in the eviction order, between the reserve (its floor) and half
//   the cache. A trace whose dropped blocks do not come back soon (a read() engine) keeps the target
//   at the reserve and today's behaviour.
// - Stale pins. At each iteration start of a loop, its resident blocks not accessed during its last
//   three iterations become orphans (evicted first; a hit moves one back): the head of a weights loop
//   that an engine reads one row per token (the token embedding) is pinned by the plan, lowest blocks
//   first, but earns about one hit per token for a thousand blocks. Three, not one: a prompt pass walks
//   a matrix several times, each walk an iteration that leaves out blocks the next one reads.
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
constexpr uint64_t ghost_share = 2;           // ghosts of unpinned blocks: the last capacity/2 dropped
constexpr uint64_t released_share = 4;        // ghosts of pins released for HOT: the last capacity/4
constexpr uint64_t hot_target_max_share = 2;  // the HOT target stays under half the cache
constexpr uint64_t stale_iterations = 3;      // a pin untouched for this many iterations is released
constexpr uint64_t never = ~uint64_t(0);

class LlmPolicy final : public Policy {
public:
	LlmPolicy(uint64_t capacity, const PolicyOptions &opt)
		: Policy(capacity), index_(capacity), key_(capacity), seq_of_(capacity), prev_(capacity),
		  next_(capacity), lists_(probation_list + 1), last_vt_(capacity), kept_hot_(capacity),
		  ghosts_(capacity / ghost_share + capacity / released_share)
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
		cls_.assign(probation_list + 1, LLMCACHE_CLASS_SEQ);
		cls_[hot_list] = LLMCACHE_CLASS_HOT;
		cls_[probation_list] = probation_class;
		hot_target_ = hot_reserve_;
		hot_target_max_ = std::max(hot_reserve_, capacity / hot_target_max_share);
		dropped_.init(capacity / ghost_share);
		released_.init(capacity / released_share);
		iter_seen_.assign(size_t(hot_list) * (stale_iterations + 1), never);
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
		llc_verdict v = llc_access_req(core_, key_file(r.key), key_block(r.key), request_blocks(r), r.time_ns);
		uint64_t now = llc_vtime(core_);
		sync_sequence(v);
		if (v.cls == LLMCACHE_CLASS_LOOP)
			release_stale(v.seq);
		stats_.accesses[v.cls]++;
		uint32_t *slot = index_.find(r.key);
		if (slot) {
			stats_.hits[v.cls]++;
			last_vt_[*slot] = now;
			refile(*slot, v);
			return true;
		}
		if (ghost_hit(r.key, now))
			return keep_hot(r.key, v, now);
		if (used_ == capacity_ && !make_room(r.key, v, v.cls == LLMCACHE_CLASS_HOT)) {
			if (v.cls != LLMCACHE_CLASS_LOOP)
				dropped_.add(ghosts_, r.key, now, false);
			return probation(r.key, v); // the block would be the next victim: bypass, or probation
		}
		last_vt_[admit(r.key, v)] = now;
		return false;
	}

private:
	struct List {
		uint32_t head = nil, tail = nil;
		uint64_t count = 0;
	};

	// A block dropped from the cache: when, and the time of its last access.
	struct Ghost {
		uint64_t stamp = 0, last_vt = 0;
		bool released = false; // a pin released for HOT, else an unpinned block
	};

	// The last `cap` blocks dropped of one kind, oldest overwritten first; the blocks themselves are in
	// ghosts_, shared by both rings and keyed by block: an entry is live while its ring's slot names it.
	struct GhostRing {
		std::vector<std::pair<uint64_t, uint64_t>> slots; // key, stamp
		uint64_t stamp = 0;
		void init(uint64_t cap) { slots.assign(cap, {0, 0}); }
		void add(util::FlatMap<Ghost> &ghosts, uint64_t key, uint64_t last_vt, bool released)
		{
			if (slots.empty())
				return;
			auto &[old_key, old_stamp] = slots[stamp % slots.size()];
			if (stamp >= slots.size())
				if (const Ghost *g = ghosts.find(old_key); g && g->stamp == old_stamp && g->released == released)
					ghosts.erase(old_key);
			old_key = key;
			old_stamp = ++stamp;
			ghosts.put(key, Ghost{old_stamp, last_vt, released});
		}
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

	// A miss on a ghost: adjusts the HOT target, and says whether the block is to be kept in HOT.
	bool ghost_hit(uint64_t key, uint64_t now)
	{
		Ghost *p = ghosts_.find(key);
		if (!p)
			return false;
		Ghost g = *p;
		ghosts_.erase(key);
		if (g.released) {
			lower_hot_target(); // a released pin would have hit
			return false;
		}
		if (now - g.last_vt >= margin_period() / 2)
			return false; // no sooner than the margin loop's pins: it is worth no more than one
		if (hot_target_ < hot_target_max_)
			hot_target_++;
		return true;
	}

	void lower_hot_target()
	{
		if (hot_target_ > hot_reserve_)
			hot_target_--;
	}

	// The period of the loop holding the most resident blocks (the pins a larger HOT would take), or never.
	uint64_t margin_period() const
	{
		uint64_t most = 0, period = never;
		for (uint16_t id = llc_first(core_, LLMCACHE_CLASS_LOOP); id; id = llc_next(core_, id))
			if (cls_[id] == LLMCACHE_CLASS_LOOP && lists_[id].count > most) {
				most = lists_[id].count;
				uint64_t p = llc_seq_get(core_, id)->period_vt;
				period = p ? p : never;
			}
		return period;
	}

	// Admit a ghost that came back to the HOT LRU list, kept there on hits. Always a miss.
	bool keep_hot(uint64_t key, const llc_verdict &v, uint64_t now)
	{
		llc_verdict h = v;
		h.cls = LLMCACHE_CLASS_HOT;
		if (used_ == capacity_ && !make_room(key, h, true)) {
			dropped_.add(ghosts_, key, now, false);
			return false;
		}
		uint32_t slot = admit_to(key, hot_list);
		kept_hot_[slot] = 1;
		last_vt_[slot] = now;
		return false;
	}

	// At an iteration start of loop `seq`: its resident blocks not accessed during its last
	// stale_iterations iterations become orphans (the file's header comment, "Stale pins").
	void release_stale(uint32_t seq)
	{
		const llc_seq *s = llc_seq_get(core_, uint16_t(seq));
		uint64_t *seen = &iter_seen_[size_t(seq) * (stale_iterations + 1)]; // newest first
		if (seen[0] == s->iter_start_vt)
			return;
		for (uint64_t i = stale_iterations; i > 0; i--)
			seen[i] = seen[i - 1];
		seen[0] = s->iter_start_vt;
		uint64_t since = seen[stale_iterations];
		if (since == never || since < s->created_vt)
			return;
		for (uint32_t slot = lists_[seq].head; slot != nil;) {
			uint32_t next = next_[slot];
			if (last_vt_[slot] < since)
				move(slot, orphan_seq);
			slot = next;
		}
	}

	uint32_t list_of(const llc_verdict &v) const { return v.cls == LLMCACHE_CLASS_HOT ? hot_list : v.seq; }

	// Follow the core: a reused sequence id, a class change, a HOT run promoted to SEQ.
	void sync_sequence(const llc_verdict &v)
	{
		const llc_seq *s = llc_seq_get(core_, v.seq);
		if (gen_[v.seq] != s->created_vt) {
			orphan_all(v.seq);
			gen_[v.seq] = s->created_vt;
			std::fill_n(&iter_seen_[size_t(v.seq) * (stale_iterations + 1)], stale_iterations + 1, never);
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
			// Its earlier blocks sit in the HOT list: a promoted run is short, look them up.
			for (uint64_t b = s->start; b <= s->end; b++)
				if (uint32_t *slot = index_.find(request_key(uint32_t(s->file), b)))
					if (seq_of_[*slot] == hot_list && !kept_hot_[*slot])
						move(*slot, v.seq);
		} else {
			resident_[was] -= lists_[v.seq].count;
			resident_[v.cls] += lists_[v.seq].count;
		}
		if (v.cls == LLMCACHE_CLASS_SEQ)
			queue_scan(v.seq);
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

	void orphan_all(uint32_t seq)
	{
		while (lists_[seq].head != nil)
			move(lists_[seq].head, orphan_seq);
	}

	void refile(uint32_t slot, const llc_verdict &v)
	{
		uint32_t want = kept_hot_[slot] ? hot_list : list_of(v);
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

	uint32_t admit(uint64_t key, const llc_verdict &v) { return admit_to(key, list_of(v)); }

	uint32_t admit_to(uint64_t key, uint32_t list)
	{
		uint32_t slot = free_;
		free_ = next_[slot];
		key_[slot] = key;
		index_.put(key, slot);
		link(slot, list);
		used_++;
		return slot;
	}

	// A refused block of a retouching loop goes into the probation FIFO (the file's header comment).
	// Always a miss: returns false.
	bool probation(uint64_t key, const llc_verdict &v)
	{
		const llc_seq *s = llc_seq_get(core_, v.seq);
		if (v.cls != LLMCACHE_CLASS_LOOP || !s->retouch || !probation_cap_)
			return false;
		List &p = lists_[probation_list];
		if (p.count >= probation_cap_) {
			evict(p.head, false);
		} else {
			// Room from the usual order, as for a HOT block: a scan, HOT over its reserve, or the
			// highest block of the longest-period loop (a pin less, while the probation fills).
			llc_verdict h = v;
			h.cls = LLMCACHE_CLASS_HOT;
			if (!make_room(key, h)) {
				if (!p.count)
					return false;
				evict(p.head, false);
			}
		}
		last_vt_[admit_to(key, probation_list)] = llc_vtime(core_);
		return false;
	}

	// Evict a block; remember it as a ghost unless it is a loop's (the pin plan's business), or as a
	// released pin when it left a loop to make room for HOT. The probation's blocks are remembered.
	void evict(uint32_t slot, bool released)
	{
		if (released)
			released_.add(ghosts_, key_[slot], last_vt_[slot], true);
		else if (cls_[seq_of_[slot]] != LLMCACHE_CLASS_LOOP)
			dropped_.add(ghosts_, key_[slot], last_vt_[slot], false);
		kept_hot_[slot] = 0;
		unlink(slot);
		index_.erase(key_[slot]);
		next_[slot] = free_;
		free_ = slot;
		used_--;
	}

	// The oldest sequence still holding SEQ-class blocks (orphans count as the oldest).
	uint32_t oldest_scan()
	{
		while (!seq_age_.empty()) {
			uint32_t s = seq_age_.front();
			if (lists_[s].count && cls_[s] == LLMCACHE_CLASS_SEQ)
				return s;
			seq_age_.pop_front();
			if (s != orphan_seq)
				queued_[s] = 0;
		}
		return nil;
	}

	// The longest-period loop holding blocks, or nil. With stop_at, nil also when stop_at comes first
	// in the period order: a loop never takes blocks from a loop of shorter or equal period.
	uint32_t longest_loop(uint32_t stop_at = nil) const
	{
		for (uint16_t id = llc_first(core_, LLMCACHE_CLASS_LOOP); id; id = llc_next(core_, id)) {
			if (lists_[id].count && cls_[id] == LLMCACHE_CLASS_LOOP)
				return id;
			if (id == stop_at)
				return nil;
		}
		return nil;
	}

	// Evict the next victim to admit `key`, or return false when `key` itself would be that victim.
	// for_hot: the block is to go to the HOT list, so a loop block evicted for it is a released pin.
	bool make_room(uint64_t key, const llc_verdict &v, bool for_hot = false)
	{
		uint64_t with_new[LLMCACHE_NR_CLASSES] = {resident_[0], resident_[1], resident_[2]};
		with_new[v.cls]++;
		uint32_t victim_list = nil;
		bool released = false;
		switch (llc_evict_class(with_new, hot_target_)) {
		case LLMCACHE_CLASS_SEQ:
			victim_list = oldest_scan();
			if (v.cls == LLMCACHE_CLASS_SEQ && (victim_list == nil || victim_list == v.seq))
				return false; // the newest scan's highest block is the one to drop
			break;
		case LLMCACHE_CLASS_HOT:
			victim_list = lists_[hot_list].count ? hot_list : nil;
			break;
		case LLMCACHE_CLASS_LOOP:
			victim_list = longest_loop(v.cls == LLMCACHE_CLASS_LOOP ? v.seq : nil);
			if (v.cls == LLMCACHE_CLASS_LOOP && victim_list == nil)
				return false;
			if (v.cls == LLMCACHE_CLASS_LOOP && victim_list == v.seq) {
				uint64_t highest = key_block(key_[lists_[victim_list].tail]);
				if (key_block(key) > highest) {
					if (key_block(key) - highest <= capacity_ / ghost_share)
						lower_hot_target(); // one more pin at the margin would have hit
					return false; // pin the loop's lowest blocks: this one is above them
				}
			}
			released = for_hot;
			break;
		default:
			break;
		}
		if (victim_list == nil)
			return false;
		List &l = lists_[victim_list];
		evict(victim_list == hot_list ? l.head : l.tail, released);
		return true;
	}

	llc_core *core_ = nullptr;
	void *mem_ = nullptr;
	std::span<const Request> stream_; // prepare()'s, while access() replays it
	size_t pos_ = 0, run_start_ = 0, run_end_ = 0;
	util::FlatMap<uint32_t> index_; // key -> slot
	std::vector<uint64_t> key_;
	std::vector<uint32_t> seq_of_, prev_, next_; // per slot: its list and the links in it
	std::vector<List> lists_;                    // per sequence id, plus the HOT LRU list
	std::vector<uint64_t> gen_;                  // created_vt of the sequence each id last stood for
	std::vector<uint8_t> cls_;                   // class of each list
	std::deque<uint32_t> seq_age_;               // sequences in the order they became SEQ
	std::vector<uint8_t> queued_;                // per sequence id: in seq_age_
	uint64_t resident_[LLMCACHE_NR_CLASSES + 1] = {}; // per class, then the probation
	uint64_t hot_reserve_ = 0;
	uint64_t hot_target_ = 0, hot_target_max_ = 0; // HOT's share of the order: from the reserve up, by ghosts
	std::vector<uint64_t> last_vt_;                 // per slot: the core's vtime of its last access
	std::vector<uint8_t> kept_hot_;                 // per slot: a ghost that came back, kept in HOT on hits
	util::FlatMap<Ghost> ghosts_;
	GhostRing dropped_, released_;
	std::vector<uint64_t> iter_seen_; // per sequence id: its iteration start and the stale_iterations before
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
