// SPDX-License-Identifier: MIT
// The enforced replay (enforce.hpp): the weights file's page cache in the engine's memory cgroup as
// per-block state over the file (absent, streamed, pinned) and one LRU list of the streamed blocks, in
// index-linked arrays: a 1 GiB file is 262,144 blocks. Every decision that llmcache makes comes from the
// planner (core/plan.h); this file only executes it, as the module and the daemon do.
#include "sim/enforce.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

extern "C" {
#include "core/plan.h"
}

namespace llmcache::sim {
namespace {

constexpr uint64_t block_size = 4096;
constexpr uint32_t none = ~uint32_t(0);
constexpr uint64_t folio_blocks = 512;               // the daemon drops passed blocks in PMD-size folios
constexpr uint64_t daemon_headroom = 16ull << 20;    // llmcached's --memcg-headroom default
constexpr uint32_t max_spans = 64;

class PageCache {
public:
	PageCache(uint64_t blocks, uint64_t head, uint64_t room)
		: state_(blocks, absent), prev_(blocks, none), next_(blocks, none), head_(head), room_(room)
	{
	}

	bool resident(uint64_t b) const { return state_[b] != absent; }

	// An access to a resident block: the LRU's touch.
	void touch(uint64_t b)
	{
		if (state_[b] == streamed) {
			unlink(uint32_t(b));
			push(uint32_t(b));
		}
	}

	// Reads b in; returns 1 when it was not resident. The head is pinned once read; the stream evicts
	// its least recently used block past its room.
	uint64_t read(uint64_t b)
	{
		if (state_[b] != absent)
			return 0;
		if (b < head_) {
			state_[b] = pinned;
			return 1;
		}
		if (!room_)
			return 1; // read, used and gone at once
		if (size_ == room_)
			drop(oldest_);
		state_[b] = streamed;
		push(uint32_t(b));
		return 1;
	}

	// Drops b from the stream; returns 1 when it was there.
	uint64_t drop(uint64_t b)
	{
		if (state_[b] != streamed)
			return 0;
		unlink(uint32_t(b));
		state_[b] = absent;
		return 1;
	}

private:
	enum : uint8_t { absent, streamed, pinned };

	void push(uint32_t b)
	{
		prev_[b] = none;
		next_[b] = newest_;
		(newest_ != none ? prev_[newest_] : oldest_) = b;
		newest_ = b;
		size_++;
	}

	void unlink(uint32_t b)
	{
		(prev_[b] != none ? next_[prev_[b]] : newest_) = next_[b];
		(next_[b] != none ? prev_[next_[b]] : oldest_) = prev_[b];
		size_--;
	}

	std::vector<uint8_t> state_;
	std::vector<uint32_t> prev_, next_;
	uint32_t newest_ = none, oldest_ = none;
	uint64_t size_ = 0, head_, room_;
};

} // namespace

std::string enforce_mode_name(EnforceMode m)
{
	return m == EnforceMode::stock ? "stock" : m == EnforceMode::module ? "module" : "daemon";
}

EnforceMode parse_enforce_mode(const std::string &name)
{
	for (EnforceMode m : {EnforceMode::stock, EnforceMode::module, EnforceMode::daemon})
		if (name == enforce_mode_name(m))
			return m;
	throw std::invalid_argument("unknown mode '" + name + "': stock, module or daemon");
}

EnforceLoop enforce_loop(const Trace &t)
{
	std::unordered_map<uint32_t, uint64_t> highest;
	for (const Request &r : t.requests) {
		uint64_t &h = highest[key_file(r.key)];
		h = std::max(h, key_block(r.key) + 1);
	}
	EnforceLoop loop;
	for (const auto &[file, blocks] : highest)
		if (blocks > loop.blocks || (blocks == loop.blocks && file < loop.file))
			loop.file = file, loop.blocks = blocks;
	if (loop.blocks < (1u << 20) / block_size)
		throw std::runtime_error("no file of the trace reaches 1 MiB: the enforced replay needs an engine's weights");
	if (loop.blocks > UINT32_MAX)
		throw std::runtime_error("the largest file of the trace has more than 2^32 blocks");
	// The passes: back by more than half the file after a quarter of it was read (its threads lag by a
	// few MiB at most; the header and the last tensor read at load time are no pass).
	std::vector<uint64_t> starts{t.requests.front().time_ns};
	uint64_t last = 0, since = 0;
	for (const Request &r : t.requests) {
		if (key_file(r.key) != loop.file || r.time_ns < starts.back())
			continue; // another file, or a record sent late (see below)
		const uint64_t b = key_block(r.key);
		if (b + loop.blocks / 2 < last && since >= loop.blocks / 4) {
			starts.push_back(r.time_ns);
			since = 0;
		}
		last = b;
		since++;
	}
	loop.passes = starts.size();
	// The order of a pass: that of the later pass that shows the most blocks (every pass reads them in the
	// same order, but shows only what faulted), the blocks it does not show each after the block below it.
	// A record's pass comes from its time: the recorder sends a thread's joined reads when the run ends.
	auto pass_of = [&](uint64_t time_ns) {
		const size_t p = size_t(std::upper_bound(starts.begin(), starts.end(), time_ns) - starts.begin());
		return p ? p - 1 : 0;
	};
	std::vector<uint64_t> shown(starts.size());
	std::vector<uint32_t> counted(loop.blocks, UINT32_MAX);
	for (const Request &r : t.requests)
		if (key_file(r.key) == loop.file) {
			const size_t p = pass_of(r.time_ns);
			if (counted[key_block(r.key)] != p)
				counted[key_block(r.key)] = uint32_t(p), shown[p]++;
		}
	const size_t ref = size_t(std::max_element(shown.begin() + (shown.size() > 1), shown.end()) - shown.begin());
	std::vector<uint64_t> at(loop.blocks, UINT64_MAX);
	std::vector<bool> touched(loop.blocks);
	for (const Request &r : t.requests)
		if (key_file(r.key) == loop.file) {
			const uint64_t b = key_block(r.key);
			touched[b] = true;
			if (pass_of(r.time_ns) == ref)
				at[b] = std::min(at[b], r.time_ns);
		}
	uint64_t below = 0;
	for (uint64_t b = 0; b < loop.blocks; b++) {
		if (at[b] != UINT64_MAX)
			below = at[b];
		else if (touched[b])
			at[b] = below;
		if (touched[b])
			loop.order.push_back(uint32_t(b));
	}
	std::stable_sort(loop.order.begin(), loop.order.end(), [&](uint32_t x, uint32_t y) { return at[x] < at[y]; });
	return loop;
}

EnforceResult replay_enforced(const EnforceLoop &loop, EnforceMode mode, const EnforceConfig &c)
{
	if (c.limit <= c.anon + c.code)
		throw std::invalid_argument("the memory limit leaves the engine's weights no page cache: it is at most the "
					    "engine's own memory (anonymous memory and code)");
	const uint64_t n = loop.blocks;
	const uint64_t cache = std::min(n, (c.limit - c.anon - c.code) / block_size);
	const uint64_t unit = std::max<uint64_t>(c.read_around, LLC_PLAN_STREAM_UNIT);
	EnforceResult res{mode};
	const uint64_t margin = std::max(daemon_headroom, 2 * c.read_around); // the daemon's
	uint64_t budget = 0;
	if (mode == EnforceMode::module) {
		// kmod/memcg.c: the code counted at LLC_PLAN_CODE_KEPT, a margin of two stream units.
		const llc_memcg_snapshot m{c.limit, c.anon, LLC_PLAN_CODE_KEPT, 0, 2 * unit};
		budget = llc_plan_mapped_budget(c.pin_budget, &m, LLC_PLAN_CODE_KEPT, unit, n * block_size);
	} else if (mode == EnforceMode::daemon) {
		// Manager::budget_blocks once the engine runs: its code as measured, the daemon's margin.
		const llc_memcg_snapshot m{c.limit, c.anon, c.code, 0, margin};
		budget = llc_plan_mapped_budget(c.pin_budget, &m, c.code, unit, n * block_size);
	}
	// The weights file's head (llc_plan_heads), when it does not fit: the budget is none when it does.
	const llc_pin_range file{1, 0, n, 0};
	llc_pin_range head_pins{};
	res.pinned = llc_plan_heads(&file, 1, budget / block_size, &head_pins, 1) ? std::min(cache, head_pins.count) : 0;
	res.room = cache - res.pinned;
	PageCache pc(n, res.pinned, res.room);

	// The room the stream is read ahead in, as each counts the engine's own: the module's
	// llc_memcg_stream_window (the code at LLC_PLAN_CODE_KEPT, two stream units), Manager::shared_room.
	const uint64_t own = mode == EnforceMode::module ? c.anon + LLC_PLAN_CODE_KEPT + 2 * unit : c.anon + c.code + margin;
	const uint64_t shared = c.limit > own ? c.limit - own : 0;
	const bool prefetch = mode != EnforceMode::stock && res.pinned && llc_plan_read_ahead(unit, shared);
	// The module follows the engine only where it reads ahead (kmod/stream.c); the daemon drops what
	// the engine passed in any case.
	const bool follows = mode == EnforceMode::daemon ? res.pinned > 0 : prefetch;
	const llc_span head{0, res.pinned};
	const uint64_t window = llc_plan_window(unit, c.limit) / block_size;
	uint64_t position = UINT64_MAX, asked_to = UINT64_MAX, dropped_to = UINT64_MAX;
	llc_span spans[max_spans];
	const uint64_t around = std::max<uint64_t>(c.read_around / block_size, 1);

	for (uint64_t pass = 0; pass < loop.passes; pass++) {
		uint64_t &read = pass ? res.read_later : res.read_first;
		for (uint32_t b : loop.order) {
			if (pc.resident(b)) {
				pc.touch(b);
			} else {
				// The fault's read-around: a window centred on it, the faulting block used last.
				const uint64_t lo = b > around / 2 ? b - around / 2 : 0;
				for (uint64_t w = lo; w < std::min(n, lo + around); w++)
					if (w != b)
						read += pc.read(w);
				read += pc.read(b);
			}
			if (!follows)
				continue;
			position = llc_plan_position(0, n, &head, 1, position, b, window);
			if (prefetch) {
				const uint32_t k = llc_plan_prefetch(0, n, &head, 1, position, window, &asked_to, spans, max_spans);
				for (uint32_t i = 0; i < k; i++)
					for (uint64_t w = spans[i].first; w < spans[i].first + spans[i].count; w++) {
						const uint64_t got = pc.read(w);
						read += got;
						res.read_ahead += got;
					}
			}
			const uint32_t k = llc_plan_passed(0, n, &head, 1, position, 2 * unit / block_size, folio_blocks,
							   &dropped_to, spans, max_spans);
			for (uint32_t i = 0; i < k; i++)
				for (uint64_t w = spans[i].first; w < spans[i].first + spans[i].count; w++)
					res.dropped += pc.drop(w);
		}
	}
	return res;
}

} // namespace llmcache::sim
