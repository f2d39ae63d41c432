// SPDX-License-Identifier: MIT
// LRU: evict the least recently used block. The baseline every kernel page cache approximates, and the
// one a loop larger than the cache defeats completely (each block is evicted just before its reuse).
// One recency list (head = most recent) over node indices, a FlatMap from key to node; O(1) per access.
// Parameters: none.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

namespace llmcache::sim {

namespace {

class Lru final : public Policy {
public:
	explicit Lru(uint64_t capacity) : Policy(checked_capacity(capacity, "lru")), map_(initial_slots(capacity))
	{
		links_.reserve(initial_slots(capacity));
	}

	bool access(const Request &r) override
	{
		bool inserted;
		uint32_t &slot = map_.find_or_insert(r.key, inserted);
		if (!inserted) {
			links_.move_to_front(list_, slot);
			return true;
		}
		uint32_t n;
		if (list_.size < capacity_) {
			n = slot = links_.add(r.key);
		} else {
			n = slot = links_.pop_back(list_);
			uint64_t victim = links_.key(n);
			links_.set_key(n, r.key);
			map_.erase(victim); // last: erasing may move the new key's slot
		}
		links_.push_front(list_, n);
		return false;
	}

	std::string_view name() const override { return "lru"; }

private:
	util::FlatMap<uint32_t> map_;
	Links links_;
	List list_;
};

} // namespace

std::unique_ptr<Policy> make_lru_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Lru>(capacity); }

} // namespace llmcache::sim
