// SPDX-License-Identifier: MIT
#include "kv/crc32c.hpp"

#include <array>
#include <cstring>

namespace llmcache::kv {
namespace {

constexpr uint32_t POLY = 0x82f63b78u; // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table()
{
	std::array<uint32_t, 256> t{};
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (c & 1 ? POLY : 0);
		t[i] = c;
	}
	return t;
}
constexpr auto TABLE = make_table();

uint32_t crc_table(const uint8_t *p, size_t n, uint32_t c)
{
	while (n--)
		c = (c >> 8) ^ TABLE[(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t *p, size_t n, uint32_t c)
{
	uint64_t c64 = c;
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;
		std::memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
const bool HAVE_HW = __builtin_cpu_supports("sse4.2");
#endif

} // namespace

uint32_t crc32c(const void *data, size_t len, uint32_t crc)
{
	auto p = static_cast<const uint8_t *>(data);
	crc = ~crc;
#if defined(__x86_64__)
	if (HAVE_HW)
		return ~crc_hw(p, len, crc);
#endif
	return ~crc_table(p, len, crc);
}

} // namespace llmcache::kv
