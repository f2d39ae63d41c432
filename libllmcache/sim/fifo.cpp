// SPDX-License-Identifier: MIT
// FIFO: evict the block that entered the cache first; hits do not change the order. The simplest
// policy, and like LRU it hits nothing on a loop larger than the cache.
// One insertion-order list over node indices, a FlatMap from key to node; O(1) per access.
// Parameters: none.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

namespace llmcache::sim {

namespace {

class Fifo final : public Policy {
public:
	explicit Fifo(uint64_t capacity) : Policy(checked_capacity(capacity, "fifo")), map_(initial_slots(capacity))
	{
		links_.reserve(initial_slots(capacity));
	}

	bool access(const Request &r) override
	{
		if (map_.find(r.key))
			return true;
		uint32_t n;
		if (list_.size < capacity_) {
			n = links_.add(r.key);
		} else {
			n = links_.pop_back(list_);
			map_.erase(links_.key(n));
			links_.set_key(n, r.key);
		}
		map_.put(r.key, n);
		links_.push_front(list_, n);
		return false;
	}

	std::string_view name() const override { return "fifo"; }

private:
	util::FlatMap<uint32_t> map_;
	Links links_;
	List list_;
};

} // namespace

std::unique_ptr<Policy> make_fifo_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Fifo>(capacity); }

} // namespace llmcache::sim
