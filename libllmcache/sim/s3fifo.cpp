// SPDX-License-Identifier: MIT
// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP 2023), as the paper's
// Algorithm 1 and the reference implementation of its time (libCacheSim's S3FIFO) run it. Three FIFOs: a
// small queue S that filters one-hit wonders, a main queue M, and a ghost queue G of keys evicted from S.
// A missed block enters M when its key is in G, else S.
// Each block counts its hits. An eviction takes from M when M holds more than its share or S is empty,
// else from S. Evicting from S moves the tail block to M (its count reset) if it was hit at least twice
// while in S, else drops it and puts its key in G; evicting from M reinserts the tail block at the head
// with its count capped at 3 and decremented while the count is non-zero (a 2-bit CLOCK).
// Parameters (the reference's defaults): S = 10% of the cache, M = 90% (real shares: M is over its share
// when it holds more than 0.9 x the cache), G = 90% of the cache in keys (at least 1), the move from S to
// M after 2 hits. O(1) amortised per access.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>

namespace llmcache::sim {

namespace {

class S3Fifo final : public Policy {
public:
	explicit S3Fifo(uint64_t capacity)
		: Policy(checked_capacity(capacity, "s3fifo")), ghost_(std::max<uint64_t>(1, capacity * 9 / 10)),
		  map_(initial_slots(capacity + ghost_))
	{
	}

	bool access(const Request &r) override
	{
		const uint32_t *np = map_.find(r.key);
		if (np && where_[*np] != G) {
			freq_[*np] = uint8_t(std::min(freq_[*np] + 1, 3));
			return true;
		}
		uint32_t n = np ? *np : nil;
		if (n != nil)
			links_.remove(l_[G], n); // before evicting, which may trim G
		while (l_[S].size + l_[M].size >= capacity_)
			10 * l_[M].size > 9 * capacity_ || l_[S].empty() ? evict_main() : evict_small(); // M over 90%
		if (n == nil)
			n = alloc(r.key);
		where_[n] = np ? M : S;
		freq_[n] = 0;
		links_.push_front(l_[where_[n]], n);
		return false;
	}

	std::string_view name() const override { return "s3fifo"; }

private:
	enum : uint8_t { S, M, G };
	static constexpr uint8_t MOVE_TO_MAIN = 2; // hits in S

	void evict_small()
	{
		while (!l_[S].empty()) {
			uint32_t t = links_.pop_back(l_[S]);
			if (freq_[t] >= MOVE_TO_MAIN) {
				freq_[t] = 0;
				where_[t] = M;
				links_.push_front(l_[M], t);
				continue;
			}
			where_[t] = G;
			links_.push_front(l_[G], t);
			if (l_[G].size > ghost_)
				drop(links_.pop_back(l_[G]));
			return;
		}
	}

	void evict_main()
	{
		while (!l_[M].empty()) {
			uint32_t t = links_.pop_back(l_[M]);
			if (freq_[t] == 0) {
				drop(t);
				return;
			}
			freq_[t]--;
			links_.push_front(l_[M], t);
		}
	}

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = links_.acquire(key, fresh);
		if (fresh) {
			where_.push_back(S);
			freq_.push_back(0);
		}
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(links_.key(n));
		links_.release(n);
	}

	uint64_t ghost_;
	util::FlatMap<uint32_t> map_;
	Links links_;
	List l_[3];
	std::vector<uint8_t> where_, freq_;
};

} // namespace

std::unique_ptr<Policy> make_s3fifo_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<S3Fifo>(capacity); }

} // namespace llmcache::sim
