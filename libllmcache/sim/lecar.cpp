// SPDX-License-Identifier: MIT
// LeCaR (Vietri et al., "Driving Cache Replacement with ML-based LeCaR", HotStorage 2018): regret
// minimisation over two experts, LRU and LFU. Each eviction picks an expert at random by weight and
// evicts that expert's victim, recording it in the expert's history (a FIFO of N keys, N = cache size).
// A miss on a key in one expert's history means that expert evicted wrongly: the other expert's weight
// is multiplied by exp(learning_rate * reward), reward = discount^(accesses spent in the history), and
// the weights are normalised.
// Parameters (the paper's): weights 0.5/0.5, learning rate 0.45, discount 0.005^(1/N). Weights are
// floored at 1e-10 so a long one-sided run cannot zero one for good. LFU counts hits since insertion
// (a block re-entering from a history starts at 1 again) and breaks ties by recency, least recent first.
// Randomness: splitmix64 seeded with PolicyOptions::seed, so a run is reproducible.
// LFU is O(1): frequency buckets in increasing order, each an LRU list of its blocks.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llmcache::sim {

namespace {

class Lecar final : public Policy {
public:
	Lecar(uint64_t capacity, uint64_t seed)
		: Policy(checked_capacity(capacity, "lecar")), discount_(std::pow(0.005, 1.0 / double(capacity))),
		  rng_(seed), map_(initial_slots(3 * capacity))
	{
	}

	bool access(const Request &r) override
	{
		now_++;
		const uint32_t *np = map_.find(r.key);
		uint32_t n = np ? *np : nil;
		if (n != nil && where_[n] == Cache) {
			lru_.move_to_front(cache_, n);
			lfu_touch(n);
			return true;
		}
		if (n != nil) {
			double grow = std::exp(learning_rate * std::pow(discount_, double(now_ - evicted_at_[n])));
			(where_[n] == HistLru ? w_lfu_ : w_lru_) *= grow;
			double sum = w_lru_ + w_lfu_;
			w_lru_ = std::max(w_lru_ / sum, min_weight);
			w_lfu_ = std::max(w_lfu_ / sum, min_weight);
			lru_.remove(hist_[where_[n]], n); // before evicting, which may trim the histories
		}
		if (cache_.size == capacity_)
			evict();
		if (n == nil)
			n = alloc(r.key);
		where_[n] = Cache;
		lru_.push_front(cache_, n);
		lfu_insert(n);
		return false;
	}

	std::string_view name() const override { return "lecar"; }

	std::pair<double, double> weights() const { return {w_lru_, w_lfu_}; }
	int history_of(uint64_t key) const
	{
		const uint32_t *n = map_.find(key);
		return !n || where_[*n] == Cache ? 0 : where_[*n] == HistLru ? 1 : 2;
	}

private:
	enum : uint8_t { HistLru, HistLfu, Cache };
	static constexpr double learning_rate = 0.45;
	static constexpr double min_weight = 1e-10;

	struct Bucket {
		uint64_t freq;
		List items; // head = most recently accessed
	};

	void evict()
	{
		bool by_lru = uniform() < w_lru_;
		uint32_t v = by_lru ? cache_.tail : buckets_[bl_.head].items.tail;
		lru_.remove(cache_, v);
		lfu_remove(v);
		uint8_t h = by_lru ? HistLru : HistLfu;
		where_[v] = h;
		evicted_at_[v] = now_;
		lru_.push_front(hist_[h], v);
		if (hist_[h].size > capacity_)
			drop(lru_.pop_back(hist_[h]));
	}

	void lfu_insert(uint32_t n)
	{
		uint32_t b = bl_.head;
		if (b == nil || buckets_[b].freq != 1) {
			b = new_bucket(1);
			blinks_.push_front(bl_, b);
		}
		bucket_of_[n] = b;
		lfu_.push_front(buckets_[b].items, n);
	}

	void lfu_touch(uint32_t n)
	{
		uint32_t b = bucket_of_[n];
		uint64_t f = buckets_[b].freq + 1;
		uint32_t nb = blinks_.next(b);
		if (nb == nil || buckets_[nb].freq != f) {
			nb = new_bucket(f);
			blinks_.insert_after(bl_, b, nb);
		}
		lfu_remove(n);
		bucket_of_[n] = nb;
		lfu_.push_front(buckets_[nb].items, n);
	}

	void lfu_remove(uint32_t n)
	{
		uint32_t b = bucket_of_[n];
		lfu_.remove(buckets_[b].items, n);
		if (buckets_[b].items.empty()) {
			blinks_.remove(bl_, b);
			free_buckets_.push_back(b);
		}
	}

	uint32_t new_bucket(uint64_t freq)
	{
		uint32_t b;
		if (!free_buckets_.empty()) {
			b = free_buckets_.back();
			free_buckets_.pop_back();
		} else {
			b = blinks_.add();
			buckets_.emplace_back();
		}
		buckets_[b] = Bucket{freq, List{}};
		return b;
	}

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = lru_.acquire(key, fresh);
		if (fresh) {
			lfu_.add();
			where_.push_back(Cache);
			bucket_of_.push_back(nil);
			evicted_at_.push_back(0);
		}
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(lru_.key(n));
		lru_.release(n);
	}

	// splitmix64, then 53 bits into [0, 1).
	double uniform()
	{
		uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		z ^= z >> 31;
		return double(z >> 11) * 0x1.0p-53;
	}

	double discount_;
	double w_lru_ = 0.5, w_lfu_ = 0.5;
	uint64_t rng_;
	uint64_t now_ = 0;
	util::FlatMap<uint32_t> map_;
	Links lru_, lfu_, blinks_; // lru_ links the cache's LRU list and the two histories
	List cache_, hist_[2], bl_; // bl_: buckets by increasing frequency
	std::vector<Bucket> buckets_;
	std::vector<uint32_t> free_buckets_;
	std::vector<uint64_t> evicted_at_;
	std::vector<uint8_t> where_;
	std::vector<uint32_t> bucket_of_;
};

const Lecar &as_lecar(const Policy &p)
{
	const auto *l = dynamic_cast<const Lecar *>(&p);
	if (!l)
		throw std::invalid_argument("lecar test hook called on policy '" + std::string(p.name()) + "'");
	return *l;
}

} // namespace

std::unique_ptr<Policy> make_lecar_policy(uint64_t capacity, const PolicyOptions &opt)
{
	return std::make_unique<Lecar>(capacity, opt.seed);
}

std::pair<double, double> lecar_weights(const Policy &p) { return as_lecar(p).weights(); }
int lecar_history_of(const Policy &p, uint64_t key) { return as_lecar(p).history_of(key); }

} // namespace llmcache::sim
