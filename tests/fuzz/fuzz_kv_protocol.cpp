// SPDX-License-Identifier: MIT
// libFuzzer target: llmcached's message parser, and the shared-memory layout it derives from an OPEN.
// Whatever a client sends must give 0 or -EBADMSG with a message, never a crash, an overflow or a
// layout that does not fit its own size.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kv/protocol.hpp"

using namespace llmcache::kv::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Header h;
	std::string err;
	int r = parse(data, size, h, err);
	if (r != 0) {
		if (r != -EBADMSG || err.empty())
			std::abort();
		return 0;
	}
	if (sizeof(Header) + h.length != size || h.length != payload_size(h.type))
		std::abort(); // parse() accepted a length that does not match the packet or the type
	if (h.type == OPEN) {
		Open o;
		std::memcpy(&o, data + sizeof(Header), sizeof(o));
		ShmLayout l;
		if (ShmLayout::of(o, l)) {
			const uint64_t ends[] = {l.in_k, l.in_v, l.q, l.positions, l.out_k, l.out_v};
			for (uint64_t e : ends)
				if (e > l.size)
					std::abort();
		}
	}
	return 0;
}
