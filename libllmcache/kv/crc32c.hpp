// SPDX-License-Identifier: MIT
// CRC32C (Castagnoli), the checksum of every storage-pool slab: SSE4.2 crc32 instructions on three
// interleaved streams combined with a carry-less multiply when the CPU has them, a byte table
// otherwise. crc32c("123456789") == 0xe3069283.
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmcache::kv {
uint32_t crc32c(const void *data, size_t len, uint32_t crc = 0);
// The byte-table form, the same function on any CPU (the reference the fast form is tested against).
uint32_t crc32c_portable(const void *data, size_t len, uint32_t crc = 0);
}
