// SPDX-License-Identifier: MIT
// UBM, Unified Buffer Management (Kim et al., "A Low-Overhead High-Performance Unified Buffer Management
// Scheme that Exploits Sequential and Looping References", OSDI 2000). The closest classic ancestor of
// the llm policy: it detects per-file reference patterns and manages each with the policy that fits it.
//
// Detection, per file: a run of consecutive blocks (b, b+1, ...) is "other" for its first two blocks and
// "sequential" from the third on. When a sequential or looping run is re-referenced from its first block,
// the file is "looping" and its period is the virtual time (accesses) since the run started. Any other
// jump starts a new "other" run. A block takes the class of the reference that touched it last.
//
// Replacement: sequential blocks go first, most recently used first (a scan is not reused; if it is the
// first pass of a loop, its start survives). Between looping and other blocks UBM compares marginal
// gains, the hits per access that one more buffer brings. A looping block of period p brings 1/p; the loop
// with the largest period gives up its most recently used block (the MRU rule that is optimal within a
// loop). The "other" partition is LRU, and the paper estimates its gain from LRU hit counts by stack
// position. This implementation estimates it from the partition's LRU block instead: that block is
// expected back after max(its last inter-reference gap, its age), so it brings 1/that; a block never
// reused has gain 0. Evicted "other" keys stay in a ghost list with their last access time, so a block
// re-read after eviction gets its gap. The partition whose marginal block brings less gives it up (ties
// evict "other"). A fixed order (loops always before others) was rejected: one-time "other" blocks would
// fill the cache for good.
// Parameters: sequential threshold 3 blocks; ghost list C/2 keys (at least 8).
// Cost: O(1) per access, plus O(log loops) when a loop's period changes or its resident set empties.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>
#include <set>

namespace llmcache::sim {

namespace {

class Ubm final : public Policy {
public:
	explicit Ubm(uint64_t capacity)
		: Policy(checked_capacity(capacity, "ubm")), ghost_cap_(std::max<uint64_t>(8, capacity / 2)),
		  map_(initial_slots(capacity + ghost_cap_))
	{
	}

	bool access(const Request &r) override
	{
		now_++;
		uint32_t f = file_index(key_file(r.key));
		uint8_t cls = detect(f, key_block(r.key));
		const uint32_t *np = map_.find(r.key);
		uint32_t n = np ? *np : nil;
		if (n != nil && where_[n] != Ghost) {
			unlink(n);
			link(n, cls, f);
			return true;
		}
		if (n != nil)
			links_.remove(ghost_, n); // before evicting, which may trim the ghost list
		if (resident_ == capacity_)
			evict();
		if (n == nil)
			n = alloc(r.key);
		link(n, cls, f);
		return false;
	}

	std::string_view name() const override { return "ubm"; }

private:
	enum : uint8_t { Seq, Loop, Other, Ghost };
	static constexpr uint32_t seq_threshold = 3;
	static constexpr uint64_t never = ~uint64_t(0);

	struct File {
		uint64_t start = 0, last = 0, start_time = 0;
		uint64_t period = 0; // of the last loop detected
		uint32_t run = 0;    // blocks in the current run, 0 = never seen
		uint8_t cls = Other;
		List loop;           // resident looping blocks, head = most recent
	};

	uint32_t file_index(uint32_t file)
	{
		if (const uint32_t *i = file_map_.find(file))
			return *i;
		files_.emplace_back();
		return file_map_.put(file, uint32_t(files_.size() - 1));
	}

	uint8_t detect(uint32_t fi, uint64_t b)
	{
		File &f = files_[fi];
		if (f.run != 0 && b == f.last)
			return f.cls;
		if (f.run != 0 && b == f.last + 1) {
			if (++f.run >= seq_threshold && f.cls == Other)
				f.cls = Seq;
			f.last = b;
			return f.cls;
		}
		if (f.run != 0 && b == f.start && f.cls != Other) {
			set_period(fi, now_ - f.start_time);
			f.cls = Loop;
		} else {
			f.cls = Other;
		}
		f.start = f.last = b;
		f.start_time = now_;
		f.run = 1;
		return f.cls;
	}

	void set_period(uint32_t fi, uint64_t period)
	{
		File &f = files_[fi];
		if (!f.loop.empty()) {
			loops_.erase({f.period, fi});
			loops_.insert({period, fi});
		}
		f.period = period;
	}

	void link(uint32_t n, uint8_t cls, uint32_t fi)
	{
		gap_[n] = last_[n] == never ? never : now_ - last_[n];
		last_[n] = now_;
		where_[n] = cls;
		file_of_[n] = fi;
		resident_++;
		if (cls == Loop && files_[fi].loop.empty())
			loops_.insert({files_[fi].period, fi});
		links_.push_front(list_of(n), n);
	}

	void unlink(uint32_t n)
	{
		List &l = list_of(n);
		links_.remove(l, n);
		resident_--;
		if (where_[n] == Loop && l.empty())
			loops_.erase({files_[file_of_[n]].period, file_of_[n]});
	}

	List &list_of(uint32_t n)
	{
		switch (where_[n]) {
		case Seq:
			return seq_;
		case Loop:
			return files_[file_of_[n]].loop;
		case Other:
			return other_;
		default:
			return ghost_;
		}
	}

	void evict()
	{
		uint32_t v;
		if (!seq_.empty()) {
			v = seq_.head;
		} else if (!loops_.empty() && (other_.empty() || expected_reuse(other_.tail) < loops_.rbegin()->first)) {
			v = files_[loops_.rbegin()->second].loop.head;
		} else {
			v = other_.tail;
			unlink(v);
			where_[v] = Ghost;
			links_.push_front(ghost_, v);
			if (ghost_.size > ghost_cap_)
				drop(links_.pop_back(ghost_));
			return;
		}
		unlink(v);
		drop(v);
	}

	// Accesses until the block is expected back: its last inter-reference gap, or its age if longer.
	uint64_t expected_reuse(uint32_t n) const { return std::max(gap_[n], now_ - last_[n]); }

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = links_.acquire(key, fresh);
		if (fresh) {
			where_.push_back(Other);
			file_of_.push_back(0);
			last_.push_back(never);
			gap_.push_back(never);
		}
		last_[n] = never;
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(links_.key(n));
		links_.release(n);
	}

	uint64_t ghost_cap_;
	uint64_t now_ = 0, resident_ = 0;
	util::FlatMap<uint32_t> map_, file_map_;
	std::vector<File> files_;
	std::set<std::pair<uint64_t, uint32_t>> loops_; // (period, file) of loops with resident blocks
	Links links_;
	List seq_, other_, ghost_;
	std::vector<uint8_t> where_;
	std::vector<uint32_t> file_of_;
	std::vector<uint64_t> last_, gap_; // last access time; gap between the last two accesses (never: none)
};

} // namespace

std::unique_ptr<Policy> make_ubm_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Ubm>(capacity); }

} // namespace llmcache::sim
