// SPDX-License-Identifier: MIT
// The KV replay against the store: a real KvStore (backend none, a device file from kv_test_device.hpp)
// records a KV trace of a prefill and decode steps; the replay over that trace makes exactly the
// store's decisions (the selections it returned, step by step, the pages it spilled and brought back,
// what is in memory at the end) and its counts (pages spilled again without a write are clean spills,
// not bytes written, as the store and its sysfs record count them), two replays are byte-identical, and
// a trace whose decision was altered is caught at its line. With write-through (full pages written as
// they fill), the store's decisions are the same, and the replay counts the same writes: the pages
// written at append time and the spills that then write nothing.
// An AERP session (Kelle's eviction and recomputation, with and without EdgeInfinite's compressed
// memory) records its logits and decisions; the replay makes the store's evictions (checked against the
// keep masks the store's selects return), its format decisions (checked token by token through the
// store's recomputation count), its selections and its AERP and memory counts, byte-identically twice;
// an altered eviction or format line is caught at its line, malformed AERP lines are refused with theirs.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"

#include "kv/kernel_stats.hpp"
#include "kv/kv_replay.hpp"
#include "kv/kv_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

using namespace llmcache::kv;

namespace {

using kv_test::cleanup_devices;
using kv_test::make_device;

constexpr uint32_t LAYERS = 2, Q_HEADS = 4, KV_HEADS = 2, HEAD_DIM = 16, P = 16;

std::string trace_path()
{
	return "/tmp/llmcache-kv-replay-test-" + std::to_string(getpid()) + ".trace";
}

std::string slurp(const std::string &path)
{
	std::ifstream in(path, std::ios::binary);
	std::ostringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

struct Recorded {
	std::string trace;
	std::vector<std::vector<uint32_t>> selections; // what the store's selects returned, in order
	KvStats stats;
	std::vector<std::vector<bool>> resident; // [layer][page] at the end
};

// A prefill of 300 tokens and 120 decode steps; each step appends a token to every layer and selects
// 48 tokens of each, the even steps through select_begin/select_end. The queries mostly repeat (so
// pages gain hits and spilled ones come back), with a different one every 7th step.
Recorded record(bool with_device, bool write_through = false)
{
	KvShape s;
	s.layers = LAYERS;
	s.q_heads = Q_HEADS;
	s.kv_heads = KV_HEADS;
	s.head_dim = HEAD_DIM;
	s.dtype = CSD_FP32;
	s.max_context = 4096;
	KvOptions o;
	o.page_tokens = P;
	o.sink_tokens = 4;
	o.recent_tokens = 32;
	o.score_block = 8;
	o.queue_depth = 8;
	o.cpu_budget = 10 * (8ull * 32 + 2ull * P * 32 * 4); // 10 pages of the two layers' 27 or so
	o.device = with_device ? make_device(16 << 20) : "";
	o.backend = "none";
	o.write_through = write_through;
	o.trace = trace_path();
	std::unique_ptr<KvStore> kv;
	std::string err;
	int r = KvStore::open(s, o, kv, err);
	if (r)
		fprintf(stderr, "open: %s\n", err.c_str());
	assert_int_equal(r, 0);
	std::mt19937 rng(7);
	std::normal_distribution<float> nd;
	const uint32_t dims = KV_HEADS * HEAD_DIM;
	std::vector<float> k(dims), v(dims), q(Q_HEADS * HEAD_DIM), q_other(q.size());
	for (float &x : q)
		x = nd(rng);
	for (float &x : q_other)
		x = nd(rng);
	Recorded rec;
	auto append_all = [&] {
		for (uint32_t l = 0; l < LAYERS; l++) {
			for (float &x : k)
				x = nd(rng);
			for (float &x : v)
				x = nd(rng);
			const int r = kv->append(l, k.data(), v.data());
			if (r && with_device)
				fprintf(stderr, "append: %s\n", kv->error().c_str());
			assert_true(r == 0 || (!with_device && r == -ENOSPC));
		}
	};
	for (uint32_t t = 0; t < 300; t++)
		append_all();
	for (uint32_t step = 0; step < 120; step++) {
		append_all();
		for (uint32_t l = 0; l < LAYERS; l++) {
			const std::vector<float> &query = step % 7 == 3 ? q_other : q;
			KvSelection sel;
			if (step % 2) {
				assert_int_equal(kv->select(l, query.data(), 48, sel), 0);
			} else {
				assert_int_equal(kv->select_begin(l, query.data(), 48), 0);
				assert_int_equal(kv->select_end(sel), 0);
			}
			rec.selections.push_back(sel.positions);
		}
	}
	rec.stats = kv->stats();
	rec.resident.resize(LAYERS);
	for (uint32_t l = 0; l < LAYERS; l++)
		for (uint32_t pos = 0; pos < kv->tokens(l); pos += P)
			rec.resident[l].push_back(kv->resident(l, pos));
	kv.reset(); // closes the trace
	rec.trace = slurp(trace_path());
	unlink(trace_path().c_str());
	return rec;
}

KvReplayResult replay(const std::string &trace, const KvReplayOverrides &o = {}, bool check = true)
{
	std::istringstream in(trace);
	KvReplayResult r;
	std::string err;
	const int rc = replay_kv_trace(in, o, true, check, r, err);
	if (rc)
		fprintf(stderr, "replay: %s\n", err.c_str());
	assert_int_equal(rc, 0);
	return r;
}

std::string transcript(const KvReplayResult &r)
{
	std::string s = format_kv_replay(r) + format_kv_replay_json(r) + "\n";
	for (const KvTraceEvent &e : r.decisions)
		s += format_kv_trace_event(e);
	return s;
}

void replay__store_trace__same_decisions_step_by_step(void **)
{
	const Recorded rec = record(true);
	assert_true(rec.stats.spill_batches > 5);
	assert_true(rec.stats.promoted_pages > 0); // the pool update moved pages: it is exercised
	const KvReplayResult r = replay(rec.trace);
	if (!r.divergence.empty())
		fprintf(stderr, "%s\n", r.divergence.c_str());
	assert_string_equal(r.divergence.c_str(), "");
	assert_true(r.recorded_decisions > rec.selections.size());
	// The replay's selections are the ones the store returned, in order.
	size_t i = 0;
	std::vector<std::set<uint32_t>> spilled(LAYERS);
	for (const KvTraceEvent &e : r.decisions) {
		if (e.kind == KvTraceEvent::Selected) {
			assert_true(i < rec.selections.size());
			assert_true(e.items == rec.selections[i]);
			i++;
		} else if (e.kind == KvTraceEvent::Spill) {
			for (const auto &p : e.pages)
				assert_true(spilled[p.layer].insert(p.page).second);
		} else if (e.kind == KvTraceEvent::Promoted) {
			for (uint32_t pg : e.items)
				assert_int_equal(spilled[e.layer].erase(pg), 1);
		}
	}
	assert_int_equal(i, rec.selections.size());
	// The replay's spills and promotions leave the store's pages where they are.
	for (uint32_t l = 0; l < LAYERS; l++)
		for (uint32_t pg = 0; pg < rec.resident[l].size(); pg++)
			assert_int_equal(rec.resident[l][pg], !spilled[l].count(pg));
	const KvReplayFigures &f = r.figures;
	assert_int_equal(f.spills, rec.stats.spill_batches);
	assert_int_equal(f.promoted_pages, rec.stats.promoted_pages);
	assert_int_equal(f.spilled_pages - f.promoted_pages, rec.stats.spilled_pages);
	// Pages brought back and spilled again were not written again, by the store and in the replay alike:
	// the replay's bytes written are the payloads of the pages the store wrote (the store counts its
	// slabs, a K and a V slab per page, each rounded up to 4 KiB), and the daemon's sysfs record counts
	// the pages that left memory as the replay does.
	assert_true(rec.stats.clean_spills > 0);
	assert_int_equal(rec.stats.copies_dropped, 0);
	assert_int_equal(f.clean_spills, rec.stats.clean_spills);
	const uint64_t written = rec.stats.storage.slabs_written / 2;
	assert_int_equal(f.spilled_pages - f.clean_spills, written);
	assert_int_equal(f.bytes_written, written * r.params.policy.page_bytes);
	assert_int_equal(kernel_stats(rec.stats, 1, 0, false).pool[LLMCACHE_KV_POOL_CPU].spills, f.spilled_pages);
	assert_int_equal(f.cpu_tokens, rec.stats.cpu_tokens);
	assert_int_equal(f.storage_tokens, rec.stats.storage_tokens);
	assert_int_equal(f.selects, rec.selections.size());
	assert_int_equal(f.recorded_write_failures, 0);
}

void replay__twice__byte_identical(void **)
{
	const Recorded rec = record(true);
	assert_string_equal(transcript(replay(rec.trace)).c_str(), transcript(replay(rec.trace)).c_str());
	KvReplayOverrides o;
	o.cpu_budget = 6 * (8ull * 32 + 2ull * P * 32 * 4);
	o.recent_tokens = 16;
	o.select_budget = 32;
	const std::string a = transcript(replay(rec.trace, o, false)), b = transcript(replay(rec.trace, o, false));
	assert_string_equal(a.c_str(), b.c_str());
	// A smaller budget alone keeps fewer tokens in memory, and more on storage.
	KvReplayOverrides smaller;
	smaller.cpu_budget = o.cpu_budget;
	const KvReplayFigures as_recorded = replay(rec.trace).figures, less = replay(rec.trace, smaller, false).figures;
	assert_true(less.cpu_tokens < as_recorded.cpu_tokens);
	assert_true(less.storage_tokens > as_recorded.storage_tokens);
	assert_true(less.peak_cpu_bytes < as_recorded.peak_cpu_bytes);
}

void replay__memory_only_store__same_decisions(void **)
{
	const Recorded rec = record(false);
	assert_int_equal(rec.stats.spill_batches, 0);
	const KvReplayResult r = replay(rec.trace);
	assert_string_equal(r.divergence.c_str(), "");
	assert_int_equal(r.figures.spills, 0);
	assert_int_equal(r.figures.cpu_tokens, rec.stats.cpu_tokens);
}

void replay__altered_decision__divergence_at_its_line(void **)
{
	const Recorded rec = record(true);
	// Drop the last page of the first spill that chose two or more.
	std::istringstream in(rec.trace);
	std::string line, altered;
	uint64_t n = 0, at = 0;
	while (std::getline(in, line)) {
		n++;
		if (!at && line.size() > 2 && line[0] == 'v' && std::count(line.begin(), line.end(), ' ') >= 2) {
			line = line.substr(0, line.rfind(' '));
			at = n;
		}
		altered += line + "\n";
	}
	assert_true(at > 0);
	const KvReplayResult r = replay(altered);
	const std::string want = "(trace line " + std::to_string(at) + "): recorded 'v ";
	if (r.divergence.find(want) == std::string::npos)
		fprintf(stderr, "divergence: %s\n", r.divergence.c_str());
	assert_true(r.divergence.find(want) != std::string::npos);
}

// Write-through: the store records it in the trace's header, makes the decisions it makes without it,
// and the replay counts what it wrote: every page that filled, at append time, and no spill write (the
// device never ran short), and the same clean spills. Replaying the trace recorded without the option
// with --write-through on predicts those figures exactly; off on the other, the figures without it.
void replay__write_through__same_decisions_and_same_writes(void **)
{
	const Recorded off = record(true), on = record(true, true);
	assert_non_null(std::strstr(on.trace.c_str(), " write_through=1\n"));
	assert_null(std::strstr(off.trace.c_str(), "write_through"));
	const KvReplayResult r = replay(on.trace);
	if (!r.divergence.empty())
		fprintf(stderr, "%s\n", r.divergence.c_str());
	assert_string_equal(r.divergence.c_str(), "");
	assert_true(r.params.write_through);
	assert_true(on.selections == off.selections); // the option moves writes, not decisions
	std::string on_decisions, off_decisions;
	for (const KvTraceEvent &e : r.decisions)
		on_decisions += format_kv_trace_event(e);
	for (const KvTraceEvent &e : replay(off.trace).decisions)
		off_decisions += format_kv_trace_event(e);
	assert_string_equal(on_decisions.c_str(), off_decisions.c_str());
	const KvReplayFigures &f = r.figures;
	const KvStats &st = on.stats;
	assert_true(st.written_through > 0);
	assert_int_equal(st.write_through_failures, 0);
	assert_int_equal(f.written_through, st.written_through);
	assert_int_equal(f.clean_spills, st.clean_spills);
	assert_int_equal(f.clean_spills, f.spilled_pages); // every spill was clean
	assert_int_equal(st.storage.slabs_written, 2 * st.written_through); // no spill wrote
	assert_int_equal(f.bytes_written, st.written_through * r.params.policy.page_bytes);
	assert_int_equal(f.bytes_written_through, f.bytes_written);
	assert_int_equal(f.cpu_tokens, st.cpu_tokens);
	assert_int_equal(f.storage_tokens, st.storage_tokens);
	assert_int_equal(kernel_stats(st, 1, 0, false).pool[LLMCACHE_KV_POOL_CPU].spills, f.spilled_pages);
	// More written than without it (the pages that never left memory), and never a write at a spill.
	const KvReplayFigures f_off = replay(off.trace).figures;
	assert_true(f.bytes_written > f_off.bytes_written);
	assert_int_equal(f_off.written_through, 0);
	// The overrides: each trace replayed with the other's setting gives the other's figures.
	KvReplayOverrides wt;
	wt.write_through = 1;
	assert_string_equal(format_kv_replay(replay(off.trace, wt, false)).c_str(), format_kv_replay(r).c_str());
	wt.write_through = 0;
	assert_string_equal(format_kv_replay(replay(on.trace, wt, false)).c_str(), format_kv_replay(replay(off.trace)).c_str());
}

// An AERP session: 2 layers of 8 query heads on 4 KV heads x 16, fp32, each KV head keeping 24 tokens
// (sink 4, recent 8), d_model 40 (a token kept in 3 or 4 heads stores x: 40 < 2 x 16 x 3). 160 steps
// append a token to each layer (with x, but one in 5 without) and select all retained tokens of each
// layer; every third step also selects 20 of them, half of those through select_begin/select_end. One
// token in 6 leans along a direction the queries favour, so that some tokens are popular in every head.
constexpr uint32_t A_Q = 8, A_KV = 4, A_D = 16, A_DMODEL = 40, A_BUDGET = 24, A_STEPS = 160;

struct AerpRecorded {
	std::string trace;
	struct Sel {
		uint32_t layer;
		bool full;
		std::vector<uint32_t> positions;
		std::vector<uint8_t> heads; // positions x kv_heads
	};
	std::vector<Sel> selections;
	KvStats stats;
	std::vector<std::vector<uint32_t>> x_tokens; // [layer]: the retained tokens the store recomputes on read
	std::vector<std::vector<uint32_t>> decided;  // [layer]: retained tokens out of the recent window
};

AerpRecorded record_aerp(bool memory)
{
	KvShape s{LAYERS, A_Q, A_KV, A_D, CSD_FP32, 1024};
	KvOptions o;
	o.sink_tokens = 4;
	o.recent_tokens = 8;
	o.aerp.budget = A_BUDGET;
	o.aerp.d_model = A_DMODEL;
	std::mt19937 rng(11);
	std::normal_distribution<float> nd;
	const uint32_t dims = A_KV * A_D;
	o.aerp.w_k.resize((size_t)LAYERS * A_DMODEL * dims);
	o.aerp.w_v.resize(o.aerp.w_k.size());
	for (float &w : o.aerp.w_k)
		w = 0.1f * nd(rng);
	for (float &w : o.aerp.w_v)
		w = 0.1f * nd(rng);
	o.memory = {memory, 40};
	o.trace = trace_path();
	std::unique_ptr<KvStore> kv;
	std::string err;
	int r = KvStore::open(s, o, kv, err);
	if (r)
		fprintf(stderr, "open: %s\n", err.c_str());
	assert_int_equal(r, 0);
	std::vector<float> k(dims), v(dims), x(A_DMODEL), q(A_Q * A_D), dir(A_D);
	for (float &d : dir)
		d = nd(rng);
	AerpRecorded rec;
	auto select = [&](uint32_t l, uint32_t budget, bool split) {
		for (uint32_t i = 0; i < q.size(); i++)
			q[i] = nd(rng) + 0.8f * dir[i % A_D];
		KvSelection sel;
		if (split) {
			assert_int_equal(kv->select_begin(l, q.data(), budget), 0);
			assert_int_equal(kv->select_end(sel), 0);
		} else {
			assert_int_equal(kv->select(l, q.data(), budget, sel), 0);
		}
		rec.selections.push_back({l, budget >= 1000, sel.positions, sel.heads});
	};
	for (uint32_t t = 0; t < A_STEPS; t++) {
		for (uint32_t l = 0; l < LAYERS; l++) {
			for (uint32_t i = 0; i < dims; i++)
				k[i] = nd(rng) + (t % 6 == 1 ? 2.0f * dir[i % A_D] : 0.0f);
			for (float &e : v)
				e = nd(rng);
			for (float &e : x)
				e = nd(rng);
			assert_int_equal(kv->append(l, k.data(), v.data(), t % 5 == 2 ? nullptr : x.data()), 0);
		}
		for (uint32_t l = 0; l < LAYERS; l++) {
			select(l, 1000, t % 2);
			if (t % 3 == 0)
				select(l, 20, t % 2 == 0);
		}
	}
	rec.stats = kv->stats();
	// Which retained tokens the store holds as x: reading one recomputes it, and nothing else does.
	rec.x_tokens.resize(LAYERS);
	rec.decided.resize(LAYERS);
	std::vector<uint8_t> kb(kv->row_bytes()), vb(kv->row_bytes());
	for (uint32_t l = 0; l < LAYERS; l++)
		for (uint32_t pos = 0; pos + o.recent_tokens < kv->tokens(l); pos++) {
			if (!kv->resident(l, pos))
				continue;
			const uint64_t before = kv->stats().aerp_recomputed;
			assert_int_equal(kv->read(l, pos, kb.data(), vb.data()), 0);
			rec.decided[l].push_back(pos);
			if (kv->stats().aerp_recomputed != before)
				rec.x_tokens[l].push_back(pos);
		}
	kv.reset(); // closes the trace
	rec.trace = slurp(trace_path());
	unlink(trace_path().c_str());
	return rec;
}

// Every eviction, format decision and selection of the replay is the store's, and so are the counts.
void aerp_same_as_store(bool memory)
{
	const AerpRecorded rec = record_aerp(memory);
	assert_non_null(std::strstr(rec.trace.c_str(), " aerp_budget=24 d_model=40"));
	assert_true((std::strstr(rec.trace.c_str(), " memory=1 route_threshold=40\n") != nullptr) == memory);
	for (const char *ev : {"\na ", "\ni ", "\nl ", "\ns ", "\nf ", "\ne "})
		assert_non_null(std::strstr(rec.trace.c_str(), ev));
	// The header reads back as written.
	{
		std::istringstream in(rec.trace);
		KvTraceReader rd(in);
		KvTraceHeader h;
		std::string err;
		assert_int_equal(rd.open(h, err), 0);
		assert_int_equal(h.aerp_budget, A_BUDGET);
		assert_int_equal(h.memory, memory);
		assert_string_equal(format_kv_trace_header(h).c_str(),
				    rec.trace.substr(0, rec.trace.find('\n', rec.trace.find("\npolicy ") + 1) + 1).c_str());
	}
	const KvReplayResult r = replay(rec.trace);
	if (!r.divergence.empty())
		fprintf(stderr, "%s\n", r.divergence.c_str());
	assert_string_equal(r.divergence.c_str(), "");
	// Walk the replay's decisions: each selection is the store's; between two full selects of a layer,
	// the pairs the store's keep mask lost are the pairs the replay evicted; the forms are decided in
	// position order, one per append once past the recent window.
	std::vector<std::set<std::pair<uint32_t, uint32_t>>> alive(LAYERS), evicted(LAYERS);
	std::vector<std::vector<uint32_t>> appended(LAYERS);
	std::vector<std::map<uint32_t, bool>> form(LAYERS);
	std::vector<uint32_t> full_selects(LAYERS, 0);
	size_t i = 0;
	uint64_t pairs = 0;
	for (const KvTraceEvent &e : r.decisions) {
		if (e.kind == KvTraceEvent::Evicted) {
			for (const KvTracePair &p : e.pairs) {
				assert_true(evicted[e.layer].insert({p.pos, p.head}).second);
				assert_true(p.pos >= 4); // never a sink token
			}
			pairs += e.pairs.size();
		} else if (e.kind == KvTraceEvent::Format) {
			assert_int_equal(e.pos, form[e.layer].size());
			form[e.layer][e.pos] = e.x;
		} else if (e.kind == KvTraceEvent::Selected) {
			assert_true(i < rec.selections.size());
			const AerpRecorded::Sel &sel = rec.selections[i++];
			assert_int_equal(sel.layer, e.layer);
			assert_true(e.items == sel.positions);
			if (!sel.full)
				continue;
			// Token full_selects[layer] was appended since the last full select.
			auto &a = alive[e.layer];
			for (uint32_t h = 0; h < A_KV; h++)
				a.insert({full_selects[e.layer], h});
			full_selects[e.layer]++;
			for (const auto &p : evicted[e.layer])
				assert_int_equal(a.erase(p), 1);
			evicted[e.layer].clear();
			std::set<std::pair<uint32_t, uint32_t>> store;
			for (size_t j = 0; j < sel.positions.size(); j++)
				for (uint32_t h = 0; h < A_KV; h++)
					if (sel.heads[j * A_KV + h])
						store.insert({sel.positions[j], h});
			assert_true(store == a);
		}
	}
	assert_int_equal(i, rec.selections.size());
	const KvReplayFigures &f = r.figures;
	const KvStats &st = rec.stats;
	assert_true(st.aerp_evicted_heads > 100);
	assert_int_equal(pairs, st.aerp_evicted_heads);
	assert_int_equal(f.aerp_evicted_heads, st.aerp_evicted_heads);
	assert_int_equal(f.aerp_evicted_tokens, st.aerp_evicted_tokens);
	assert_int_equal(f.aerp_tokens, st.aerp_tokens);
	assert_true(st.aerp_x_tokens > 0 && st.aerp_x_tokens < st.aerp_tokens);
	assert_int_equal(f.aerp_x_tokens, st.aerp_x_tokens);
	assert_int_equal(f.aerp_bytes, st.aerp_bytes);
	assert_int_equal(f.aerp_recomputed, st.aerp_recomputed);
	assert_int_equal(f.memory_folded, st.memory_folded);
	assert_int_equal(f.memory_bytes, st.memory_bytes);
	assert_int_equal(f.memory_reads, st.memory_reads);
	assert_int_equal(f.memory_short, st.memory_short);
	assert_int_equal(f.selects, st.selects);
	assert_int_equal(f.appends, LAYERS * A_STEPS);
	assert_int_equal(f.appends_x, LAYERS * (A_STEPS - A_STEPS / 5));
	assert_int_equal(f.aerp_decided_x + f.aerp_decided_kv, LAYERS * (A_STEPS - 8));
	assert_true(f.aerp_decided_x > 0 && f.aerp_decided_kv > 0);
	if (memory) {
		assert_int_equal(st.memory_folded, st.aerp_evicted_heads);
		assert_true(st.memory_reads > 0 && st.memory_short > 0);
	} else {
		assert_int_equal(f.memory_folded + f.memory_bytes + f.memory_reads + f.memory_short, 0);
	}
	// Token by token, the form of every retained token out of the recent window is the store's.
	for (uint32_t l = 0; l < LAYERS; l++) {
		assert_int_equal(form[l].size(), A_STEPS - 8);
		std::vector<uint32_t> x_tokens;
		for (uint32_t pos : rec.decided[l])
			if (form[l].at(pos))
				x_tokens.push_back(pos);
		assert_true(x_tokens == rec.x_tokens[l]);
	}
	// Twice the same bytes, as recorded and with another select budget.
	assert_string_equal(transcript(replay(rec.trace)).c_str(), transcript(r).c_str());
	KvReplayOverrides o;
	o.select_budget = 16;
	const std::string a = transcript(replay(rec.trace, o, false)), b = transcript(replay(rec.trace, o, false));
	assert_string_equal(a.c_str(), b.c_str());
	assert_true(replay(rec.trace, o, false).figures.selected < f.selected);
	// The other parameters are the recorded run's: varying them is refused.
	KvReplayOverrides other;
	other.recent_tokens = 16;
	std::istringstream in(rec.trace);
	KvReplayResult ignored;
	std::string err;
	assert_int_equal(replay_kv_trace(in, other, false, false, ignored, err), -EINVAL);
	assert_non_null(std::strstr(err.c_str(), "only the select budget may vary"));
}

void replay__aerp_store_trace__same_evictions_forms_and_counts(void **) { aerp_same_as_store(false); }

void replay__aerp_memory_store_trace__same_evictions_and_folds(void **) { aerp_same_as_store(true); }

// The trace with line `at` (1-based) replaced by `line`.
std::string with_line(const std::string &trace, uint64_t at, const std::string &line)
{
	std::istringstream in(trace);
	std::string l, out;
	for (uint64_t n = 1; std::getline(in, l); n++)
		out += (n == at ? line : l) + "\n";
	return out;
}

// The number of the first line that starts with prefix and satisfies pred.
uint64_t find_line(const std::string &trace, const std::string &prefix, bool (*pred)(const std::string &) = nullptr)
{
	std::istringstream in(trace);
	std::string l;
	for (uint64_t n = 1; std::getline(in, l); n++)
		if (l.compare(0, prefix.size(), prefix) == 0 && (!pred || pred(l)))
			return n;
	return 0;
}

std::string line_at(const std::string &trace, uint64_t at)
{
	std::istringstream in(trace);
	std::string l;
	for (uint64_t n = 1; std::getline(in, l) && n < at; n++)
		;
	return l;
}

void replay__aerp_altered_eviction_or_form__divergence_at_its_line(void **)
{
	const AerpRecorded rec = record_aerp(true);
	// Drop the last pair of the first eviction of two pairs or more.
	const uint64_t at = find_line(rec.trace, "e ", [](const std::string &l) { return std::count(l.begin(), l.end(), ' ') >= 3; });
	assert_true(at > 0);
	const std::string e = line_at(rec.trace, at);
	KvReplayResult r = replay(with_line(rec.trace, at, e.substr(0, e.rfind(' '))));
	std::string want = "(trace line " + std::to_string(at) + "): recorded 'e ";
	if (r.divergence.find(want) == std::string::npos)
		fprintf(stderr, "divergence: %s\n", r.divergence.c_str());
	assert_true(r.divergence.find(want) != std::string::npos);
	// A format decision flipped.
	const uint64_t fat = find_line(rec.trace, "f ", [](const std::string &l) { return l.back() == 'x'; });
	assert_true(fat > 0);
	const std::string fl = line_at(rec.trace, fat);
	r = replay(with_line(rec.trace, fat, fl.substr(0, fl.size() - 1) + "kv"));
	want = "(trace line " + std::to_string(fat) + "): recorded 'f ";
	if (r.divergence.find(want) == std::string::npos)
		fprintf(stderr, "divergence: %s\n", r.divergence.c_str());
	assert_true(r.divergence.find(want) != std::string::npos);
	// A whole eviction line left out: the next decision differs, or the replay has one more.
	std::string dropped;
	{
		std::istringstream in(rec.trace);
		std::string l;
		for (uint64_t n = 1; std::getline(in, l); n++)
			if (n != at)
				dropped += l + "\n";
	}
	assert_false(replay(dropped).divergence.empty());
}

void replay__aerp_malformed_lines__refused_with_line_number(void **)
{
	const AerpRecorded rec = record_aerp(false);
	const uint64_t e_at = find_line(rec.trace, "e "), l_at = find_line(rec.trace, "l "), f_at = find_line(rec.trace, "f "),
		       i_at = find_line(rec.trace, "i ");
	assert_true(e_at && l_at && f_at && i_at);
	const std::string l_line = line_at(rec.trace, l_at);
	const std::string pre = "policy page_tokens=32 sink_tokens=4 recent_tokens=8 cpu_budget=268435456 beta=0 device=0 estimator=exact";
	assert_true(line_at(rec.trace, 3).compare(0, pre.size(), pre) == 0);
	struct Case {
		uint64_t at;
		std::string line, error;
	} cases[] = {
		{e_at, "e 0 9-1", "pair 1 '9-1' is not POS:HEAD with POS below 1024 and HEAD below 4, heads in ascending order"},
		{e_at, "e 0 9:4", "pair 1 '9:4' is not POS:HEAD"},
		{e_at, "e 0 9:2 10:1", "pair 2 '10:1' is not POS:HEAD"},
		{e_at, "e 0", "expected 'e LAYER POS:HEAD...' with LAYER below 2 and at least one pair"},
		{f_at, "f 0 3 y", "expected 'f LAYER POS x|kv' with LAYER below 2 and POS below 1024"},
		{l_at, l_line.substr(0, l_line.rfind(' ')), "logits and has"},
		{l_at, l_line.substr(0, l_line.rfind(' ')) + " z", "is not a number"},
		{l_at, "l 2 1000 1", "expected 'l LAYER BUDGET N LOGIT...' with LAYER below 2"},
		{i_at, "i 0 0", "expected 'i LAYER COUNT' with LAYER below 2 and COUNT > 0"},
		{i_at, "q 0 9 5 2 1 0.5", "unknown event 'q' (expected a, i, l, s, f or e in an AERP session's trace); 'q' is not an event of an AERP session"},
		{3, pre + " aerp_budget=24", "the 'policy' fields aerp_budget and d_model, and memory and route_threshold, go in pairs"},
		{3, pre + " aerp_budget=8 d_model=40", "invalid AERP budget 8"},
		{3, pre + " aerp_budget=24 d_model=40 memory=1 route_threshold=1024", "below max_context (1024)"},
		{3, pre + " memory=1 route_threshold=0", "the 'policy' field memory needs aerp_budget"},
		{3, pre + " d_model=40 aerp_budget=24", "expected one of write_through=, aerp_budget=, d_model=, memory=, route_threshold= (in this order, each once)"},
	};
	for (const Case &c : cases) {
		std::istringstream in(with_line(rec.trace, c.at, c.line));
		KvReplayResult r;
		std::string err;
		assert_int_equal(replay_kv_trace(in, {}, false, true, r, err), -EINVAL);
		const std::string want = "line " + std::to_string(c.at) + ": ";
		if (err.compare(0, want.size(), want) != 0 || err.find(c.error) == std::string::npos)
			fail_msg("line %llu '%s': got '%s', want '%s...%s'", (unsigned long long)c.at, c.line.substr(0, 60).c_str(),
				 err.c_str(), want.c_str(), c.error.c_str());
	}
	// AERP events in a trace without AERP, and x in a session that does not recompute.
	const Recorded plain = record(false);
	const std::string plain_bad = with_line(plain.trace, 4, "e 0 9:1");
	std::istringstream in(plain_bad);
	KvReplayResult r;
	std::string err;
	assert_int_equal(replay_kv_trace(in, {}, false, false, r, err), -EINVAL);
	assert_string_equal(err.c_str(), "line 4: unknown event 'e' (expected a, q, s, p, v or w); 'e' is an AERP session's event, "
					 "and the 'policy' line has no aerp_budget");
	std::string no_x = rec.trace;
	no_x.replace(no_x.find(" d_model=40"), 11, " d_model=0");
	std::istringstream in2(no_x);
	assert_int_equal(replay_kv_trace(in2, {}, false, false, r, err), -EINVAL);
	const uint64_t x_at = find_line(rec.trace, "f ", [](const std::string &l) { return l.back() == 'x'; });
	const std::string want = "line " + std::to_string(std::min(i_at, x_at)) + ": ";
	if (err.compare(0, want.size(), want) != 0 || err.find("does not recompute (d_model=0)") == std::string::npos)
		fail_msg("got '%s'", err.c_str());
}

int teardown(void **)
{
	cleanup_devices();
	return 0;
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(replay__store_trace__same_decisions_step_by_step),
		cmocka_unit_test(replay__twice__byte_identical),
		cmocka_unit_test(replay__memory_only_store__same_decisions),
		cmocka_unit_test(replay__altered_decision__divergence_at_its_line),
		cmocka_unit_test(replay__write_through__same_decisions_and_same_writes),
		cmocka_unit_test(replay__aerp_store_trace__same_evictions_forms_and_counts),
		cmocka_unit_test(replay__aerp_memory_store_trace__same_evictions_and_folds),
		cmocka_unit_test(replay__aerp_altered_eviction_or_form__divergence_at_its_line),
		cmocka_unit_test(replay__aerp_malformed_lines__refused_with_line_number),
	};
	return cmocka_run_group_tests(tests, nullptr, teardown);
}
