// SPDX-License-Identifier: MIT
// W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", ACM
// Transactions on Storage 2017), with the parameters of its reference implementation, Caffeine. A new
// block enters a small LRU window; the window's victim then competes with the main cache's victim, and
// is admitted to the main cache only if a frequency sketch says it was accessed more often (TinyLFU's
// admission filter), so one-time blocks pass through the window without displacing reused ones. The main
// cache is a segmented LRU: a block enters its probation segment and moves to the protected segment on
// a hit there; the protected segment's least recently used block moves back to probation's head when
// the protected segment is over its share.
// The sketch: a count-min sketch of four rows of 4-bit counters (saturating at 15), each row four times
// the next power of two at or above the cache's capacity (Caffeine's count: sixteen counters a block;
// fewer for a trace with fewer requests than that);
// every access increments the block's counter in each row, its frequency is the least of the four, and
// after 10 x capacity increments every counter is halved (the paper's reset, which ages the counts).
// Parameters: window 1% of the cache (at least one block), protected 80% of the main cache. Left out of
// Caffeine: the doorkeeper (Caffeine has none either), the window's adaptive sizing (hill climbing, added
// after the paper) and the random admission of a frequent candidate (a defence against hash flooding).
// O(1) per access.
#include "sim/lru_list.hpp"
#include "sim/policies.hpp"
#include "util/flat_map.hpp"

#include <algorithm>
#include <array>

namespace llmcache::sim {

namespace {

// The frequency sketch: four rows of counters indexed by differently seeded hashes of the key. Sized
// for `blocks` distinct blocks: the cache's capacity, or fewer when the whole trace has fewer requests
// (a cache larger than the trace never fills, and its sketch never decides).
class FrequencySketch {
public:
	explicit FrequencySketch(uint64_t capacity) : reset_after_(10 * capacity) {}

	bool sized() const { return !counters_.empty(); }

	void size_for(uint64_t blocks)
	{
		uint64_t width = 64;
		while (width < 4 * blocks)
			width <<= 1;
		mask_ = width - 1;
		counters_.assign(rows * width, 0);
		increments_ = 0;
	}

	void increment(uint64_t key)
	{
		for (unsigned row = 0; row < rows; row++) {
			uint8_t &c = counters_[index(key, row)];
			if (c < max_count)
				c++;
		}
		if (++increments_ >= reset_after_)
			halve();
	}

	unsigned frequency(uint64_t key) const
	{
		unsigned f = max_count;
		for (unsigned row = 0; row < rows; row++)
			f = std::min<unsigned>(f, counters_[index(key, row)]);
		return f;
	}

private:
	static constexpr unsigned rows = 4;
	static constexpr uint8_t max_count = 15;
	static constexpr std::array<uint64_t, rows> seeds = {0x97cb3127c4f3a1a7ULL, 0xd6e8feb86659fd93ULL,
							      0xa0761d6478bd642fULL, 0xe7037ed1a0b428dbULL};

	// splitmix64's finaliser over the key and the row's seed.
	size_t index(uint64_t key, unsigned row) const
	{
		uint64_t h = key + seeds[row];
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
		h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
		h ^= h >> 31;
		return row * (mask_ + 1) + (h & mask_);
	}

	void halve()
	{
		for (uint8_t &c : counters_)
			c >>= 1;
		increments_ /= 2;
	}

	std::vector<uint8_t> counters_;
	uint64_t mask_ = 0;
	uint64_t increments_ = 0;
	uint64_t reset_after_;
};

class WTinyLfu final : public Policy {
public:
	explicit WTinyLfu(uint64_t capacity)
		: Policy(checked_capacity(capacity, "wtinylfu")), window_cap_(std::max<uint64_t>(1, capacity / 100)),
		  main_cap_(capacity - window_cap_), protected_cap_(main_cap_ * 8 / 10), sketch_(capacity),
		  map_(initial_slots(capacity))
	{
	}

	void prepare(std::span<const Request> all) override { sketch_.size_for(std::min<uint64_t>(capacity_, all.size())); }

	bool access(const Request &r) override
	{
		if (!sketch_.sized())
			sketch_.size_for(capacity_);
		sketch_.increment(r.key);
		if (const uint32_t *np = map_.find(r.key)) {
			hit(*np);
			return true;
		}
		uint32_t n = alloc(r.key);
		where_[n] = Window;
		links_.push_front(l_[Window], n);
		if (l_[Window].size > window_cap_)
			admit_or_drop(links_.pop_back(l_[Window]));
		return false;
	}

	std::string_view name() const override { return "wtinylfu"; }

private:
	enum : uint8_t { Window, Probation, Protected };

	void hit(uint32_t n)
	{
		if (where_[n] != Probation) {
			links_.move_to_front(l_[where_[n]], n);
			return;
		}
		links_.remove(l_[Probation], n);
		where_[n] = Protected;
		links_.push_front(l_[Protected], n);
		if (l_[Protected].size > protected_cap_) {
			uint32_t d = links_.pop_back(l_[Protected]);
			where_[d] = Probation;
			links_.push_front(l_[Probation], d);
		}
	}

	// The window's victim c enters the main cache if it has room, or if the sketch counts c as more
	// frequent than the main cache's victim (probation's least recently used block, else protected's),
	// which it then replaces; otherwise c leaves the cache.
	void admit_or_drop(uint32_t c)
	{
		if (!main_cap_) { // a cache of one block is all window
			drop(c);
			return;
		}
		if (l_[Probation].size + l_[Protected].size >= main_cap_) {
			List &from = l_[Probation].empty() ? l_[Protected] : l_[Probation];
			const uint32_t v = from.tail;
			if (sketch_.frequency(links_.key(c)) <= sketch_.frequency(links_.key(v))) {
				drop(c);
				return;
			}
			links_.remove(from, v);
			drop(v);
		}
		where_[c] = Probation;
		links_.push_front(l_[Probation], c);
	}

	uint32_t alloc(uint64_t key)
	{
		bool fresh;
		uint32_t n = links_.acquire(key, fresh);
		if (fresh)
			where_.push_back(Window);
		map_.put(key, n);
		return n;
	}

	void drop(uint32_t n)
	{
		map_.erase(links_.key(n));
		links_.release(n);
	}

	uint64_t window_cap_, main_cap_, protected_cap_;
	FrequencySketch sketch_;
	util::FlatMap<uint32_t> map_;
	Links links_;
	List l_[3];
	std::vector<uint8_t> where_;
};

} // namespace

std::unique_ptr<Policy> make_wtinylfu_policy(uint64_t capacity, const PolicyOptions &)
{
	return std::make_unique<WTinyLfu>(capacity);
}

} // namespace llmcache::sim
