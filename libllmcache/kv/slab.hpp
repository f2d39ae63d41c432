// SPDX-License-Identifier: MIT
/*
 * On-device layout of the storage pool (Documentation/kv.md, "Slab layout"). The device is cut into
 * equal slots of slab_bytes (a multiple of 4096, the O_DIRECT alignment); each spilled page of tokens of
 * a layer takes two slots: its K slab and its V slab, so scoring reads keys only. A slab is
 *   [SlabHeader, 64 bytes][payload][zero padding to slab_bytes]
 * K payload: kmin[dims] f32, kmax[dims] f32 (the page's per-dim key bounds, for Quest-style scoring),
 *            keys[page_tokens][dims] in the session dtype;  V payload: values[page_tokens][dims].
 * The header names the pool instance, layer, page and kind, and carries the CRC32C of the payload and
 * of itself: a read that does not match exactly what was written is an error, never data.
 */
#pragma once
#include <cstdint>
#include <string>

namespace llmcache::kv {

constexpr uint32_t SLAB_MAGIC = 0x534b564c; // "LVKS"
constexpr uint16_t SLAB_VERSION = 1;
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

struct SlabId {
	uint64_t pool_id;
	uint32_t layer, page;
	SlabKind kind;
};

// Fills the header of a slab whose payload is already in place after it; payload_crc, when given, is
// the payload's CRC32C computed earlier (as the CPU pool does while appending), else it is computed.
void slab_seal(void *slab, const SlabId &id, uint32_t n_tokens, uint32_t payload_bytes, uint64_t seq,
	       const uint32_t *payload_crc = nullptr);
// 0 if the slab is the one expected and intact; -EBADMSG with a sentence in err otherwise.
int slab_verify(const void *slab, uint64_t slab_bytes, const SlabId &id, uint64_t offset, const std::string &path,
		std::string &err);

} // namespace llmcache::kv
