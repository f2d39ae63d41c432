// SPDX-License-Identifier: MIT
/*
 * Memory that O_DIRECT transfers read and write: the storage pool's registered I/O buffers and the
 * slabs the CPU pool keeps its pages in (Documentation/kv.md, "Pools"). It is mapped 2 MiB-aligned and
 * marked MADV_HUGEPAGE, so that where the kernel grants transparent huge pages a 299 KB slab is one
 * or two physically contiguous pieces instead of 73 scattered 4 KiB pages. A request's scatter-gather
 * list then has one or two entries instead of 73: a virtio disk without indirect descriptors (the test
 * machines') otherwise fills its ring with a few such requests and the block layer requeues the rest,
 * and on NVMe it means fewer PRP entries and IOMMU mappings per request. Where no huge page is granted
 * this is ordinary memory; nothing depends on it for correctness.
 *
 * Slabs of one size are carved from regions of about 8 MiB (whole huge pages). A region is unmapped
 * when its last slab is freed, except one empty region per slab size, kept for the next spill or
 * restore. A region is added only when no region of that size has a free slot, so what is mapped
 * never exceeds the peak of slabs in use, rounded up to regions, plus the kept empty ones.
 */
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmcache::kv::io_memory {

constexpr size_t HUGE_PAGE = 2u << 20;

// len bytes rounded up to HUGE_PAGE, HUGE_PAGE-aligned, huge pages asked for; faulted in now when
// populate. nullptr when the mapping fails.
uint8_t *map(size_t len, bool populate);
void unmap(uint8_t *p, size_t len); // len as given to map()

// One slab of slab_bytes (a multiple of 4096, at most 1 GiB), 4096-aligned. Throws std::bad_alloc
// (std::invalid_argument for 0 bytes).
uint8_t *slab_alloc(uint64_t slab_bytes);
void slab_free(uint8_t *p, uint64_t slab_bytes);

struct Stats {
	uint64_t regions = 0;	   // mapped regions, all slab sizes
	uint64_t mapped_bytes = 0; // their bytes
	uint64_t slabs = 0;	   // slabs handed out and not freed
};
Stats stats();

} // namespace llmcache::kv::io_memory
