// SPDX-License-Identifier: MIT
// 2Q (Johnson & Shasha, "2Q: A Low Overhead High Performance Buffer Management Replacement Algorithm",
// VLDB 1994), the full version. A first reference enters A1in, a FIFO; a block evicted from A1in leaves
// its key in the ghost FIFO A1out; a miss found in A1out proves a reuse and enters Am, an LRU. Hits in
// A1in change nothing (correlated references), so one-time scans pass through A1in without touching Am.
// Parameters (the paper's recommendations): Kin = 25% of the cache (A1in is reclaimed from while larger),
// Kout = 50% of the cache (ghost keys), both at least 1. O(1) per access.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>

namespace llmcache::sim {

namespace {

class TwoQ final : public Policy {
public:
	explicit TwoQ(uint64_t capacity)
		: Policy(checked_capacity(capacity, "2q")), kin_(std::max<uint64_t>(1, capacity / 4)),
		  kout_(std::max<uint64_t>(1, capacity / 2)), map_(initial_slots(capacity + kout_))
	{
	}

	bool access(const Request &r) override
	{
		const uint32_t *np = map_.find(r.key);
		if (np && where_[*np] == Am) {
			links_.move_to_front(l_[Am], *np);
			return true;
		}
		if (np && where_[*np] == A1in)
			return true;
		uint32_t n;
		if (np) {
			n = *np;
			links_.remove(l_[A1out], n);
			reclaim();
			where_[n] = Am;
		} else {
			reclaim();
			n = alloc(r.key);
			where_[n] = A1in;
		}
		links_.push_front(l_[where_[n]], n);
		return false;
	}

	std::string_view name() const override { return "2q"; }

private:
	enum : uint8_t { A1in, A1out, Am };

	// Free one cache slot if the cache is full: from A1in (remembering the key) while it is over Kin.
	void reclaim()
	{
		if (l_[A1in].size + l_[Am].size < capacity_)
			return;
		if (l_[A1in].size > kin_ || l_[Am].empty()) {
			uint32_t y = links_.pop_back(l_[A1in]);
			where_[y] = A1out;
			links_.push_front(l_[A1out], y);
			if (l_[A1out].size > kout_)
				drop(links_.pop_back(l_[A1out]));
		} else {
			drop(links_.pop_back(l_[Am]));
		}
	}

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = links_.acquire(key, fresh);
		if (fresh) {
			where_.push_back(A1in);
		}
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(links_.key(n));
		links_.release(n);
	}

	uint64_t kin_, kout_;
	util::FlatMap<uint32_t> map_;
	Links links_;
	List l_[3];
	std::vector<uint8_t> where_;
};

} // namespace

std::unique_ptr<Policy> make_two_q_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<TwoQ>(capacity); }

} // namespace llmcache::sim
