// SPDX-License-Identifier: MIT
// SIEVE (Zhang et al., "SIEVE is Simpler than LRU: an Efficient Turn-Key Eviction Algorithm for Web
// Caches", NSDI 2024). One FIFO queue, newest at the head, a visited bit per block and a hand. A hit only
// sets the block's bit. A miss in a full cache moves the hand from where it stopped (the tail at first,
// and after it passed the head) towards the head, clearing the bits it meets, and evicts the first block
// whose bit is clear; the hand stays at that block's newer neighbour. New blocks enter at the head with
// the bit clear. Unlike CLOCK, survivors are not moved: old blocks that keep being hit stay behind the
// hand, and new ones are sifted out quickly. As the reference implementation (libCacheSim's Sieve) runs
// it. Parameters: none. O(1) amortised per access.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

namespace llmcache::sim {

namespace {

class Sieve final : public Policy {
public:
	explicit Sieve(uint64_t capacity) : Policy(checked_capacity(capacity, "sieve")), map_(initial_slots(capacity))
	{
		links_.reserve(initial_slots(capacity));
	}

	bool access(const Request &r) override
	{
		if (const uint32_t *n = map_.find(r.key)) {
			visited_[*n] = 1;
			return true;
		}
		if (list_.size >= capacity_)
			evict();
		bool fresh;
		const uint32_t n = links_.acquire(r.key, fresh);
		if (fresh)
			visited_.push_back(0);
		visited_[n] = 0;
		map_.put(r.key, n);
		links_.push_front(list_, n);
		return false;
	}

	std::string_view name() const override { return "sieve"; }

private:
	void evict()
	{
		uint32_t t = hand_ != nil ? hand_ : list_.tail;
		while (visited_[t]) {
			visited_[t] = 0;
			t = links_.prev(t) != nil ? links_.prev(t) : list_.tail;
		}
		hand_ = links_.prev(t);
		links_.remove(list_, t);
		map_.erase(links_.key(t));
		links_.release(t);
	}

	util::FlatMap<uint32_t> map_;
	Links links_;
	List list_;
	std::vector<uint8_t> visited_;
	uint32_t hand_ = nil; // the next block to look at; nil: the tail
};

} // namespace

std::unique_ptr<Policy> make_sieve_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Sieve>(capacity); }

} // namespace llmcache::sim
