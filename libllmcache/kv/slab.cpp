// SPDX-License-Identifier: MIT
#include "kv/slab.hpp"

#include "kv/crc32c.hpp"

#include <cerrno>
#include <cstring>

namespace llmcache::kv {

static uint32_t header_crc(const SlabHeader &h)
{
	SlabHeader c = h;
	c.header_crc = 0;
	return crc32c(&c, sizeof(c));
}

void slab_seal(void *slab, const SlabId &id, uint32_t n_tokens, uint32_t payload_bytes, uint64_t seq,
	       const uint32_t *payload_crc)
{
	SlabHeader h{};
	h.magic = SLAB_MAGIC;
	h.version = SLAB_VERSION;
	h.kind = (uint16_t)id.kind;
	h.pool_id = id.pool_id;
	h.layer = id.layer;
	h.page = id.page;
	h.n_tokens = n_tokens;
	h.payload_bytes = payload_bytes;
	h.seq = seq;
	h.payload_crc = payload_crc ? *payload_crc
				    : crc32c(static_cast<const uint8_t *>(slab) + sizeof(SlabHeader), payload_bytes);
	h.header_crc = header_crc(h);
	std::memcpy(slab, &h, sizeof(h));
}

int slab_verify(const void *slab, uint64_t slab_bytes, const SlabId &id, uint64_t offset, const std::string &path,
		std::string &err)
{
	SlabHeader h;
	std::memcpy(&h, slab, sizeof(h));
	const char *what = nullptr;
	if (h.magic != SLAB_MAGIC || h.version != SLAB_VERSION)
		what = "no slab header (magic or version wrong)";
	else if (h.header_crc != header_crc(h))
		what = "header checksum mismatch";
	else if (h.pool_id != id.pool_id || h.layer != id.layer || h.page != id.page || h.kind != (uint16_t)id.kind)
		what = "slab belongs to another pool, layer, page or kind";
	else if (h.payload_bytes > slab_bytes - sizeof(SlabHeader))
		what = "payload length larger than the slab";
	else if (h.payload_crc != crc32c(static_cast<const uint8_t *>(slab) + sizeof(SlabHeader), h.payload_bytes))
		what = "payload checksum mismatch";
	if (!what)
		return 0;
	err = "corrupted KV slab on " + path + " at byte offset " + std::to_string(offset) + " (layer " +
	      std::to_string(id.layer) + ", page " + std::to_string(id.page) + ", " +
	      (id.kind == SlabKind::K ? "K" : "V") + "): " + what +
	      "; the data was not used: check the device (dmesg, smartctl) and drop the session";
	return -EBADMSG;
}

} // namespace llmcache::kv
