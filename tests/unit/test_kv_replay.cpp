// SPDX-License-Identifier: MIT
// The KV replay against the store: a real KvStore (backend none, a device file from kv_test_device.hpp)
// records a KV trace of a prefill and decode steps; the replay over that trace makes exactly the
// store's decisions (the selections it returned, step by step, the pages it spilled and brought back,
// what is in memory at the end) and its counts (pages spilled again without a write are clean spills,
// not bytes written, as the store and its sysfs record count them), two replays are byte-identical, and
// a trace whose decision was altered is caught at its line. With write-through (full pages written as
// they fill), the store's decisions are the same, and the replay counts the same writes: the pages
// written at append time and the spills that then write nothing.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"

#include "kv/kernel_stats.hpp"
#include "kv/kv_replay.hpp"
#include "kv/kv_store.hpp"

#include <unistd.h>

#include <cstring>
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
	};
	return cmocka_run_group_tests(tests, nullptr, teardown);
}
