// SPDX-License-Identifier: MIT
#include "kvio/io_memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

namespace llmcache::kv::io_memory {

namespace {

constexpr size_t REGION_TARGET = 8u << 20;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Region {
	uint8_t *base;
	size_t bytes;
	uint32_t slots;
	std::vector<uint32_t> free_slots; // taken from the back: the lowest address first
};

struct SizeClass {
	uint64_t slab_bytes;
	std::vector<Region *> with_room; // allocation takes the last; the kept empty region goes first
	bool has_empty = false;
};

struct State {
	std::mutex lock;
	std::map<uintptr_t, std::unique_ptr<Region>> regions; // by base address
	std::vector<SizeClass> classes;			      // one per slab size: a few at most
	uint64_t slabs = 0;

	SizeClass &size_class(uint64_t slab_bytes)
	{
		for (SizeClass &c : classes)
			if (c.slab_bytes == slab_bytes)
				return c;
		return classes.emplace_back(SizeClass{slab_bytes, {}, false});
	}
};

// Never destroyed: slabs held in objects with static storage may be freed after main() returns.
State &state()
{
	static State *s = new State;
	return *s;
}

} // namespace

uint8_t *map(size_t len, bool populate)
{
	const size_t n = round_up(std::max<size_t>(len, 1), HUGE_PAGE);
	void *m = mmap(nullptr, n + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return nullptr;
	const uintptr_t start = (uintptr_t)m, aligned = round_up(start, HUGE_PAGE);
	if (aligned > start)
		munmap(m, aligned - start);
	if (const size_t tail = start + HUGE_PAGE - aligned)
		munmap(reinterpret_cast<void *>(aligned + n), tail);
	auto *p = reinterpret_cast<uint8_t *>(aligned);
	madvise(p, n, MADV_HUGEPAGE); // EINVAL where transparent huge pages are off: ordinary pages then
	if (populate && madvise(p, n, MADV_POPULATE_WRITE) != 0) // before 5.14: touch every page
		std::memset(p, 0, n);
	return p;
}

void unmap(uint8_t *p, size_t len)
{
	if (p)
		munmap(p, round_up(std::max<size_t>(len, 1), HUGE_PAGE));
}

uint8_t *slab_alloc(uint64_t slab_bytes)
{
	if (!slab_bytes)
		throw std::invalid_argument("io_memory: a slab of 0 bytes");
	State &s = state();
	std::lock_guard g(s.lock);
	SizeClass &c = s.size_class(slab_bytes);
	if (c.with_room.empty()) {
		const size_t bytes = round_up(std::max<uint64_t>(1, REGION_TARGET / slab_bytes) * slab_bytes, HUGE_PAGE);
		auto r = std::make_unique<Region>(Region{map(bytes, false), bytes, uint32_t(bytes / slab_bytes), {}});
		if (!r->base)
			throw std::bad_alloc();
		for (uint32_t i = r->slots; i-- > 0;)
			r->free_slots.push_back(i);
		c.with_room.push_back(r.get());
		c.has_empty = true;
		s.regions.emplace((uintptr_t)r->base, std::move(r));
	}
	Region *r = c.with_room.back();
	if (r->free_slots.size() == r->slots)
		c.has_empty = false;
	const uint32_t slot = r->free_slots.back();
	r->free_slots.pop_back();
	if (r->free_slots.empty())
		c.with_room.pop_back();
	s.slabs++;
	return r->base + (size_t)slot * slab_bytes;
}

void slab_free(uint8_t *p, uint64_t slab_bytes)
{
	if (!p)
		return;
	State &s = state();
	std::lock_guard g(s.lock);
	auto it = s.regions.upper_bound((uintptr_t)p);
	--it; // p came from slab_alloc: a region starts at or below it
	Region *r = it->second.get();
	SizeClass &c = s.size_class(slab_bytes);
	if (r->free_slots.empty())
		c.with_room.push_back(r);
	r->free_slots.push_back(uint32_t((size_t)(p - r->base) / slab_bytes));
	s.slabs--;
	if (r->free_slots.size() < r->slots)
		return;
	std::erase(c.with_room, r);
	if (c.has_empty) {
		unmap(r->base, r->bytes);
		s.regions.erase(it);
		return;
	}
	c.has_empty = true;
	c.with_room.insert(c.with_room.begin(), r); // partly used regions fill first
}

Stats stats()
{
	State &s = state();
	std::lock_guard g(s.lock);
	Stats out;
	out.regions = s.regions.size();
	for (const auto &[base, r] : s.regions)
		out.mapped_bytes += r->bytes;
	out.slabs = s.slabs;
	return out;
}

} // namespace llmcache::kv::io_memory
