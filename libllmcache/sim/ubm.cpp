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
// gains (expected hits per access per buffer): a looping block of period p yields 1/p, and the loop with
// the largest period is evicted first, most recently used block first (the MRU rule that is optimal
// within a loop). The "other" partition is LRU; its gain is estimated from a ghost list of the keys it
// evicted: ghost hits per access divided by the ghost's length. The paper fits a model to LRU stack hit
// counts instead; this simplification keeps the same decision rule (evict from the partition with the
// smaller marginal gain) with one counter. Ties evict "other".
// Parameters: sequential threshold 3 blocks; ghost list 10% of the cache (at least 1 key); ghost-hit
// rate smoothed per window of max(capacity, 256) accesses (new = (old + window rate) / 2).
// Cost: O(1) per access, plus O(log loops) when a loop's period changes or its resident set empties.
#include "sim/flat_map.hpp"
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"

#include <algorithm>
#include <set>

namespace llmcache::sim {

namespace {

class Ubm final : public Policy {
public:
	explicit Ubm(uint64_t capacity)
		: Policy(checked_capacity(capacity, "ubm")), ghost_cap_(std::max<uint64_t>(1, capacity / 10)),
		  window_(std::max<uint64_t>(capacity, 256)), map_(initial_slots(capacity + ghost_cap_))
	{
	}

	bool access(const Request &r) override
	{
		if (++now_ % window_ == 0) {
			rate_ = (rate_ + double(window_hits_) / double(window_)) / 2;
			window_hits_ = 0;
		}
		uint32_t f = file_index(key_file(r.key));
		uint8_t cls = detect(f, key_block(r.key));
		const uint32_t *np = map_.find(r.key);
		uint32_t n = np ? *np : nil;
		if (n != nil && where_[n] != Ghost) {
			unlink(n);
			link(n, cls, f);
			return true;
		}
		if (n != nil) {
			links_.remove(ghost_, n); // before evicting, which may trim the ghost list
			window_hits_++;
		}
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
		} else if (!loops_.empty() && (other_.empty() || rate_ * double(loops_.rbegin()->first) > double(ghost_cap_))) {
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

	uint32_t alloc(uint64_t key)
	{
		uint32_t n;
		if (!free_.empty()) {
			n = free_.back();
			free_.pop_back();
			links_.set_key(n, key);
		} else {
			n = links_.add(key);
			where_.push_back(Other);
			file_of_.push_back(0);
		}
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(links_.key(n));
		free_.push_back(n);
	}

	uint64_t ghost_cap_, window_;
	uint64_t now_ = 0, window_hits_ = 0, resident_ = 0;
	double rate_ = 0; // smoothed ghost hits per access
	FlatMap<uint32_t> map_, file_map_;
	std::vector<File> files_;
	std::set<std::pair<uint64_t, uint32_t>> loops_; // (period, file) of loops with resident blocks
	Links links_;
	List seq_, other_, ghost_;
	std::vector<uint8_t> where_;
	std::vector<uint32_t> file_of_, free_;
};

} // namespace

std::unique_ptr<Policy> make_ubm_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Ubm>(capacity); }

} // namespace llmcache::sim
