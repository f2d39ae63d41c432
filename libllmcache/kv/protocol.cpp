// SPDX-License-Identifier: MIT
#include "kv/protocol.hpp"

#include "csd/kernels/kernel_common.h"

#include <cerrno>
#include <cstring>

namespace llmcache::kv::proto {

size_t payload_size(uint16_t type)
{
	switch (type) {
	case OPEN:
		return sizeof(Open);
	case OPEN_AERP:
		return sizeof(OpenAerp);
	case OPEN_MEMORY:
		return sizeof(OpenMemory);
	case APPEND:
	case APPEND_X:
		return sizeof(Append);
	case SELECT:
	case SELECT_BEGIN:
		return sizeof(Select);
	case DROP:
	case CLOSE:
	case SELECT_END:
		return sizeof(SessionRef);
	case STATUS:
	case PAGECACHE_STATUS:
		return 0;
	default:
		return SIZE_MAX;
	}
}

int parse(const uint8_t *buf, size_t len, Header &h, std::string &err)
{
	auto bad = [&](size_t off, const std::string &what) {
		err = "malformed message at byte " + std::to_string(off) + ": " + what;
		return -EBADMSG;
	};
	if (len < sizeof(Header))
		return bad(len, "truncated header (" + std::to_string(len) + " of 16 bytes)");
	std::memcpy(&h, buf, sizeof(h));
	if (h.magic != MAGIC)
		return bad(0, "bad magic");
	if (h.version != VERSION)
		return bad(4, "protocol version " + std::to_string(h.version) + ", this daemon speaks " +
				      std::to_string(VERSION));
	const size_t want = payload_size(h.type);
	if (want == SIZE_MAX)
		return bad(6, "unknown message type " + std::to_string(h.type));
	if (h.length != want)
		return bad(8, "payload length " + std::to_string(h.length) + " for a message that has " +
				      std::to_string(want));
	if (len != sizeof(Header) + want)
		return bad(std::min(len, sizeof(Header) + want),
			   "packet of " + std::to_string(len) + " bytes, header says " + std::to_string(sizeof(Header) + want));
	return 0;
}

bool ShmLayout::of(const Open &o, ShmLayout &l)
{
	constexpr uint64_t LIMIT = 1ull << 40;
	// Products of two 32-bit fields fit in 64 bits; each is bounded before it is multiplied again.
	const uint64_t row_elems = (uint64_t)o.kv_heads * o.head_dim, q_elems = (uint64_t)o.q_heads * o.head_dim;
	if (row_elems == 0 || row_elems > LIMIT / 16 || q_elems > LIMIT / 16)
		return false;
	const uint64_t row = row_elems * csd_dtype_bytes(o.dtype), q = q_elems * 4;
	if (o.append_batch > LIMIT / 4 / row || o.max_budget > LIMIT / 4 / row)
		return false;
	auto align = [](uint64_t x) { return (x + 63) & ~63ull; };
	l.in_k = 0;
	l.in_v = align(l.in_k + o.append_batch * row);
	l.q = align(l.in_v + o.append_batch * row);
	l.positions = align(l.q + q);
	l.out_k = align(l.positions + 4ull * o.max_budget);
	l.out_v = align(l.out_k + o.max_budget * row);
	l.size = (l.out_v + o.max_budget * row + 4095) & ~4095ull;
	l.heads = l.in_x = l.w_k = l.w_v = l.memory = l.memory_state = l.size;
	return true;
}

bool ShmLayout::of(const OpenAerp &a, ShmLayout &l)
{
	constexpr uint64_t LIMIT = 1ull << 40;
	const Open &o = a.open;
	if (!of(o, l))
		return false;
	// Each product is bounded before it is multiplied again (of() bounded kv_heads x head_dim).
	const uint64_t dims = (uint64_t)o.kv_heads * o.head_dim, elem = csd_dtype_bytes(o.dtype);
	const uint64_t heads = (uint64_t)o.max_budget * o.kv_heads, x = (uint64_t)a.d_model * elem;
	if (heads > LIMIT || x > LIMIT / 4 || (uint64_t)o.append_batch * x > LIMIT || a.d_model > LIMIT / 4 / dims ||
	    (uint64_t)a.d_model * dims * 4 > LIMIT / 4 / (o.layers ? o.layers : 1))
		return false;
	const uint64_t w = (uint64_t)o.layers * a.d_model * dims * 4;
	auto align = [](uint64_t v) { return (v + 63) & ~63ull; };
	l.heads = align(l.out_v + o.max_budget * dims * elem);
	l.in_x = align(l.heads + heads);
	l.w_k = align(l.in_x + o.append_batch * x);
	l.w_v = align(l.w_k + w);
	l.size = (l.w_v + w + 4095) & ~4095ull;
	l.memory = l.memory_state = l.size;
	return l.size <= LIMIT;
}

bool ShmLayout::of(const OpenMemory &m, ShmLayout &l)
{
	constexpr uint64_t LIMIT = 1ull << 40;
	if (!of(m.aerp, l))
		return false;
	const Open &o = m.aerp.open;
	const uint64_t q_elems = (uint64_t)o.q_heads * o.head_dim; // bounded by of(Open)
	l.memory = l.size;
	l.memory_state = (l.memory + 4 * q_elems + 63) & ~63ull;
	l.size = (l.memory_state + o.q_heads + 4095) & ~4095ull;
	return l.size <= LIMIT;
}

} // namespace llmcache::kv::proto
