// SPDX-License-Identifier: MIT
// MRU: evict the most recently used block. Wrong for most workloads but close to optimal on a single
// loop larger than the cache: it keeps the loop's first blocks and sacrifices the newest, so about
// C-1 of a C-block cache hit per iteration. It is the per-pattern policy that UBM applies to loops.
// One recency list (head = most recent) over node indices, a FlatMap from key to node; O(1) per access.
// Parameters: none.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

namespace llmcache::sim {

namespace {

class Mru final : public Policy {
public:
	explicit Mru(uint64_t capacity) : Policy(checked_capacity(capacity, "mru")), map_(initial_slots(capacity))
	{
		links_.reserve(initial_slots(capacity));
	}

	bool access(const Request &r) override
	{
		if (const uint32_t *n = map_.find(r.key)) {
			links_.move_to_front(list_, *n);
			return true;
		}
		uint32_t n;
		if (list_.size < capacity_) {
			n = links_.add(r.key);
		} else {
			n = links_.pop_front(list_);
			map_.erase(links_.key(n));
			links_.set_key(n, r.key);
		}
		map_.put(r.key, n);
		links_.push_front(list_, n);
		return false;
	}

	std::string_view name() const override { return "mru"; }

private:
	util::FlatMap<uint32_t> map_;
	Links links_;
	List list_;
};

} // namespace

std::unique_ptr<Policy> make_mru_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Mru>(capacity); }

} // namespace llmcache::sim
