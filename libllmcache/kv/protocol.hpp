// SPDX-License-Identifier: MIT
/*
 * The llmcached KV protocol: fixed-layout little-endian messages on a SOCK_SEQPACKET Unix socket, one
 * message per packet. Tensors never cross the socket: at OPEN the client passes a sealed memfd (by
 * SCM_RIGHTS) laid out by ShmLayout, writes K/V rows and queries into it, and reads selections from
 * it. Every message is a Header followed by the payload of its type; parse() checks all of it and
 * names the byte offset of what is wrong.
 */
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace llmcache::kv::proto {

constexpr uint32_t MAGIC = 0x4b4c4c4d; // "MLLK"
constexpr uint16_t VERSION = 1;
constexpr size_t MAX_MESSAGE = 4096;

enum Type : uint16_t {
	OPEN = 1,
	APPEND = 2,
	SELECT = 3,
	DROP = 4,
	CLOSE = 5,
	STATUS = 6,
	SELECT_BEGIN = 7, // payload Select: start scoring, reply at once
	SELECT_END = 8,	  // payload SessionRef: finish, reply with the count like SELECT
	PAGECACHE_STATUS = 9, // no payload: the page-cache mode's status as "key value" lines (--mode=bpf)
	OPEN_AERP = 10,	      // payload OpenAerp: OPEN of a Kelle AERP session (KvOptions::aerp), with its memfd
	APPEND_X = 11,	      // payload Append: APPEND with each token's input vector x at ShmLayout::in_x
	OPEN_MEMORY = 12,     // payload OpenMemory: OPEN_AERP with EdgeInfinite's compressed memory
	REPLY = 0x80
};

struct Header {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length; // payload bytes after the header
	uint32_t seq;	 // echoed in the reply
};
static_assert(sizeof(Header) == 16);

struct Open {
	uint32_t layers, q_heads, kv_heads, head_dim, dtype, max_context;
	uint32_t max_budget;   // most tokens a select may return
	uint32_t append_batch; // most tokens an append may carry
};
// An AERP session: W_K and W_V (layers x d_model x kv_heads * head_dim fp32 each, when d_model > 0)
// are in the shared memory at ShmLayout::w_k and w_v when the OPEN_AERP is sent.
struct OpenAerp {
	Open open;
	uint32_t budget;  // tokens each KV head of a layer keeps
	uint32_t d_model; // elements of a token's input vector; 0 = no recomputation
};
// An AERP session with EdgeInfinite's compressed memory (KvOptions::memory): what the eviction removes is
// folded into per-head memories, and each SELECT / SELECT_END also writes the memory's readout at
// ShmLayout::memory (q_heads x head_dim floats) and its state per query head at memory_state.
struct OpenMemory {
	OpenAerp aerp;
	uint32_t route_threshold; // the readout is used once a layer's context exceeds this many tokens
};
struct Append {
	uint64_t session;
	uint32_t layer, n_tokens; // rows at ShmLayout::in_k / in_v
};
struct Select {
	uint64_t session;
	uint32_t layer, budget; // query at ShmLayout::q
};
struct SessionRef {
	uint64_t session;
};
// Reply: status 0 or -errno; count = tokens appended or selected; text_len bytes of text follow
// (the error message, or the STATUS listing).
struct Reply {
	int32_t status;
	uint32_t count;
	uint64_t session;
	uint32_t text_len;
	uint32_t reserved;
};

// Where each tensor lives in the session's shared memory. An AERP session's layout adds, after out_v,
// the selection's per-head keep mask (max_budget x kv_heads bytes), the appended input vectors
// (append_batch x d_model elements) and W_K, W_V; other sessions have these regions empty, at size.
// A session with the compressed memory adds, after those, the readout (q_heads x head_dim floats) and
// its per-query-head states (q_heads bytes); other sessions have them empty, at size.
struct ShmLayout {
	uint64_t in_k, in_v, q, positions, out_k, out_v, size;
	uint64_t heads, in_x, w_k, w_v;
	uint64_t memory, memory_state;
	static bool of(const Open &o, ShmLayout &out); // false if the sizes overflow the 1 TiB limit
	static bool of(const OpenAerp &o, ShmLayout &out);
	static bool of(const OpenMemory &o, ShmLayout &out);
};

// Checks a received packet: header, version, type, payload length for the type. Returns 0 and the
// header, or -EBADMSG with err naming the byte offset and the problem.
int parse(const uint8_t *buf, size_t len, Header &h, std::string &err);
size_t payload_size(uint16_t type);

} // namespace llmcache::kv::proto
