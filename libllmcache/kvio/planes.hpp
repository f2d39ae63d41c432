// SPDX-License-Identifier: MIT
/*
 * Two-plane precision (Documentation/kv.md, "Two-plane precision"; the storage analogue of Kelle's
 * 2DRP): a run of elements is stored as a high plane, the upper half of every element's bytes, followed
 * by a low plane, the lower half. For fp16 and bf16 (2-byte elements) that is the high byte of each
 * element, then the low byte; for fp32, the upper 2 bytes (the element's bf16 truncation), then the
 * lower 2. A reader that takes the high plane alone gets every element with its low half zeroed: a
 * truncated value, in half the bytes. Pure functions on little-endian element bytes, no I/O; they do
 * not know the dtype, only the element size (2 or 4).
 */
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmcache::kv {

// Bytes per element in each plane: half the element size (1 for fp16/bf16, 2 for fp32).
inline size_t plane_bytes_per_elem(size_t elem_bytes) { return elem_bytes / 2; }

// Splits n elements of elem_bytes (2 or 4) at src into hi and lo, n * elem_bytes / 2 bytes each.
void planes_split(const uint8_t *src, size_t n, size_t elem_bytes, uint8_t *hi, uint8_t *lo);
// The inverse: n elements into dst from their high and low planes; lo nullptr gives each element with
// its low half zero (the high plane alone). Bit-exact: planes_merge(planes_split(x)) == x.
void planes_merge(const uint8_t *hi, const uint8_t *lo, size_t n, size_t elem_bytes, uint8_t *dst);

} // namespace llmcache::kv
