// SPDX-License-Identifier: MIT
// CRC32C (Castagnoli), the checksum of every storage-pool slab: SSE4.2 crc32 instructions on three
// interleaved streams combined with a carry-less multiply when the CPU has them, a byte table
// otherwise. crc32c("123456789") == 0xe3069283.
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmcache::kv {
uint32_t crc32c(const void *data, size_t len, uint32_t crc = 0);
// The CRC32C of A followed by B, from crc32c(A), crc32c(B) and the length of B: lets the CPU pool
// checksum a page as it is appended and seal it at spill time without reading it again.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
// crc32c(src, len, crc) while copying src to dst, in one pass over the data (restores verify the
// slab as they copy it out of the I/O buffer).
uint32_t crc32c_copy(void *dst, const void *src, size_t len, uint32_t crc = 0);
// The CRC32C of each of n consecutive blocks of CRC32C_BLOCK bytes (out[i] = crc32c(block i)), three
// blocks at a time: the per-block checksums that partial slab reads are verified against.
constexpr size_t CRC32C_BLOCK = 4096;
void crc32c_blocks(const void *data, size_t n_blocks, uint32_t *out);
// The byte-table form, the same function on any CPU (the reference the fast form is tested against).
uint32_t crc32c_portable(const void *data, size_t len, uint32_t crc = 0);
}
