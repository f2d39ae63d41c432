// SPDX-License-Identifier: MIT
// LIRS (Jiang & Zhang, "LIRS: An Efficient Low Inter-reference Recency Set Replacement Policy to Improve
// Buffer Cache Performance", SIGMETRICS 2002). Blocks with a low inter-reference recency (LIR) own most
// of the cache; the rest holds high-IRR (HIR) blocks, evicted first. Stack S orders blocks by recency and
// always ends (bottom) in a LIR block, pruned of HIR blocks below it; queue Q holds the resident HIR
// blocks in FIFO order. An HIR block referenced again while still in S has a smaller IRR than the bottom
// LIR block, so the two swap status. Non-resident HIR blocks stay in S as history.
// Parameters: HIR share 1% of the cache (at least 1 block), LIR the rest; the first LIR-share distinct
// blocks become LIR. Non-resident entries in S are bounded to 2x the cache: beyond that the one evicted
// longest ago leaves S (the paper leaves S unbounded). O(1) amortised per access.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>

namespace llmcache::sim {

namespace {

class Lirs final : public Policy {
public:
	explicit Lirs(uint64_t capacity)
		: Policy(checked_capacity(capacity, "lirs")), lir_cap_(capacity - std::max<uint64_t>(1, capacity / 100)),
		  nr_cap_(2 * capacity), map_(initial_slots(capacity))
	{
	}

	bool access(const Request &r) override
	{
		const uint32_t *np = map_.find(r.key);
		uint32_t n = np ? *np : nil;
		bool hit = n != nil && res_[n];
		if (hit && lir_[n]) {
			s_.move_to_front(S_, n);
		} else if (hit && in_s_[n]) {
			s_.move_to_front(S_, n);
			q_.remove(Q_, n);
			make_lir(n);
		} else if (hit) {
			push_s(n);
			q_.move_to_front(Q_, n);
		} else {
			if (n != nil)
				q_.remove(NR_, n); // before evicting, which may trim the non-resident entries
			if (lir_count_ + Q_.size == capacity_)
				evict();
			if (n != nil) {
				res_[n] = 1;
				s_.move_to_front(S_, n);
				make_lir(n);
			} else {
				n = alloc(r.key);
				push_s(n);
				if (lir_count_ < lir_cap_) {
					lir_[n] = 1;
					lir_count_++;
				} else {
					q_.push_front(Q_, n);
				}
			}
		}
		prune();
		return hit;
	}

	std::string_view name() const override { return "lirs"; }

private:
	void push_s(uint32_t n)
	{
		in_s_[n] = 1;
		s_.push_front(S_, n);
	}

	// n (on top of S, out of Q) becomes LIR; if that is one LIR block too many, S's bottom one becomes
	// resident HIR at the end of Q.
	void make_lir(uint32_t n)
	{
		lir_[n] = 1;
		if (++lir_count_ <= lir_cap_)
			return;
		uint32_t b = s_.pop_back(S_);
		in_s_[b] = 0;
		lir_[b] = 0;
		lir_count_--;
		q_.push_front(Q_, b);
	}

	// Keep a LIR block at the bottom of S: drop the HIR entries below the last one.
	void prune()
	{
		while (!S_.empty() && !lir_[S_.tail]) {
			uint32_t t = s_.pop_back(S_);
			in_s_[t] = 0;
			if (!res_[t]) {
				q_.remove(NR_, t);
				drop(t);
			}
		}
	}

	// Evict the resident HIR block at the front of Q; it stays in S as a non-resident entry if it is there.
	void evict()
	{
		uint32_t y = q_.pop_back(Q_);
		res_[y] = 0;
		if (!in_s_[y]) {
			drop(y);
			return;
		}
		q_.push_front(NR_, y);
		if (NR_.size > nr_cap_) {
			uint32_t z = q_.pop_back(NR_);
			s_.remove(S_, z);
			drop(z);
		}
	}

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = s_.acquire(key, fresh);
		if (fresh) {
			q_.add();
			lir_.push_back(0);
			res_.push_back(0);
			in_s_.push_back(0);
		}
		lir_[n] = 0;
		res_[n] = 1;
		in_s_[n] = 0;
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(s_.key(n));
		s_.release(n);
	}

	uint64_t lir_cap_, nr_cap_;
	uint64_t lir_count_ = 0;
	util::FlatMap<uint32_t> map_;
	Links s_, q_; // q_ links Q (resident HIR) and NR (non-resident entries in S, by eviction time)
	List S_, Q_, NR_;
	std::vector<uint8_t> lir_, res_, in_s_;
};

} // namespace

std::unique_ptr<Policy> make_lirs_policy(uint64_t capacity, const PolicyOptions &) { return std::make_unique<Lirs>(capacity); }

} // namespace llmcache::sim
