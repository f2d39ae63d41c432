// SPDX-License-Identifier: MIT
// Belady's MIN (Belady, "A study of replacement algorithms for a virtual-storage computer", IBM Systems
// Journal 1966): the offline optimum. prepare() sees the whole request stream and computes, in one
// backward pass, the index of each request's next use. On a miss with a full cache the cached block
// used furthest in the future (never again first) is evicted.
// Bypass (default on): when the missing block's own next use is later than every cached block's, it is
// not admitted. That is the optimum for a cache allowed to bypass (the llm policy does, for scans), so it
// is the right upper bound to compare against; without bypass this is classic MIN, which must admit.
// The cached blocks sit in a max-heap of next-use indices with lazy invalidation (an entry is current if
// its block is cached with that next use), rebuilt from the cache when stale entries outnumber it.
// Next-use indices are unique, so one u64 identifies both the block and its entry. O(log C) per access.
// access() must replay prepare()'s stream in order; anything else throws std::logic_error.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>
#include <stdexcept>

namespace llmcache::sim {

namespace {

class Belady final : public Policy {
public:
	Belady(uint64_t capacity, bool bypass)
		: Policy(checked_capacity(capacity, "belady")), bypass_(bypass), map_(initial_slots(capacity))
	{
	}

	void prepare(std::span<const Request> all) override
	{
		n_ = all.size();
		keys_.resize(n_);
		next_.resize(n_);
		util::FlatMap<uint64_t> last(1024);
		for (uint64_t i = n_; i-- > 0;) {
			keys_[i] = all[i].key;
			uint64_t *seen = last.find(keys_[i]);
			next_[i] = seen ? *seen : n_ + i; // never again: unique values beyond every real index
			if (seen)
				*seen = i;
			else
				last.put(keys_[i], i);
		}
		pos_ = 0;
		prepared_ = true;
		map_.clear();
		heap_.clear();
		node_next_.clear();
	}

	bool access(const Request &r) override
	{
		if (!prepared_)
			throw std::logic_error("belady: access() before prepare(); give the whole request stream first");
		if (pos_ >= n_ || keys_[pos_] != r.key)
			throw std::logic_error("belady: request " + std::to_string(pos_) +
					       (pos_ >= n_ ? " is beyond the prepared stream of " + std::to_string(n_)
							   : " does not match the prepared stream") +
					       "; replay exactly the requests given to prepare(), in order");
		uint64_t nu = next_[pos_++];
		if (uint32_t *n = map_.find(r.key)) {
			node_next_[*n] = nu;
			push(nu);
			return true;
		}
		if (node_next_.size() < capacity_) {
			map_.put(r.key, uint32_t(node_next_.size()));
			node_next_.push_back(nu);
			push(nu);
			return false;
		}
		uint64_t victim = furthest();
		if (bypass_ && nu > victim)
			return false;
		std::pop_heap(heap_.begin(), heap_.end());
		heap_.pop_back();
		uint32_t n = *map_.find(key_of(victim));
		map_.erase(key_of(victim));
		map_.put(r.key, n);
		node_next_[n] = nu;
		push(nu);
		return false;
	}

	std::string_view name() const override { return "belady"; }

private:
	uint64_t key_of(uint64_t nu) const { return keys_[nu < n_ ? nu : nu - n_]; }

	// Callers store nu in node_next_ first, so a rebuild already includes it.
	void push(uint64_t nu)
	{
		if (heap_.size() >= 2 * node_next_.size() + 64) {
			heap_.assign(node_next_.begin(), node_next_.end());
			std::make_heap(heap_.begin(), heap_.end());
			return;
		}
		heap_.push_back(nu);
		std::push_heap(heap_.begin(), heap_.end());
	}

	// The current largest next use in the cache, dropping stale heap entries on the way.
	uint64_t furthest()
	{
		for (;;) {
			uint64_t top = heap_.front();
			const uint32_t *n = map_.find(key_of(top));
			if (n && node_next_[*n] == top)
				return top;
			std::pop_heap(heap_.begin(), heap_.end());
			heap_.pop_back();
		}
	}

	bool bypass_;
	bool prepared_ = false;
	uint64_t n_ = 0, pos_ = 0;
	std::vector<uint64_t> keys_, next_;
	util::FlatMap<uint32_t> map_;
	std::vector<uint64_t> heap_;
	std::vector<uint64_t> node_next_; // per cache slot: the cached block's next use
};

} // namespace

std::unique_ptr<Policy> make_belady_policy(uint64_t capacity, const PolicyOptions &, bool bypass)
{
	return std::make_unique<Belady>(capacity, bypass);
}

} // namespace llmcache::sim
