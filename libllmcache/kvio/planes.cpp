// SPDX-License-Identifier: MIT
#include "kvio/planes.hpp"

#include <cstring>

namespace llmcache::kv {

void planes_split(const uint8_t *src, size_t n, size_t elem_bytes, uint8_t *hi, uint8_t *lo)
{
	const size_t h = elem_bytes / 2;
	if (h == 1) {
		for (size_t i = 0; i < n; i++)
			lo[i] = src[2 * i], hi[i] = src[2 * i + 1];
		return;
	}
	for (size_t i = 0; i < n; i++) {
		std::memcpy(lo + i * h, src + i * elem_bytes, h);
		std::memcpy(hi + i * h, src + i * elem_bytes + h, h);
	}
}

void planes_merge(const uint8_t *hi, const uint8_t *lo, size_t n, size_t elem_bytes, uint8_t *dst)
{
	const size_t h = elem_bytes / 2;
	if (h == 1) {
		for (size_t i = 0; i < n; i++)
			dst[2 * i] = lo ? lo[i] : 0, dst[2 * i + 1] = hi[i];
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (lo)
			std::memcpy(dst + i * elem_bytes, lo + i * h, h);
		else
			std::memset(dst + i * elem_bytes, 0, h);
		std::memcpy(dst + i * elem_bytes + h, hi + i * h, h);
	}
}

} // namespace llmcache::kv
