// SPDX-License-Identifier: MIT
/*
 * The KV replay: the KV policy (policy_*.hpp) run over a recorded KV trace (kv_trace.hpp) with no data,
 * only the pool's bookkeeping, so that policies and their parameters can be compared offline on the
 * same input (llmkvreplay). KvPolicyModel is KvStore's control flow without the I/O: the same triggers
 * and the same pure decisions, applied to page states instead of pages. Given the parameters the trace
 * was recorded with, it makes the store's decisions; the check compares them one by one.
 *
 * What the replay assumes: every write succeeds (a recorded failed write, 'w', is counted, and the
 * decisions after it may differ); the device never runs short of slots, so pages brought back keep their
 * device copies (the decisions do not depend on it, but a store that dropped copies wrote pages the
 * replay counts as clean spills); the adaptive beta (-1), which depends on measured rates, replays as
 * no split; a write-through that failed when recording (KvStats::write_through_failures) is counted
 * as written; the scores are those recorded, so tokens that were always kept when recording (and so not
 * scored) have no score and are not candidates if smaller sink or recent windows are replayed.
 *
 * An AERP session's trace (aerp_budget on its policy line) replays through KvAerpModel instead: Kelle's
 * accumulation, eviction and format decision (policy_aerp.hpp) over the recorded logits, and the
 * store's selection (policy::select_retained), with the recorded parameters (only the select budget may
 * vary: the logits exist for the tokens the recorded run retained). The compressed memory's folds are
 * the evicted pairs; its state (M, z) is not replayed, only counted.
 */
#pragma once
#include "kv/kv_trace.hpp"
#include "kv/policy.hpp"
#include "kv/policy_aerp.hpp"

#include <istream>
#include <string>
#include <vector>

namespace llmcache::kv {

// What the replay may vary; each unset field (0, or negative for beta) keeps the recorded value.
struct KvReplayOverrides {
	uint64_t cpu_budget = 0;
	double beta = -2; // >= 0: a fixed split; -2: as recorded
	int64_t sink_tokens = -1, recent_tokens = -1;
	uint32_t page_tokens = 0;
	uint32_t select_budget = 0; // tokens per select instead of the recorded budget
	int device = -1;	    // 0: memory only (nothing spills), 1: a storage pool
	int write_through = -1;	    // 0: off, 1: full pages written when they fill (with a storage pool)
};

struct KvReplayFigures {
	uint64_t appends = 0, selects = 0, selected = 0, selected_in_cpu = 0, selected_from_storage = 0;
	// spilled_pages counts every page that left memory, clean_spills those of them that kept the device
	// copy they had been brought back from, so that their spill wrote nothing (clean demotion).
	uint64_t spills = 0, spilled_pages = 0, clean_spills = 0, promoted_pages = 0, recorded_write_failures = 0;
	uint64_t cpu_tokens = 0, storage_tokens = 0, peak_cpu_bytes = 0; // at the end; the most held
	// Bytes over the bus (payloads): pages written by spills (clean ones write nothing), selected rows
	// (K and V) read from storage and pages brought back whole, and the spilled keys a host-scoring
	// backend (none) reads per select.
	uint64_t bytes_written = 0, bytes_fetched = 0, bytes_scanned = 0;
	// Write-through (KvOptions::write_through): pages written when they filled, and their bytes (also
	// in bytes_written). Their first spill is clean.
	uint64_t written_through = 0, bytes_written_through = 0;
	// AERP sessions (KvStats' aerp_* and memory_* counts): appends that came with x; (token, KV head)
	// pairs evicted and tokens no head kept; at the end, tokens retained, of them stored as x, and the
	// bytes they hold (K and V rows of the heads that keep them, x, or both while recent); forms decided
	// (x or K and V); tokens recomputed by selects and folds; with the memory, pairs folded, the bytes of
	// M and z held, and selects that read it or were routed past it (short).
	uint64_t appends_x = 0, aerp_evicted_heads = 0, aerp_evicted_tokens = 0, aerp_tokens = 0, aerp_x_tokens = 0,
		 aerp_bytes = 0, aerp_decided_x = 0, aerp_decided_kv = 0, aerp_recomputed = 0;
	uint64_t memory_folded = 0, memory_bytes = 0, memory_reads = 0, memory_short = 0;
};

struct KvReplayParams {
	policy::Params policy;
	double beta = 0;
	bool write_through = false;
	uint32_t select_budget = 0;
	uint64_t k_payload = 0, row_bytes = 0; // a page's K slab payload, one token's K (or V) row
	// AERP sessions: budget > 0; memory and its routing threshold.
	policy::AerpParams aerp;
	bool memory = false;
	uint32_t route_threshold = 0;
	uint64_t x_bytes = 0; // one token's input vector
};

// The parameters of a trace, with the overrides applied.
KvReplayParams kv_replay_params(const KvTraceHeader &h, const KvReplayOverrides &o);

class KvPolicyModel {
public:
	KvPolicyModel(const KvTraceHeader &h, const KvReplayParams &p);
	// One token appended to a layer; the spill it triggers, if any, is added to decisions.
	void append(uint32_t layer, std::vector<KvTraceEvent> &decisions);
	// A select over the recorded scores; its selection, promotions and spill go to decisions.
	void select(const KvTraceEvent &q, std::vector<KvTraceEvent> &decisions);
	KvReplayFigures figures() const;

private:
	uint64_t target() const;
	uint64_t hard_limit() const;
	void spill(std::vector<KvTraceEvent> &decisions);
	KvReplayParams p_;
	policy::PoolSnapshot pool_;
	uint64_t cpu_pages_ = 0, spilled_pages_ = 0;
	bool spill_failed_ = false;
	KvReplayFigures fig_;
	std::vector<csd_score> scores_;
};

// KvStore's AERP session (kv_store_aerp.cpp) without the rows: per layer the retained positions, their
// keep masks, accumulated importance and forms.
class KvAerpModel {
public:
	KvAerpModel(const KvTraceHeader &h, const KvReplayParams &p);
	// One token appended to a layer (x: with its input vector); its form and eviction decisions go to
	// decisions.
	void append(uint32_t layer, bool x, std::vector<KvTraceEvent> &decisions);
	// A select over the recorded logits; its selection goes to decisions. 0, or -EINVAL with err when
	// the logits are not of the tokens the layer retains.
	int select(const KvTraceEvent &l, std::vector<KvTraceEvent> &decisions, std::string &err);
	KvReplayFigures figures() const;

private:
	enum class Form : uint8_t { Recent, Kv, X };
	struct Layer {
		std::vector<uint32_t> pos;
		std::vector<float> score;
		std::vector<uint8_t> kept;
		std::vector<Form> form;
		std::vector<uint8_t> has_x;
		uint32_t tokens = 0;
		bool memory = false; // the compressed memory is allocated (an eviction happened)
	};
	KvReplayParams p_;
	std::vector<Layer> layers_;
	KvReplayFigures fig_;
};

struct KvReplayResult {
	KvTraceHeader header;
	KvReplayParams params;
	KvReplayFigures figures;
	std::vector<KvTraceEvent> decisions; // the replay's, when asked for
	// With check: the first decision that differs from the recorded one, or empty.
	std::string divergence;
	uint64_t recorded_decisions = 0;
};

// Replays a trace. keep_decisions: fill result.decisions; check: compare each decision with the
// recorded one (meaningful without overrides). 0, or -EINVAL with err "line N: ..." for a bad trace.
int replay_kv_trace(std::istream &in, const KvReplayOverrides &o, bool keep_decisions, bool check, KvReplayResult &result,
		    std::string &err);

// The figures as text (one "name value" line each) and as a JSON object: same bytes for the same input.
// An AERP trace's figures are AERP's (kv.md, "KV traces and llmkvreplay").
std::string format_kv_replay(const KvReplayResult &r);
std::string format_kv_replay_json(const KvReplayResult &r);

} // namespace llmcache::kv
