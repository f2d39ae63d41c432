// SPDX-License-Identifier: MIT
#include "kvio/slab.hpp"

#include "kvio/crc32c.hpp"

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace llmcache::kv {

static uint32_t header_crc(const SlabHeader &h)
{
	SlabHeader c = h;
	c.header_crc = 0;
	return crc32c(&c, sizeof(c));
}

void slab_seal(void *slab, uint64_t slab_bytes, const SlabId &id, uint32_t n_tokens, uint32_t payload_bytes,
	       uint64_t seq, const uint32_t *payload_crc)
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
	h.payload_crc = payload_crc ? *payload_crc : crc32c(slab, payload_bytes);
	h.header_crc = header_crc(h);
	std::memcpy(static_cast<uint8_t *>(slab) + slab_header_at(slab_bytes), &h, sizeof(h));
}

static std::string where(const std::string &path, uint64_t offset, const SlabId &id)
{
	return "corrupted KV slab on " + path + " at byte offset " + std::to_string(offset) + " (layer " +
	       std::to_string(id.layer) + ", page " + std::to_string(id.page) + ", " + (id.kind == SlabKind::K ? "K" : "V") +
	       "): ";
}
static const char *const ADVICE = "; the data was not used: check the device (dmesg, smartctl) and drop the session";

int slab_verify(const void *slab, uint64_t slab_bytes, const SlabId &id, uint64_t offset, const std::string &path,
		std::string &err, uint8_t *dst)
{
	SlabHeader h;
	std::memcpy(&h, static_cast<const uint8_t *>(slab) + slab_header_at(slab_bytes), sizeof(h));
	const char *what = nullptr;
	if (h.magic != SLAB_MAGIC || h.version != SLAB_VERSION)
		what = "no slab header (magic or version wrong)";
	else if (h.header_crc != header_crc(h))
		what = "header checksum mismatch";
	else if (h.pool_id != id.pool_id || h.layer != id.layer || h.page != id.page || h.kind != (uint16_t)id.kind)
		what = "slab belongs to another pool, layer, page or kind";
	else if (h.payload_bytes > slab_bytes - sizeof(SlabHeader))
		what = "payload length larger than the slab";
	else if (const uint8_t *payload = static_cast<const uint8_t *>(slab);
		 h.payload_crc != (dst ? crc32c_copy(dst, payload, h.payload_bytes) : crc32c(payload, h.payload_bytes)))
		what = "payload checksum mismatch";
	if (!what)
		return 0;
	err = where(path, offset, id) + what + ADVICE;
	return -EBADMSG;
}

constexpr uint64_t HDR = sizeof(SlabHeader);
static_assert(SLAB_ALIGN == CRC32C_BLOCK);

BlockCrcs::BlockCrcs(uint64_t slab_bytes, uint64_t from)
	: crc_(slab_bytes / SLAB_ALIGN), from_(from), at_(from), end_(slab_header_at(slab_bytes))
{
}

void BlockCrcs::feed(uint64_t off, const uint8_t *p, uint64_t len)
{
	if (done_ || off + len <= at_)
		return;
	p += at_ - off, len -= at_ - off; // bytes before at_ are before from_: skipped
	while (len && at_ < end_) {
		const uint64_t end = std::min((at_ / SLAB_ALIGN + 1) * SLAB_ALIGN, end_), n = std::min(len, end - at_);
		run_ = crc32c(p, n, run_);
		p += n, len -= n, at_ += n;
		if (at_ == end)
			crc_[(at_ - 1) / SLAB_ALIGN] = run_, run_ = 0;
	}
}

void BlockCrcs::finish(const uint8_t *slab)
{
	if (done_)
		return;
	for (uint64_t b = 0; b * SLAB_ALIGN < from_; b++)
		crc_[b] = crc32c(slab + b * SLAB_ALIGN, std::min<uint64_t>(SLAB_ALIGN, end_ - b * SLAB_ALIGN));
	if (at_ < end_)
		feed(at_, slab + at_, end_ - at_);
	done_ = true;
}

void slab_block_crcs(const uint8_t *slab, uint64_t slab_bytes, uint32_t *out)
{
	const uint64_t last = slab_bytes / SLAB_ALIGN - 1;
	crc32c_blocks(slab, last, out);
	out[last] = crc32c(slab + last * SLAB_ALIGN, SLAB_ALIGN - HDR);
}

int slab_verify_blocks(const uint8_t *buf, uint64_t slab_bytes, uint32_t first, uint32_t count, const uint32_t *crcs,
		       const SlabId &id, uint64_t offset, const std::string &path, std::string &err)
{
	const uint64_t last = slab_bytes / SLAB_ALIGN - 1;
	uint32_t got[64];
	for (uint32_t b = 0; b < count;) {
		const uint32_t n = std::min<uint32_t>(count - b, 64), blk = first + b;
		const uint8_t *p = buf + (uint64_t)b * SLAB_ALIGN;
		const bool has_last = blk + n - 1 == last; // the last block stops short of the header
		crc32c_blocks(p, n - has_last, got);
		if (has_last)
			got[n - 1] = crc32c(p + (uint64_t)(n - 1) * SLAB_ALIGN, SLAB_ALIGN - HDR);
		for (uint32_t i = 0; i < n; i++)
			if (got[i] != crcs[blk + i]) {
				err = where(path, offset, id) + "payload checksum mismatch in block " + std::to_string(blk + i) +
				      " (byte offset " + std::to_string(offset + (uint64_t)(blk + i) * SLAB_ALIGN) +
				      ") of a partial read" + ADVICE;
				return -EBADMSG;
			}
		b += n;
	}
	return 0;
}

} // namespace llmcache::kv
