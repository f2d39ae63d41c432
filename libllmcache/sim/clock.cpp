// SPDX-License-Identifier: MIT
// CLOCK (second chance, Corbato 1968): an LRU approximation with one reference bit per block. Blocks sit
// in a circular array; a hit sets the block's bit; on a miss the hand sweeps, clearing set bits, and
// replaces the first block whose bit is clear. A block enters with its bit clear, so only blocks hit
// again since they were loaded get a second chance. O(1) amortised per access.
// Parameters: none.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

namespace llmcache::sim {

namespace {

class Clock final : public Policy {
public:
	explicit Clock(uint64_t capacity) : Policy(checked_capacity(capacity, "clock")), map_(initial_slots(capacity))
	{
		keys_.reserve(initial_slots(capacity));
		ref_.reserve(initial_slots(capacity));
	}

	bool access(const Request &r) override
	{
		if (const uint32_t *n = map_.find(r.key)) {
			ref_[*n] = 1;
			return true;
		}
		if (keys_.size() < capacity_) {
			map_.put(r.key, uint32_t(keys_.size()));
			keys_.push_back(r.key);
			ref_.push_back(0);
			return false;
		}
		while (ref_[hand_]) {
			ref_[hand_] = 0;
			advance();
		}
		map_.erase(keys_[hand_]);
		map_.put(r.key, hand_);
		keys_[hand_] = r.key;
		advance();
		return false;
	}

	std::string_view name() const override { return "clock"; }

private:
	void advance() { hand_ = hand_ + 1 == keys_.size() ? 0 : hand_ + 1; }

	util::FlatMap<uint32_t> map_;
	std::vector<uint64_t> keys_;
	std::vector<uint8_t> ref_;
	uint32_t hand_ = 0;
};

} // namespace

std::unique_ptr<Policy> make_clock_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Clock>(capacity); }

} // namespace llmcache::sim
