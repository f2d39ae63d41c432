// SPDX-License-Identifier: MIT
// ARC, Adaptive Replacement Cache (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement
// Cache", FAST 2003). The cache is split between T1 (blocks seen once recently) and T2 (seen at least
// twice); the ghost lists B1 and B2 remember the keys recently evicted from each. A hit in B1 says T1
// was too small and raises the target p of T1; a hit in B2 lowers it. REPLACE evicts from T1 when it
// exceeds p, else from T2. Follows Fig. 4 of the paper, with p real-valued as there.
// Parameters: none (p starts at 0 and adapts in [0, c]). Tracks up to 2c keys; O(1) per access.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>

namespace llmcache::sim {

namespace {

class Arc final : public Policy {
public:
	explicit Arc(uint64_t capacity) : Policy(checked_capacity(capacity, "arc")), map_(initial_slots(2 * capacity)) {}

	bool access(const Request &r) override
	{
		const double c = double(capacity_);
		if (const uint32_t *np = map_.find(r.key)) {
			uint32_t n = *np;
			uint8_t w = where_[n];
			if (w == T1 || w == T2) {
				move(n, T2);
				return true;
			}
			if (w == B1)
				p_ = std::min(c, p_ + std::max(1.0, double(l_[B2].size) / l_[B1].size));
			else
				p_ = std::max(0.0, p_ - std::max(1.0, double(l_[B1].size) / l_[B2].size));
			replace(w == B2);
			move(n, T2);
			return false;
		}
		uint64_t l1 = l_[T1].size + l_[B1].size;
		uint64_t total = l1 + l_[T2].size + l_[B2].size;
		if (l1 == capacity_) {
			if (l_[T1].size < capacity_) {
				drop(links_.pop_back(l_[B1]));
				replace(false);
			} else {
				drop(links_.pop_back(l_[T1]));
			}
		} else if (total >= capacity_) {
			if (total == 2 * capacity_)
				drop(links_.pop_back(l_[B2]));
			replace(false);
		}
		uint32_t n = alloc(r.key);
		where_[n] = T1;
		links_.push_front(l_[T1], n);
		return false;
	}

	std::string_view name() const override { return "arc"; }

private:
	enum : uint8_t { T1, T2, B1, B2 };

	// Evict the LRU block of T1 or T2 into the MRU end of its ghost list.
	void replace(bool in_b2)
	{
		double t1 = l_[T1].size;
		bool from_t1 = t1 >= 1 && ((in_b2 && t1 == p_) || t1 > p_ || l_[T2].empty());
		uint32_t n = links_.pop_back(l_[from_t1 ? T1 : T2]);
		where_[n] = from_t1 ? B1 : B2;
		links_.push_front(l_[where_[n]], n);
	}

	void move(uint32_t n, uint8_t to)
	{
		links_.remove(l_[where_[n]], n);
		where_[n] = to;
		links_.push_front(l_[to], n);
	}

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = links_.acquire(key, fresh);
		if (fresh) {
			where_.push_back(T1);
		}
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(links_.key(n));
		links_.release(n);
	}

	util::FlatMap<uint32_t> map_;
	Links links_;
	List l_[4];
	std::vector<uint8_t> where_;
	double p_ = 0;
};

} // namespace

std::unique_ptr<Policy> make_arc_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Arc>(capacity); }

} // namespace llmcache::sim
