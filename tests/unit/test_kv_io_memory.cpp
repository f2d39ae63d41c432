// SPDX-License-Identifier: MIT
// I/O memory: slabs carved from huge-page regions are aligned, disjoint and keep what is written to
// them; freed slots are reused before a region is added; empty regions are unmapped but one per slab
// size; a SlabBuffer's tail is zero even in a reused slot.
#include "cmocka_cpp.hpp"

#include "kvio/io_memory.hpp"
#include "kvio/storage_pool.hpp"

#include <algorithm>
#include <cstring>

namespace io_memory = llmcache::kv::io_memory;
using llmcache::kv::SlabBuffer;

namespace {

constexpr uint64_t SLAB = 299008; // a page of 32 LLaMA-2-7B tokens' keys with its header
constexpr uint32_t SLOTS = 28;	  // per region: 28 slabs take 8372224 bytes of its 8 MiB

void fill(uint8_t *p, uint64_t bytes, unsigned tag)
{
	for (uint64_t i = 0; i < bytes; i += 512)
		p[i] = uint8_t(tag + i / 512);
}

bool intact(const uint8_t *p, uint64_t bytes, unsigned tag)
{
	for (uint64_t i = 0; i < bytes; i += 512)
		if (p[i] != uint8_t(tag + i / 512))
			return false;
	return true;
}

void io_memory__slabs__aligned_disjoint_and_intact(void **)
{
	const io_memory::Stats before = io_memory::stats();
	std::vector<uint8_t *> slabs;
	for (unsigned i = 0; i < 100; i++) {
		slabs.push_back(io_memory::slab_alloc(SLAB));
		assert_int_equal((uintptr_t)slabs.back() % 4096, 0);
		fill(slabs.back(), SLAB, i);
	}
	const io_memory::Stats full = io_memory::stats();
	assert_int_equal(full.slabs - before.slabs, 100);
	assert_int_equal(full.regions - before.regions, (100 + SLOTS - 1) / SLOTS);
	std::vector<uint8_t *> sorted = slabs;
	std::sort(sorted.begin(), sorted.end());
	for (size_t i = 1; i < sorted.size(); i++)
		assert_true(sorted[i] >= sorted[i - 1] + SLAB);
	for (unsigned i = 0; i < 100; i++)
		assert_true(intact(slabs[i], SLAB, i));
	for (uint8_t *p : slabs)
		io_memory::slab_free(p, SLAB);
	const io_memory::Stats after = io_memory::stats();
	assert_int_equal(after.slabs, before.slabs);
	assert_true(after.regions <= before.regions + 1); // one empty region kept for this size
}

void io_memory__freed_slot__reused_before_a_new_region(void **)
{
	std::vector<uint8_t *> slabs;
	for (unsigned i = 0; i < SLOTS; i++)
		slabs.push_back(io_memory::slab_alloc(SLAB));
	const io_memory::Stats full = io_memory::stats();
	uint8_t *middle = slabs[SLOTS / 2];
	io_memory::slab_free(middle, SLAB);
	slabs[SLOTS / 2] = io_memory::slab_alloc(SLAB);
	assert_ptr_equal(slabs[SLOTS / 2], middle);
	assert_int_equal(io_memory::stats().regions, full.regions);
	for (uint8_t *p : slabs)
		io_memory::slab_free(p, SLAB);
}

void io_memory__two_sizes__never_share_a_region(void **)
{
	constexpr uint64_t SMALL = 3 * 4096;
	const io_memory::Stats before = io_memory::stats();
	std::vector<uint8_t *> big, small;
	for (unsigned i = 0; i < 40; i++) {
		big.push_back(io_memory::slab_alloc(SLAB));
		fill(big.back(), SLAB, i);
		small.push_back(io_memory::slab_alloc(SMALL));
		fill(small.back(), SMALL, 100 + i);
	}
	for (uint8_t *p : small)
		io_memory::slab_free(p, SMALL);
	for (unsigned i = 0; i < 40; i++)
		assert_true(intact(big[i], SLAB, i));
	for (uint8_t *p : big)
		io_memory::slab_free(p, SLAB);
	const io_memory::Stats after = io_memory::stats();
	assert_int_equal(after.slabs, before.slabs);
	assert_true(after.regions <= before.regions + 2); // one empty region kept per size
}

void io_memory__large_slab__one_per_region_of_whole_huge_pages(void **)
{
	constexpr uint64_t LARGE = (9u << 20) + 4096;
	const io_memory::Stats before = io_memory::stats();
	uint8_t *a = io_memory::slab_alloc(LARGE), *b = io_memory::slab_alloc(LARGE);
	const io_memory::Stats two = io_memory::stats();
	assert_int_equal(two.regions - before.regions, 2);
	assert_int_equal(two.mapped_bytes - before.mapped_bytes, 2 * (10u << 20));
	fill(a, LARGE, 1);
	fill(b, LARGE, 2);
	assert_true(intact(a, LARGE, 1) && intact(b, LARGE, 2));
	io_memory::slab_free(a, LARGE);
	io_memory::slab_free(b, LARGE);
	assert_int_equal(io_memory::stats().regions - before.regions, 1);
}

void io_memory__map__huge_page_aligned_and_writable(void **)
{
	const size_t len = (5u << 20) + 1;
	uint8_t *p = io_memory::map(len, true);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % io_memory::HUGE_PAGE, 0);
	std::memset(p, 0x5a, 6u << 20); // rounded up to whole huge pages
	assert_int_equal(p[(6u << 20) - 1], 0x5a);
	io_memory::unmap(p, len);
}

void slab_buffer__reused_slot__tail_zeroed(void **)
{
	uint8_t *first;
	{
		SlabBuffer b(SLAB, 4096);
		first = b.get();
		std::memset(b.get(), 0xff, SLAB);
	}
	SlabBuffer again(SLAB, 4096);
	assert_ptr_equal(again.get(), first);
	assert_true(std::all_of(again.get() + 4096, again.get() + SLAB, [](uint8_t c) { return c == 0; }));
	SlabBuffer moved = std::move(again);
	assert_true(!again);
	assert_ptr_equal(moved.get(), first);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(io_memory__slabs__aligned_disjoint_and_intact),
		cmocka_unit_test(io_memory__freed_slot__reused_before_a_new_region),
		cmocka_unit_test(io_memory__two_sizes__never_share_a_region),
		cmocka_unit_test(io_memory__large_slab__one_per_region_of_whole_huge_pages),
		cmocka_unit_test(io_memory__map__huge_page_aligned_and_writable),
		cmocka_unit_test(slab_buffer__reused_slot__tail_zeroed),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
