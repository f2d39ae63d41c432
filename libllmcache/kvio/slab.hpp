// SPDX-License-Identifier: MIT
/*
 * On-device layout of the storage pool (Documentation/kv.md, "Slab layout"). The device is cut into
 * equal slots of slab_bytes (a multiple of 4096, the O_DIRECT alignment); each spilled page of tokens of
 * a layer takes two slots: its K slab and its V slab, so scoring reads keys only. A slab is
 *   [payload][zero padding][SlabHeader, the last 64 bytes]
 * The payload starts the slab so that rows sit on 4 KiB boundaries whenever their size allows (an
 * 8 KiB row is two blocks to read, not three), and the header takes room the padding had anyway.
 * K payload: kmin[dims] f32, kmax[dims] f32 (the page's per-dim key bounds, for Quest-style scoring),
 *            keys[page_tokens][dims] in the session dtype;  V payload: values[page_tokens][dims].
 * The header names the pool instance, layer, page and kind, and carries the CRC32C of the payload and
 * of itself: a read that does not match exactly what was written is an error, never data.
 */
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmcache::kv {

constexpr uint32_t SLAB_MAGIC = 0x534b564c; // "LVKS"
constexpr uint16_t SLAB_VERSION = 2; // 2: header at the end of the slab
constexpr uint32_t SLAB_ALIGN = 4096;
enum class SlabKind : uint16_t { K = 0, V = 1 };

struct SlabHeader {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint64_t pool_id; // random per pool instance: stale slabs of an earlier run never match
	uint32_t layer;
	uint32_t page;
	uint32_t n_tokens;
	uint32_t payload_bytes;
	uint64_t seq; // write sequence number
	uint32_t payload_crc;
	uint32_t header_crc; // CRC32C of the header with this field zero
	uint8_t reserved[16];
};
static_assert(sizeof(SlabHeader) == 64);

// Where the header of a slab of slab_bytes sits (its payload is at byte 0).
inline uint64_t slab_header_at(uint64_t slab_bytes) { return slab_bytes - sizeof(SlabHeader); }

struct SlabId {
	uint64_t pool_id;
	uint32_t layer, page;
	SlabKind kind;
};

// Fills the header of a slab of slab_bytes whose payload is already in place; payload_crc, when given,
// is the payload's CRC32C computed earlier (as the CPU pool does while appending), else it is computed.
void slab_seal(void *slab, uint64_t slab_bytes, const SlabId &id, uint32_t n_tokens, uint32_t payload_bytes,
	       uint64_t seq, const uint32_t *payload_crc = nullptr);
// 0 if the slab is the one expected and intact; -EBADMSG with a sentence in err otherwise. With dst,
// the payload is copied there while its checksum is computed (one pass); dst is not to be used then
// unless this returns 0.
int slab_verify(const void *slab, uint64_t slab_bytes, const SlabId &id, uint64_t offset, const std::string &path,
		std::string &err, uint8_t *dst = nullptr);

// The CRC32C of every SLAB_ALIGN block of a slab, over the block's bytes except the header's (the last
// block stops 64 bytes short): what a read of some blocks of a slab (the rows a selection needs) is checked
// against. The table stays in host memory with the page's other metadata (Documentation/kv.md,
// "Partial reads"). The CPU pool feeds the rows as they are appended (they are hot then) and
// completes the table at spill time from the page in memory: the blocks before `from` (K: the key
// bounds, which change with every append) and the tail after the last row.
class BlockCrcs {
public:
	BlockCrcs() = default;
	// A table for slabs of slab_bytes, fed from slab byte `from` on (a multiple of SLAB_ALIGN).
	BlockCrcs(uint64_t slab_bytes, uint64_t from);
	// The slab's bytes [off, off + len), in order from `from`; bytes before `from` are skipped.
	void feed(uint64_t off, const uint8_t *p, uint64_t len);
	// Completes the table from the whole slab in memory (idempotent).
	void finish(const uint8_t *slab);
	const uint32_t *data() const { return crc_.data(); }
	size_t size() const { return crc_.size(); }

private:
	std::vector<uint32_t> crc_;
	uint64_t from_ = 0, at_ = 0, end_ = 0; // fed: [from_, at_); covered: [0, end_), the header excluded
	uint32_t run_ = 0;	     // CRC of the fed bytes of the block holding at_
	bool done_ = false;
};

// The table of a whole slab in memory (what BlockCrcs::finish yields for it), into out[slab_bytes / SLAB_ALIGN].
void slab_block_crcs(const uint8_t *slab, uint64_t slab_bytes, uint32_t *out);
// 0 if blocks [first, first + count) of a slab, read into buf, match their CRCs (crcs: the slab's
// whole table); -EBADMSG with a sentence naming the device, byte offset, layer, page, kind and block
// otherwise.
int slab_verify_blocks(const uint8_t *buf, uint64_t slab_bytes, uint32_t first, uint32_t count, const uint32_t *crcs,
		       const SlabId &id, uint64_t offset, const std::string &path, std::string &err);

} // namespace llmcache::kv
