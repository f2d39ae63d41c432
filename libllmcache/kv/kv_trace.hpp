// SPDX-License-Identifier: MIT
/*
 * The KV trace: what a session's KV policy decided and what it decided from, one text line per event,
 * so that the decisions can be replayed and compared offline (kv_replay.hpp, llmkvreplay). The format
 * (Documentation/kv.md, "KV traces"):
 *
 *   llmcache-kv-trace 1
 *   shape layers=L q_heads=H kv_heads=G head_dim=D dtype=T max_context=C
 *   policy page_tokens=P sink_tokens=S recent_tokens=R cpu_budget=B beta=F device=0|1 estimator=exact|quest [write_through=1]
 *   a LAYER COUNT                         COUNT tokens appended to LAYER
 *   q LAYER BUDGET N FIRST COUNT S...     a select of BUDGET tokens over the N tokens of LAYER, and the
 *                                         scores of positions FIRST .. FIRST+COUNT-1 (float, %.9g)
 *   s LAYER POS...                        the positions it selected, ascending (decision)
 *   p LAYER PAGE...                       the fetched pages that came back to memory (decision)
 *   v LAYER:PAGE...                       the pages a spill chose, in order (decision)
 *   w LAYER:PAGE...                       of those, the ones whose write failed and stayed in memory
 *
 * write_through=1 ends the policy line of a session that writes full pages through (absent: off).
 *
 * A session with Kelle's AERP (policy_aerp.hpp) adds to its policy line ` aerp_budget=B d_model=D` and,
 * with EdgeInfinite's compressed memory (policy_memory.hpp), ` memory=1 route_threshold=T` (absent for
 * other sessions, so their traces are unchanged). Its events are a, s and these (never q, p, v or w):
 *   i LAYER COUNT                         COUNT tokens appended to LAYER with their input vector x
 *   l LAYER BUDGET N LOGIT...             a select of BUDGET tokens over the N tokens LAYER retains, and
 *                                         the logits its accumulation used: N x q_heads, token-major in
 *                                         position order (%.9g; 0 where the head does not keep the token)
 *   f LAYER POS x|kv                      the form of token POS, decided as it left the recent window
 *                                         (decision)
 *   e LAYER POS:HEAD...                   the (token, KV head) pairs an append's eviction removed, by head,
 *                                         then lowest-ranked first (decision; with the memory: folded)
 *   s LAYER POS...                        the positions the select returned (decision)
 *
 * Fields are separated by one space, lines end with '\n'; consecutive appends to one layer share a line.
 * The reader checks every line and stops at the first bad one with its line number.
 */
#pragma once
#include "kv/policy.hpp"
#include "csd/kernels/kernel_common.h"

#include <cstdint>
#include <cstdio>
#include <istream>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llmcache::kv {

constexpr uint32_t KV_TRACE_VERSION = 1;
constexpr uint32_t KV_TRACE_MAX_D_MODEL = 1u << 16; // KvStore::MAX_D_MODEL

struct KvTraceHeader {
	uint32_t layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0, dtype = 0, max_context = 0;
	uint32_t page_tokens = 0, sink_tokens = 0, recent_tokens = 0;
	uint64_t cpu_budget = 0;
	double beta = 0;
	bool device = false;
	std::string estimator = "exact";
	bool write_through = false; // full pages written when they fill (KvOptions::write_through)
	// Kelle's AERP (KvOptions::aerp): budget 0 = a session without it, and none of the fields below.
	uint32_t aerp_budget = 0, d_model = 0;
	bool memory = false; // EdgeInfinite's compressed memory (KvOptions::memory)
	uint32_t route_threshold = 0;
};

// An AERP eviction's (token, KV head) pair, by the token's position.
struct KvTracePair {
	uint32_t pos = 0, head = 0;
	bool operator==(const KvTracePair &) const = default;
};

struct KvTraceEvent {
	enum Kind : char {
		Append = 'a',
		Select = 'q',
		Selected = 's',
		Promoted = 'p',
		Spill = 'v',
		WriteFailed = 'w',
		// AERP sessions
		AppendX = 'i',
		Logits = 'l',
		Format = 'f',
		Evicted = 'e',
	};
	Kind kind = Append;
	uint32_t layer = 0, count = 0;	  // a, i: tokens
	uint32_t budget = 0, n = 0, first = 0; // q; l: budget and n (retained tokens)
	std::vector<float> scores;	       // q: positions first, first + 1, ...; l: the logits
	std::vector<uint32_t> items;	       // s: positions; p: pages
	std::vector<policy::PageRef> pages;    // v, w
	uint32_t pos = 0;		       // f: the token
	bool x = false;			       // f: stored as x (else K and V)
	std::vector<KvTracePair> pairs;	       // e
	bool decision() const
	{
		return kind == Selected || kind == Promoted || kind == Spill || kind == Format || kind == Evicted;
	}
};

// One event as its trace line, with the '\n'.
std::string format_kv_trace_event(const KvTraceEvent &e);
std::string format_kv_trace_header(const KvTraceHeader &h);

// Writes a trace as the store runs. A write that fails stops the trace (error() says why); the store
// goes on.
class KvTraceWriter {
public:
	~KvTraceWriter();
	static int open(const std::string &path, const KvTraceHeader &h, std::unique_ptr<KvTraceWriter> &out,
			std::string &err);
	void append(uint32_t layer, bool x = false); // x: with its input vector (i, AERP)
	void select(uint32_t layer, uint32_t budget, uint32_t n, std::vector<csd_score> scores);
	// AERP: a select's logits (n retained tokens x q_heads), a token's form, an eviction's pairs.
	void logits(uint32_t layer, uint32_t budget, uint32_t n, std::span<const float> logits);
	void format(uint32_t layer, uint32_t pos, bool x);
	void evicted(uint32_t layer, std::vector<KvTracePair> pairs);
	void selected(uint32_t layer, std::span<const uint32_t> positions);
	void promoted(uint32_t layer, std::span<const uint32_t> pages);
	void spill(std::span<const policy::PageRef> victims, std::span<const policy::PageRef> failed);
	const std::string &error() const { return err_; }

private:
	void flush_appends();
	void put(const KvTraceEvent &e);
	void put_items(KvTraceEvent::Kind kind, uint32_t layer, std::span<const uint32_t> items);
	FILE *f_ = nullptr;
	std::string path_, err_;
	uint32_t append_layer_ = 0, append_count_ = 0;
	bool append_x_ = false;
};

// Reads a trace from a stream, event by event.
class KvTraceReader {
public:
	explicit KvTraceReader(std::istream &in) : in_(in) {}
	// Reads and checks the three header lines: 0, or -EINVAL with err "line N: ...".
	int open(KvTraceHeader &h, std::string &err);
	// The next event: 1, 0 at the end, or -EINVAL with err "line N: ...".
	int next(KvTraceEvent &e, std::string &err);
	uint64_t line() const { return line_; }

private:
	int getline(std::string &s, std::string &err);
	std::istream &in_;
	KvTraceHeader h_;
	uint64_t line_ = 0;
};

} // namespace llmcache::kv
