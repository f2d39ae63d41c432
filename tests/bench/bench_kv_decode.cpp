// SPDX-License-Identifier: MIT
// make bench: decode-step latency and bytes moved over the host bus for LLaMA-2-7B-shaped KV
// (32 heads x head dim 128, fp16) at contexts of 4K-32K tokens, batch 1 and 8, with the `none`
// backend (spilled keys read back to the host and scored there) against `emulated` (the scoring kernel
// run on a thread that plays the SmartSSD's FPGA: it reads the K slabs itself and is paced to the
// configured internal bandwidth and compute rate; it is an EMULATION, not a SmartSSD).
// Each sequence of the batch is one KvStore with its own region of the device; a step appends the
// new token and selects (top-k + sink + recent) on every measured layer, the batch's selects issued
// together (select_begin for all, then select_end). Keys are random fp16 except on one page in
// HEAVY (default 16), whose keys lean toward the query's direction: the concentrated importance of
// real attention (H2O's heavy hitters), so the top-k falls mostly on a few pages that the pool update
// keeps in memory; HEAVY = 0 gives uniformly random keys, the worst case for page-granular fetch. Only the
// blocks of a spilled page's slabs that hold selected rows are read; the fetch columns show those bytes
// against what reading the same pages whole would move.
// The query is a fixed direction plus a small per-step change. The full model (32 layers x 32K x batch 8 is
// 128 GiB of KV) does not fit this machine's time or disk: LAYERS layers are measured and the figures
// per layer are multiplied by 32 for the model, labelled as such (measured totals when LAYERS is 32).
// A third run, `ideal`, keeps all of the KV in memory (no device in the selection).
// Next to each measured run, the SmartSSD timing model (csd/timing_model.hpp) predicts what a card would
// do with the same work: the bytes, kernel runs and tokens scored that the run measured, the host's
// scoring rate measured in it, and the engine's compute per layer measured here beforehand (one
// LLaMA-2-7B layer's matrix-vector products over fp16 weights and the attention over the selected KV,
// with the scoring kernel's dot product). Those are PREDICTIONS: no SmartSSD was run.
// Last, Kelle's AERP (kv/policy_aerp.hpp) on one such layer in memory (`bench_kv_decode --aerp` runs that
// section alone): bytes stored per token with eviction and recomputation, and what recomputing K and V
// from x costs on this host against the read of the bytes it saves.
// `bench_kv_decode --planes DEVICE` runs two-plane precision alone (Documentation/kv.md, "Two-plane
// precision"): device bytes read per select with the option off and at a few full-precision fractions,
// and the attention-output error the truncated V rows cost against the same selection at full precision.
// `bench_kv_decode --memory` runs EdgeInfinite's compressed memory alone (Documentation/kv.md,
// "EdgeInfinite's compressed memory"): on one such layer under AERP eviction at a few budgets, the
// attention output over the kept tokens only, and combined with the memory's readout, against exact
// attention over every token.
#include "csd/select_bounds_first.hpp"
#include "csd/timing_model.hpp"
#include "kv/kv_store.hpp"
#include "kv/policy_aerp.hpp"
#include "kv/policy_memory.hpp"
#include "kv/policy_select.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "machine.hpp"

using namespace llmcache;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t HEADS = 32, HEAD_DIM = 128, MODEL_LAYERS = 32, ROWS = 257;
double g_margin = kv::KvOptions{}.device_margin; // the bounds run's margin (7th argument)
uint32_t g_warmup = 1; // decode steps before the measured ones (8th argument)
bool g_write_through = false; // the device runs write full pages through (9th argument; kv.md, "Writing full pages through")

[[noreturn]] void die(const std::string &msg)
{
	std::fprintf(stderr, "bench_kv_decode: %s\n", msg.c_str());
	std::exit(1);
}

std::vector<uint32_t> parse_list(const char *s)
{
	std::vector<uint32_t> v;
	for (const char *p = s; *p;) {
		char *end;
		v.push_back((uint32_t)std::strtoul(p, &end, 10));
		p = *end ? end + 1 : end;
	}
	return v;
}

struct Result {
	double step_s = 0;			      // median wall time of a decode step over the measured layers
	csd::LayerWork work;			      // per step and layer, the batch's: what the timing model is fed
	double host_score_rate = 0;		      // tokens/s of the host's scoring path in this run
	double bus_bytes = 0, device_bytes = 0;	      // per step: host bus (pool reads + writes + Score Blocks), in-device reads
	// per step: bytes read to fetch the selected KV (the selected rows' blocks; whole slabs of pages
	// coming back to memory), and what fetching the same pages' K and V slabs whole would read
	double fetch_bytes = 0, whole_page_bytes = 0;
	double spilled_fraction = 0;
	// per step: pages the pool update brought back to memory, pages spilled, and of those the ones
	// spilled without a write (clean demotion: their device copy was kept)
	double promoted_pages = 0, spilled_pages = 0, clean_spills = 0;
	uint32_t layers = 1; // measured
	// Attention-mass recall of the selection against exact top-k at the same budget (sequence 0, layer 0,
	// mean over the measured steps): sum over the selection of each query head's softmax weight over all
	// tokens, averaged over heads, divided by the same for the exact selection. 1 for exact selections.
	double recall = 0;
	double same = 0; // the fraction of those steps whose selection was the exact top-k itself
	// The appends (prefill) of the whole batch, all measured layers: bytes written to the device, of
	// which pages written through as they filled, and wall time.
	double append_bytes = 0, append_written_through = 0, append_s = 0;
};

// Structured synthetic keys (bench_kv_decode's decode runs): which positions lean toward the query.
// Sink tokens (the first 4), heavy hitters (every token of one page in `heavy`, as before, and one
// scattered token in 97), and a local window (one token in 3 of the last 2.5% of the context). The
// others are random. `heavy` 0: all random (uniform importance).
bool leans(uint32_t pos, uint32_t context, uint32_t heavy)
{
	if (!heavy)
		return false;
	return pos < 4 || (pos / 32) % heavy == heavy / 2 || pos % 97 == 13 || (pos >= context - context / 40 && pos % 3 == 0);
}

// The mass of each query head's softmax (over every token of keys, rows of HEADS x HEAD_DIM fp16, scaled
// by 1/sqrt(HEAD_DIM)) on the positions of sel, averaged over heads.
double attention_mass(const std::vector<float> &q, const std::vector<const uint16_t *> &keys, const std::vector<uint32_t> &sel)
{
	const double scale = 1 / std::sqrt((double)HEAD_DIM);
	std::vector<double> lg(keys.size());
	double mass = 0;
	for (uint32_t h = 0; h < HEADS; h++) {
		double mx = -1e300, sum = 0, in = 0;
		for (size_t t = 0; t < keys.size(); t++) {
			double d = 0;
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				d += q[h * HEAD_DIM + e] * csd_half_to_float(keys[t][h * HEAD_DIM + e]);
			mx = std::max(mx, lg[t] = d * scale);
		}
		for (double &l : lg)
			sum += (l = std::exp(l - mx));
		for (uint32_t t : sel)
			in += lg[t];
		mass += in / sum / HEADS;
	}
	return mass;
}

Result run(const std::string &device, const std::string &backend, uint32_t context, uint32_t batch, uint32_t layers,
	   uint32_t steps, uint32_t heavy, const std::vector<uint16_t> &rows, const std::vector<uint16_t> &heavy_rows,
	   const std::vector<float> &dir)
{
	const uint64_t row = (uint64_t)HEADS * HEAD_DIM * 2, kv_bytes = (uint64_t)context * layers * 2 * row;
	const uint64_t slab = (64 + 8ull * HEADS * HEAD_DIM + 32 * row + 4095) / 4096 * 4096; // a K slab of 32 tokens
	kv::KvShape shape{layers, HEADS, HEADS, HEAD_DIM, CSD_FP16, context + steps + 64};
	kv::KvOptions o;
	const bool ideal = backend == "ideal";
	o.cpu_budget = ideal ? 2 * kv_bytes : kv_bytes / 4; // ideal: all of it in memory; else a quarter stays
	o.recent_tokens = context / 20;
	o.device = device;
	o.device_capacity = (kv_bytes + kv_bytes / 3 + (64u << 20)) / 4096 * 4096; // spilled 3/4, slab rounding
	o.backend = ideal ? "none" : backend == "bounds" ? "emulated" : backend;
	if (backend == "bounds")
		o.device_select = csd::DeviceSelect::BoundsFirst;
	o.write_through = g_write_through && !ideal; // ideal never spills: nothing to write
	o.device_margin = g_margin;
	const bool host_reads_k = o.backend == "none";
	const csd::KvGeometry geo{HEADS, HEADS, HEAD_DIM, CSD_FP16, o.page_tokens};
	const uint64_t bound_bytes = (uint64_t)csd::bounds_layout(geo).bound_blocks * 4096;
	std::vector<std::unique_ptr<kv::KvStore>> seqs(batch);
	for (uint32_t b = 0; b < batch; b++) {
		o.device_offset = b * o.device_capacity;
		std::string err;
		if (kv::KvStore::open(shape, o, seqs[b], err))
			die(err);
	}
	const uint16_t *r = rows.data();
	auto key = [&](uint32_t l, uint32_t pos) {
		return (leans(pos, context, heavy) ? heavy_rows.data() : r) + (size_t)((pos * 7 + l) % ROWS) * HEADS * HEAD_DIM;
	};
	auto append = [&](kv::KvStore &s, uint32_t l, uint32_t pos) {
		const uint16_t *k = key(l, pos);
		const uint16_t *v = r + (size_t)((pos * 13 + l + 1) % ROWS) * HEADS * HEAD_DIM;
		const int e = s.append(l, k, v);
		if (e < 0)
			die("append failed: " + s.error());
	};
	const auto a0 = Clock::now();
	for (uint32_t b = 0; b < batch; b++)
		for (uint32_t t = 0; t < context; t++)
			for (uint32_t l = 0; l < layers; l++)
				append(*seqs[b], l, t);
	const double append_s = std::chrono::duration<double>(Clock::now() - a0).count();
	double append_bytes = 0, append_wt = 0;
	for (auto &s : seqs) {
		const kv::KvStats st = s->stats();
		append_bytes += (double)st.storage.bytes_written;
		append_wt += (double)st.written_through;
	}
	std::vector<float> q(HEADS * HEAD_DIM);
	const uint32_t budget = context / 10; // HillInfer's importance rate of 10%
	std::vector<double> times;
	double bus = 0, dev = 0, fetch = 0, whole = 0, host_tokens = 0, host_ns = 0, recall = 0, same = 0;
	double promoted = 0, spills = 0, clean = 0;
	std::vector<uint32_t> seq0; // sequence 0's selection of layer 0 in this step
	csd::LayerWork work;
	kv::KvSelection sel;
	for (uint32_t step = 0; step < g_warmup + steps; step++) {
		for (size_t i = 0; i < q.size(); i++)
			q[i] = dir[i] + 0.25f * ((float)(((i + step * 31) * 2654435761u) % 1024) / 512.0f - 1.0f);
		std::vector<kv::KvStats> before;
		for (auto &s : seqs)
			before.push_back(s->stats());
		const auto t0 = Clock::now();
		for (uint32_t l = 0; l < layers; l++) {
			for (auto &s : seqs) {
				append(*s, l, s->tokens(l));
				if (s->select_begin(l, q.data(), budget) < 0)
					die("select failed: " + s->error());
			}
			for (size_t b = 0; b < seqs.size(); b++) {
				if (seqs[b]->select_end(sel) < 0)
					die("select failed: " + seqs[b]->error());
				if (b == 0 && l == 0)
					seq0 = sel.positions;
			}
		}
		const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
		if (step < g_warmup)
			continue; // the warm-up settles the pools (pages promoted and spilled)
		times.push_back(dt);
		{ // recall against exact top-k over every token of sequence 0's layer 0, outside the timed part
			const uint32_t n = seqs[0]->tokens(0);
			const kv::policy::SelectPlan plan = kv::policy::plan_select(n, o.sink_tokens, o.recent_tokens, budget);
			std::vector<const uint16_t *> keys(n);
			std::vector<csd_score> all;
			for (uint32_t t = 0; t < n; t++) {
				keys[t] = key(0, t);
				csd_score sc;
				uint32_t blocks = 0;
				score_exact(q.data(), reinterpret_cast<const uint32_t *>(keys[t]), 1, t, HEADS, HEADS, HEAD_DIM, CSD_FP16, 1,
					    &sc, &blocks);
				all.push_back(sc);
			}
			const std::vector<uint32_t> exact = kv::policy::select_tokens(plan, all);
			recall += (seq0 == exact ? 1.0 : attention_mass(q, keys, seq0) / attention_mass(q, keys, exact)) / steps;
			same += (seq0 == exact) / (double)steps;
		}
		for (size_t b = 0; b < seqs.size(); b++) {
			const kv::KvStats a = seqs[b]->stats(), &p = before[b];
			const double scored = (double)(a.scored_storage - p.scored_storage), pages = scored / o.page_tokens;
			const double read = (double)(a.storage.bytes_read - p.storage.bytes_read);
			const double reads = (double)(a.storage.runs_read - p.storage.runs_read + a.storage.slabs_read - p.storage.slabs_read);
			bus += read + (double)(a.storage.bytes_written - p.storage.bytes_written);
			// none reads every scored page's K slab through the pool before the fetch
			const double k_read_back = host_reads_k ? pages * (double)slab : 0;
			fetch += read - k_read_back;
			host_tokens += (double)(a.scored_cpu - p.scored_cpu);
			host_ns += (double)(a.cpu_score_ns - p.cpu_score_ns);
			work.host_pool_tokens += (double)(a.scored_cpu - p.scored_cpu);
			work.fetch_bytes += read - k_read_back;
			work.fetch_reads += reads - (host_reads_k ? pages : 0);
			work.spill_bytes += (double)(a.storage.bytes_written - p.storage.bytes_written);
			if (host_reads_k) {
				work.host_read_bytes += k_read_back;
				work.host_read_tokens += scored;
				work.host_reads += pages;
			} else {
				// What the device read and scored, as it counted it: whole K slabs (exact), or every
				// page's bounds blocks and the chosen pages' key blocks (bounds-first).
				const csd::DeviceCounters &da = a.device, &dp = p.device;
				const double bound_pages = (double)(da.bound_pages - dp.bound_pages);
				const double flash = (double)(da.flash_bytes - dp.flash_bytes), entries = (double)(da.score_entries - dp.score_entries);
				work.query_bytes += (double)(a.storage_runs - p.storage_runs) * HEADS * HEAD_DIM * sizeof(float);
				work.bound_flash_bytes += bound_pages * (double)bound_bytes;
				work.bound_macs += bound_pages * 2.0 * HEADS * HEAD_DIM;
				work.bound_pages += bound_pages;
				work.bound_runs += bound_pages > 0 ? (double)(a.storage_runs - p.storage_runs) : 0; // one run over all bounds
				work.device_flash_bytes += flash - bound_pages * (double)bound_bytes;
				work.device_tokens += (double)(da.exact_tokens - dp.exact_tokens);
				work.kernel_runs += (double)(da.exact_pages - dp.exact_pages); // the xrt backend runs the kernel once per page
				work.score_bytes += entries * sizeof(csd_score);
				bus += entries * sizeof(csd_score);
				dev += flash;
			}
			whole += (double)(a.fetched_pages - p.fetched_pages) * 2 * (double)slab;
			promoted += (double)(a.promoted_pages - p.promoted_pages);
			clean += (double)(a.clean_spills - p.clean_spills);
			spills += (double)(a.clean_spills - p.clean_spills) + (double)(a.storage.slabs_written - p.storage.slabs_written) / 2;
		}
	}
	Result res;
	std::sort(times.begin(), times.end());
	res.step_s = times[times.size() / 2];
	res.bus_bytes = bus / steps;
	res.device_bytes = dev / steps;
	res.fetch_bytes = fetch / steps;
	res.whole_page_bytes = whole / steps;
	res.promoted_pages = promoted / steps;
	res.spilled_pages = spills / steps;
	res.clean_spills = clean / steps;
	uint64_t spilled = 0, pages = 0;
	for (auto &s : seqs) {
		const kv::KvStats st = s->stats();
		spilled += st.spilled_pages;
		pages += st.spilled_pages + st.cpu_pages;
	}
	res.spilled_fraction = pages ? (double)spilled / pages : 0;
	const double per_layer = 1.0 / ((double)steps * layers);
	res.recall = recall;
	res.same = same;
	res.append_bytes = append_bytes;
	res.append_written_through = append_wt;
	res.append_s = append_s;
	for (double *q : {&work.bound_flash_bytes, &work.bound_macs, &work.bound_pages, &work.bound_runs,
			  &work.query_bytes, &work.device_flash_bytes, &work.device_tokens, &work.kernel_runs, &work.score_bytes,
			  &work.host_pool_tokens, &work.host_read_bytes, &work.host_read_tokens, &work.host_reads, &work.fetch_bytes,
			  &work.fetch_reads, &work.spill_bytes})
		*q *= per_layer;
	work.macs_per_token = HEADS * HEAD_DIM; // the exact kernel: one multiply-accumulate per key element
	res.work = work;
	res.layers = layers;
	res.host_score_rate = host_ns > 0 ? host_tokens / (host_ns * 1e-9) : 0;
	return res;
}

// The engine's compute of one layer for a batch, measured on this host: the matrix-vector products of a
// LLaMA-2-7B layer (W_q, W_k, W_v, W_o and the FFN's W_gate, W_up: 4096 inputs; W_down: 11008) over
// fp16 weights, read once per step in tiles of 64 rows that every sequence of the batch uses while they
// are in cache, then each sequence's attention over its selected KV (a pass over K and one over V).
// The dot products are the scoring kernel's (csd/kernels/score_exact.cpp), which runs near this host's
// memory-read bound. The fastest of 5: other work on a shared machine only ever slows it down.
class EngineLayer {
public:
	static constexpr uint32_t DIM = HEADS * HEAD_DIM, FFN = 11008, IN_ROWS = 4 * DIM + 2 * FFN, TILE = 64;
	EngineLayer() : w_in_((size_t)IN_ROWS * DIM / 2), w_down_((size_t)DIM * FFN / 2), x_(FFN), out_(IN_ROWS)
	{
		uint32_t v = 2463534242u;
		auto fill = [&](std::vector<uint32_t> &w) {
			for (uint32_t &e : w) {
				v ^= v << 13, v ^= v >> 17, v ^= v << 5;
				e = (v & 0x83ff83ffu) | 0x2c002c00u; // two fp16 of magnitude below 0.25
			}
		};
		fill(w_in_);
		fill(w_down_);
		for (size_t i = 0; i < x_.size(); i++)
			x_[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
	}
	double seconds(uint32_t batch, uint32_t kv_rows)
	{
		const size_t rows_words = (size_t)kv_rows * DIM / 2; // each sequence's K, then its V
		if (kv_.size() < 2 * batch * rows_words)
			kv_.assign(2 * batch * rows_words, 0x2c002c00u);
		double best = 0;
		for (int rep = 0; rep < 5; rep++) {
			const auto t0 = Clock::now();
			matvec(w_in_.data(), IN_ROWS, DIM / HEAD_DIM, batch);
			matvec(w_down_.data(), DIM, FFN / HEAD_DIM, batch);
			for (uint32_t b = 0; b < batch; b++)
				for (uint32_t pass = 0; pass < 2; pass++) // q.K, then the weighted sum over V
					for (uint32_t r = 0; r < kv_rows; r += TILE)
						dot(kv_.data() + (2 * b + pass) * rows_words + (size_t)r * DIM / 2,
						    std::min(TILE, kv_rows - r), DIM / HEAD_DIM);
			const double t = std::chrono::duration<double>(Clock::now() - t0).count();
			best = rep ? std::min(best, t) : t;
		}
		return best;
	}

private:
	void dot(const uint32_t *rows, uint32_t n, uint32_t heads)
	{
		uint32_t done = 0;
		score_exact(x_.data(), rows, n, 0, heads, heads, HEAD_DIM, CSD_FP16, TILE, out_.data(), &done);
	}
	void matvec(const uint32_t *w, uint32_t rows, uint32_t heads, uint32_t batch)
	{
		const size_t words = (size_t)heads * HEAD_DIM / 2;
		for (uint32_t r = 0; r < rows; r += TILE)
			for (uint32_t b = 0; b < batch; b++)
				dot(w + r * words, std::min(TILE, rows - r), heads);
	}
	std::vector<uint32_t> w_in_, w_down_, kv_;
	std::vector<float> x_;
	std::vector<csd_score> out_;
};

// The same layer's compute on HillInfer's GPU (an RTX 4090), predicted from its published peaks
// (csd::gpu_layer_compute_s): the weights once for the batch, each sequence's selected K and V rows.
double gpu_engine_seconds(uint32_t batch, uint32_t kv_rows)
{
	const double weights = (double)EngineLayer::IN_ROWS * EngineLayer::DIM + (double)EngineLayer::DIM * EngineLayer::FFN;
	const double kv_elements = 2.0 * batch * kv_rows * EngineLayer::DIM; // K and V
	return csd::gpu_layer_compute_s(csd::GpuEngine{}, 2 * weights, 2 * kv_elements, 2 * (batch * weights + kv_elements));
}

struct Modelled {
	uint32_t context, batch;
	const char *backend;
	Result r;
	double engine_s; // the engine's compute of one layer for the batch, measured here
	double gpu_s;	 // the same on HillInfer's GPU, predicted
};

// The timing model's prediction for each measured run: the run's own work per layer, on a SmartSSD.
void print_model(const std::vector<Modelled> &runs)
{
	const csd::SmartSsdTiming card;
	std::printf("\nSmartSSD timing model (csd/timing_model.hpp): PREDICTIONS from the work each run above measured; no "
		    "SmartSSD was run.\nCard: flash %.2f GB/s read (HillInfer Sec. 4.2), %.2f GB/s write, %.0f us read "
		    "latency (PM983 datasheet); PCIe Gen3 x4 %.2f GB/s each way; FPGA %.1f G MAC/s (assumed), %.0f us per "
		    "kernel run (XRT launch); host scoring rate and engine compute measured here.\n",
		    card.flash_read_bw / 1e9, card.flash_write_bw / 1e9, card.flash_read_latency_s * 1e6, card.pcie_bw / 1e9,
		    card.fpga_mac_rate / 1e9, card.kernel_run_overhead_s * 1e6);
	std::printf("KV ms/l: one layer's selection alone (no engine compute), to set against the measured ms/layer. "
		    "step ms x32: a decode step of the model's 32 layers with the engine's compute, layer i+1's selection "
		    "overlapping layer i's compute; engine on a processor of its own (a GPU, as in HillInfer) computing as "
		    "fast as this host's CPU did, or on the host CPU (\"on CPU\"), or with flash at 2.36 GB/s (P2P reads "
		    "measured on the SmartSSD's platform, Vitis p2p_bandwidth), or on HillInfer's RTX 4090 (\"4090\", "
		    "its compute predicted from its published peaks, \"4090 ms\" a layer).\n");
	std::printf("%7s %5s %-9s %10s %10s %9s %10s %11s %11s %9s %10s %9s %-9s %s\n", "context", "batch", "backend",
		    "meas ms/l", "KV ms/l", "engine ms", "step ms x32", "on CPU x32", "2.36GB/s x32", "4090 ms", "4090 x32",
		    "hidden", "bound", "critical path (x32 step)");
	for (const Modelled &m : runs) {
		csd::SmartSsdTiming p = card;
		p.host_score_rate = m.r.host_score_rate;
		csd::StepWork kv{m.r.work, 1, false};
		kv.layer.compute_s = 0;
		const csd::StepTiming alone = csd::predict_step(p, kv);
		csd::StepWork step{m.r.work, MODEL_LAYERS, true};
		step.layer.compute_s = m.engine_s;
		const csd::StepTiming t = csd::predict_step(p, step);
		csd::SmartSsdTiming on_cpu = p, slow = p;
		on_cpu.engine_shares_host_cpu = true;
		slow.flash_read_bw = 2.36e9;
		csd::StepWork gpu = step;
		gpu.layer.compute_s = m.gpu_s;
		// hidden: the share of the selections' time (32 x KV ms/l) that the engine's compute hid
		const double kv_total = alone.step_s * MODEL_LAYERS;
		const double hidden = kv_total > 0 ? 1 - t.exposed_kv_s / kv_total : 1;
		std::printf("%7u %5u %-9s %10.1f %10.2f %9.1f %10.0f %11.0f %11.0f %10.2f %9.0f %8.0f%% %-9s %s\n", m.context,
			    m.batch, m.backend, 1e3 * m.r.step_s / (double)m.r.layers, 1e3 * alone.step_s, 1e3 * m.engine_s,
			    1e3 * t.step_s, 1e3 * csd::predict_step(on_cpu, step).step_s,
			    1e3 * csd::predict_step(slow, step).step_s, 1e3 * m.gpu_s, 1e3 * csd::predict_step(p, gpu).step_s,
			    100 * std::max(0.0, hidden), csd::resource_name(t.bottleneck), csd::critical_summary(t).c_str());
	}
	std::fflush(stdout);
}

// Bounds-first device selection next to the others, per context and batch: the model's 32-layer step
// (engine on a processor of its own) and one layer's selection alone, the measured bus bytes per step
// and layer, and the recall of the selection (Documentation/kv.md, "Bounds-first device selection").
void print_bounds_summary(const std::vector<Modelled> &runs)
{
	std::printf("\nBounds-first device selection (csd/select_bounds_first.hpp, margin %.1f x top-k), PREDICTED step times "
		    "(timing model, no SmartSSD) and MEASURED bus bytes and recall (emulation on this host):\n",
		    g_margin);
	std::printf("%7s %5s %10s %10s %10s %10s %12s %12s %10s %12s %12s %12s %9s %9s %8s %6s %10s %10s %17s\n", "context",
		    "batch", "none ms", "exact ms", "bounds ms", "ideal ms", "KV none/bnd", "step none/bnd", "4090 bnd ms",
		    "4090 none/bnd", "bus none MB", "bus bnd MB", "bus ratio",
		    "dev MB bnd", "recall", "exact", "wr MB bnd", "fetch bnd", "in/out/clean bnd");
	for (size_t i = 0; i < runs.size(); i++) {
		if (std::strcmp(runs[i].backend, "ideal") || i + 3 >= runs.size() || std::strcmp(runs[i + 3].backend, "bounds"))
			continue;
		double step[4], alone[4], gpu[4];
		for (int j = 0; j < 4; j++) {
			const Modelled &m = runs[i + j];
			csd::SmartSsdTiming p;
			p.host_score_rate = m.r.host_score_rate;
			csd::StepWork kv{m.r.work, 1, false};
			kv.layer.compute_s = 0;
			alone[j] = csd::predict_step(p, kv).step_s;
			csd::StepWork w{m.r.work, MODEL_LAYERS, true};
			w.layer.compute_s = m.engine_s;
			step[j] = csd::predict_step(p, w).step_s;
			w.layer.compute_s = m.gpu_s;
			gpu[j] = csd::predict_step(p, w).step_s;
		}
		const Result &none = runs[i + 1].r, &bnd = runs[i + 3].r;
		const double l = none.layers;
		std::printf("%7u %5u %10.0f %10.0f %10.0f %10.0f %11.2fx %11.2fx %10.0f %11.2fx %12.1f %12.2f %8.1fx %9.1f %8.4f "
			    "%6.2f %10.2f %10.2f %5.1f/%5.1f/%5.1f\n",
			    runs[i].context, runs[i].batch, 1e3 * step[1], 1e3 * step[2], 1e3 * step[3], 1e3 * step[0],
			    alone[1] / alone[3], step[1] / step[3], 1e3 * gpu[3], gpu[1] / gpu[3], none.bus_bytes / 1e6 / l, bnd.bus_bytes / 1e6 / l,
			    none.bus_bytes / bnd.bus_bytes, bnd.device_bytes / 1e6 / l, bnd.recall, bnd.same,
			    bnd.work.spill_bytes / 1e6, bnd.fetch_bytes / 1e6 / l, bnd.promoted_pages / l, bnd.spilled_pages / l,
			    bnd.clean_spills / l);
	}
	std::printf("none/exact/bounds/ideal ms: the model's 32-layer decode step with this host's engine compute; KV none/bnd: "
		    "one layer's selection alone, none over bounds-first; step none/bnd: the same for the whole step; 4090: "
		    "the bounds-first step and the step ratio with the engine on HillInfer's RTX 4090 instead; bus: "
		    "measured bytes over the host bus per step and layer; dev MB bnd: bytes the emulated device read from "
		    "its flash per step and layer with bounds-first; recall: its attention-mass recall against exact top-k "
		    "(10%% budget; sequence 0, layer 0); exact: the fraction of those selections that were the exact top-k; "
		    "wr MB bnd: of the bus bytes, those the spills wrote (per step and layer); fetch bnd: those read to fetch "
		    "the selected KV; in/out/clean: pages per step and layer brought back to memory, spilled, and spilled "
		    "without a write (their device copy kept).\n");
	std::fflush(stdout);
}

// Kelle's AERP on one LLaMA-2-7B-shaped layer (d_model 4096 = 32 heads x 128, fp16, MHA), in memory.
// The client computes each token's K and V as x.W_K, x.W_V with random fp32 weights; x is random, and
// one token in 8 is a heavy hitter: its x leans along a direction u, and every head's query is u.W_K
// for that head (times 2, for a sharper softmax), so the same tokens matter in most heads (as H2O's
// heavy hitters do). A select every
// recent / 2 tokens accumulates importance while the context is appended (each token is queried while
// it is recent), then three decode steps (append and select) are timed, and the last one's attention is
// compared with exact attention over every token.
void run_aerp(uint32_t context, uint32_t budget)
{
	constexpr uint32_t DM = HEADS * HEAD_DIM, DIMS = HEADS * HEAD_DIM;
	const uint32_t recent = std::min(64u, budget / 4), sink = 4;
	// Importance comes from selects: every token gets some while it is recent, as at one select a step.
	const uint32_t period = std::max(1u, recent / 2);
	kv::KvShape shape{1, HEADS, HEADS, HEAD_DIM, CSD_FP16, context + 8};
	kv::KvOptions opt;
	opt.sink_tokens = sink;
	opt.recent_tokens = recent;
	opt.aerp.budget = budget;
	opt.aerp.d_model = DM;
	uint64_t st = 0x9e3779b97f4a7c15ull;
	auto uni = [&] { // uniform in (-1, 1)
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		return (float)((double)(st >> 11) / (double)(1ull << 53) * 2 - 1);
	};
	opt.aerp.w_k.resize((size_t)DM * DIMS);
	opt.aerp.w_v.resize((size_t)DM * DIMS);
	const float ws = 1.0f / std::sqrt((float)DM);
	for (float &w : opt.aerp.w_k)
		w = uni() * ws;
	for (float &w : opt.aerp.w_v)
		w = uni() * ws;
	std::vector<float> u(DM), q(DIMS, 0.0f);
	for (float &f : u)
		f = uni();
	for (uint32_t i = 0; i < DM; i++)
		for (uint32_t j = 0; j < DIMS; j++)
			q[j] += 2 * u[i] * opt.aerp.w_k[(size_t)i * DIMS + j];
	const std::vector<float> w_k = opt.aerp.w_k, w_v = opt.aerp.w_v;
	std::unique_ptr<kv::KvStore> s;
	std::string err;
	if (kv::KvStore::open(shape, opt, s, err))
		die("AERP session: " + err);
	std::vector<uint16_t> x(DM), k(DIMS), v(DIMS);
	std::vector<uint16_t> all_k, all_v; // every token's K and V, for the exact attention at the end
	// The client's x.W is the store's recomputation, timed in this thread's CPU time: on a shared machine
	// the store's wall-clock figure (KvStats::aerp_recompute_ns) also counts the time others ran.
	auto cpu_now = [] {
		timespec ts{};
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		return ts.tv_sec + ts.tv_nsec * 1e-9;
	};
	double client_s = 0, select_s = 0;
	uint32_t selects = 0;
	kv::KvSelection sel;
	auto append = [&](uint32_t t) {
		const bool heavy = t % 8 == 5;
		for (uint32_t i = 0; i < DM; i++)
			x[i] = kv::policy::float_to_half(heavy ? 0.5f * u[i] + 0.5f * uni() : uni());
		const double t0 = cpu_now();
		kv::policy::recompute(x.data(), CSD_FP16, w_k.data(), DM, DIMS, k.data());
		kv::policy::recompute(x.data(), CSD_FP16, w_v.data(), DM, DIMS, v.data());
		client_s += cpu_now() - t0;
		all_k.insert(all_k.end(), k.begin(), k.end());
		all_v.insert(all_v.end(), v.begin(), v.end());
		if (s->append(0, k.data(), v.data(), x.data()))
			die("AERP append: " + s->error());
	};
	auto select = [&] {
		const auto t0 = Clock::now();
		if (s->select(0, q.data(), context, sel))
			die("AERP select: " + s->error());
		selects++;
		return std::chrono::duration<double>(Clock::now() - t0).count();
	};
	for (uint32_t t = 0; t < context; t++) {
		append(t);
		if (t % period == period - 1)
			select();
	}
	const kv::KvStats before = s->stats();
	for (uint32_t step = 0; step < 3; step++) {
		append(context + step);
		select_s += select();
	}
	const kv::KvStats a = s->stats();
	// The last decode step's attention per head: exact, over every token appended, against AERP's, over the
	// tokens that head keeps with the rows select returned (recomputed ones included). Recall: the exact
	// attention mass on the kept tokens; error: |y - y_aerp| / |y| of the head's output.
	const uint32_t n_all = context + 3;
	const float scale = 1.0f / std::sqrt((float)HEAD_DIM);
	double recall = 0, error = 0, oracle = 0, streaming = 0;
	auto attend = [&](const uint16_t *krows, const uint16_t *vrows, const std::vector<uint32_t> &rows, uint32_t h,
			  std::vector<double> &y, std::vector<double> *p_out) {
		std::vector<double> lg(rows.size());
		double mx = -1e300, sum = 0;
		for (size_t i = 0; i < rows.size(); i++) {
			double d = 0;
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				d += q[h * HEAD_DIM + e] * csd_half_to_float(krows[(size_t)rows[i] * DIMS + h * HEAD_DIM + e]);
			lg[i] = d * scale;
			mx = std::max(mx, lg[i]);
		}
		for (double &l : lg)
			sum += (l = std::exp(l - mx));
		y.assign(HEAD_DIM, 0.0);
		for (size_t i = 0; i < rows.size(); i++)
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				y[e] += lg[i] / sum * csd_half_to_float(vrows[(size_t)rows[i] * DIMS + h * HEAD_DIM + e]);
		if (p_out)
			for (double &l : lg)
				p_out->push_back(l / sum);
	};
	const auto *sk = reinterpret_cast<const uint16_t *>(sel.k.data()), *sv = reinterpret_cast<const uint16_t *>(sel.v.data());
	for (uint32_t h = 0; h < HEADS; h++) {
		std::vector<uint32_t> every(n_all), kept_sel, kept_pos;
		for (uint32_t t = 0; t < n_all; t++)
			every[t] = t;
		for (uint32_t j = 0; j < sel.positions.size(); j++)
			if (sel.heads[(size_t)j * HEADS + h]) {
				kept_sel.push_back(j);
				kept_pos.push_back(sel.positions[j]);
			}
		std::vector<double> y, ya, p;
		attend(all_k.data(), all_v.data(), every, h, y, &p);
		attend(sk, sv, kept_sel, h, ya, nullptr);
		double m = 0, dn = 0, yn = 0;
		for (uint32_t t : kept_pos)
			m += p[t];
		for (uint32_t e = 0; e < HEAD_DIM; e++) {
			dn += (y[e] - ya[e]) * (y[e] - ya[e]);
			yn += y[e] * y[e];
		}
		recall += m / HEADS;
		// The same budget per head as exact top-k (the best any selection of that size does), and as
		// StreamingLLM's sink plus the most recent tokens.
		std::vector<double> sorted = p;
		std::sort(sorted.begin(), sorted.end(), std::greater<>());
		for (uint32_t i = 0; i < std::min(budget, n_all); i++)
			oracle += sorted[i] / HEADS;
		for (uint32_t t = 0; t < n_all; t++)
			if (t < sink || t + (budget - sink) >= n_all)
				streaming += p[t] / HEADS;
		error += (yn > 0 ? std::sqrt(dn / yn) : 0) / HEADS;
	}
	const double kv_row = 2.0 * DIMS * 2, x_row = DM * 2.0, mac = 2.0 * DM * DIMS;
	const double rec_s = a.aerp_recomputed ? a.aerp_recompute_ns * 1e-9 / a.aerp_recomputed : 0;
	const double client_per = client_s / (context + 3);
	const csd::SmartSsdTiming card;
	std::printf("\nKelle's AERP (kv/policy_aerp.hpp), MEASURED on this host: one LLaMA-2-7B-shaped layer (d_model %u, %u "
		    "heads x %u, fp16), in memory; budget %u tokens per head (sink %u, recent %u), %u tokens appended with a "
		    "select every %u, then 3 decode steps; 1 token in 8 a heavy hitter in most heads.\n",
		    DM, HEADS, HEAD_DIM, budget, sink, recent, context, period);
	std::printf("%-44s %12u\n", "tokens appended", context + 3);
	std::printf("%-44s %12lu (%.0f%% of the context)\n", "tokens retained by some head", (unsigned long)a.aerp_tokens,
		    100.0 * a.aerp_tokens / (context + 3));
	std::printf("%-44s %12lu\n", "  of which stored as x (recomputed)", (unsigned long)a.aerp_x_tokens);
	std::printf("%-44s %12lu\n", "(token, head) pairs evicted", (unsigned long)a.aerp_evicted_heads);
	std::printf("%-44s %12.0f (K and V: %.0f, x: %.0f)\n", "bytes stored per retained token",
		    a.aerp_tokens ? (double)a.aerp_bytes / a.aerp_tokens : 0.0, kv_row, x_row);
	std::printf("%-44s %12.0f (full cache: %.0f)\n", "bytes stored per appended token", (double)a.aerp_bytes / (context + 3),
		    kv_row);
	std::printf("%-44s %12.3f (mean over heads; each head keeps %.0f%% of the context)\n",
		    "attention-mass recall, last step", recall, 100.0 * budget / n_all);
	std::printf("%-44s %12.4f (relative, mean over heads)\n", "attention output error, last step", error);
	std::printf("%-44s %12.3f exact top-%u, %.3f sink + most recent (StreamingLLM)\n", "  recall at the same budget",
		    oracle, budget, streaming);
	std::printf("%-44s %12.1f (wall clock)\n", "select ms per decode step (mean of 3)", 1e3 * select_s / 3);
	std::printf("%-44s %12lu\n", "tokens recomputed by the 3 decode selects", (unsigned long)(a.aerp_recomputed - before.aerp_recomputed));
	std::printf("%-44s %12.0f CPU time (%.2f G MAC/s); in the store's selects %.0f us wall clock\n",
		    "recompute us per token (K and V)", 1e6 * client_per, client_per > 0 ? mac / client_per / 1e9 : 0.0,
		    1e6 * rec_s);
	const double saved = kv_row - x_row; // bytes a token stored as x does not hold, nor read back
	std::printf("%-44s %12.0f bytes: %.2f us at flash %.1f GB/s, %.2f us over PCIe %.1f GB/s\n", "the read it saves per token",
		    saved, 1e6 * saved / card.flash_read_bw, card.flash_read_bw / 1e9, 1e6 * saved / card.pcie_bw, card.pcie_bw / 1e9);
	std::printf("%-44s %12.0fx (break-even at %.0f G MAC/s, more than Kelle's own 4.13 TOPS accelerator: recomputation "
		    "saves storage, and time only where it overlaps the reads it does not replace)\n",
		    "recompute time / that read at flash rate",
		    client_per / (saved / card.flash_read_bw), mac / (saved / card.flash_read_bw) / 1e9);
	std::fflush(stdout);
}

// EdgeInfinite's compressed memory: one LLaMA-2-7B-shaped layer (32 heads x 128, fp16) in memory under
// AERP eviction (no recomputation) at each budget, `context` tokens appended with a select every 16 to
// give importance, then one decode step. Keys random in (-1, 1) but one token in 8 leaning toward each
// head's query direction (heavy hitters), values random in (-1, 1). Per head, against exact attention
// y over every token: y_kept, softmax attention over the tokens the head keeps; A_mem, the memory's
// readout; and the two combined with the gate an exact model would need, the attention mass m of the
// evicted tokens (y = (1 - m) y_kept + m y_evicted holds exactly, so this gate is an oracle: a trained
// gate, Eq. 9, is a fixed per-dimension vector and does not know m). Also A_mem against y_evicted, the
// softmax attention over the evicted tokens alone, which is what the memory stands for.
void run_memory(uint32_t context, const std::vector<uint32_t> &budgets)
{
	constexpr uint32_t DIMS = HEADS * HEAD_DIM;
	const uint32_t sink = 4, period = 16;
	uint64_t st = 0x2545f4914f6cdd1dull;
	auto uni = [&] { // uniform in (-1, 1)
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		return (float)((double)(st >> 11) / (double)(1ull << 53) * 2 - 1);
	};
	std::vector<float> dir(DIMS), q(DIMS);
	for (float &f : dir)
		f = uni();
	for (uint32_t i = 0; i < DIMS; i++)
		q[i] = 3 * dir[i];
	std::vector<uint16_t> all_k((size_t)(context + 1) * DIMS), all_v(all_k.size());
	for (uint32_t t = 0; t <= context; t++)
		for (uint32_t i = 0; i < DIMS; i++) {
			const float k = t % 8 == 5 ? 0.5f * dir[i] + 0.5f * uni() : uni();
			all_k[(size_t)t * DIMS + i] = kv::policy::float_to_half(k);
			all_v[(size_t)t * DIMS + i] = kv::policy::float_to_half(uni());
		}
	const uint32_t n_all = context + 1;
	const float scale = 1.0f / std::sqrt((float)HEAD_DIM);
	// Softmax attention of head h over `rows`: the output and the total of exp(logit - max0) (max0 fixed
	// by the caller so that sums over disjoint sets add up).
	auto attend = [&](const std::vector<uint32_t> &rows, uint32_t h, double max0, std::vector<double> &y) {
		double sum = 0;
		y.assign(HEAD_DIM, 0.0);
		for (uint32_t t : rows) {
			double d = 0;
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				d += q[h * HEAD_DIM + e] * csd_half_to_float(all_k[(size_t)t * DIMS + h * HEAD_DIM + e]);
			const double w = std::exp(d * scale - max0);
			sum += w;
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				y[e] += w * csd_half_to_float(all_v[(size_t)t * DIMS + h * HEAD_DIM + e]);
		}
		for (double &f : y)
			f = sum > 0 ? f / sum : 0;
		return sum;
	};
	auto rel = [](const std::vector<double> &a, const std::vector<double> &b) {
		double dn = 0, bn = 0;
		for (size_t e = 0; e < a.size(); e++)
			dn += (a[e] - b[e]) * (a[e] - b[e]), bn += b[e] * b[e];
		return bn > 0 ? std::sqrt(dn / bn) : 0.0;
	};
	std::printf("\nEdgeInfinite's compressed memory (kv/policy_memory.hpp), MEASURED on this host: one LLaMA-2-7B-shaped "
		    "layer (%u heads x %u, fp16) under AERP eviction (sink %u, recent budget/4 up to 64), %u tokens appended with "
		    "a select every %u, then one decode step; keys random but 1 in 8 leaning toward the query (heavy hitters). "
		    "Errors: |y' - y| / |y| of each head's attention output against exact attention over all %u tokens, mean over "
		    "heads.\n",
		    HEADS, HEAD_DIM, sink, context, period, n_all);
	std::printf("%7s %8s %10s %12s %14s %14s %16s %12s %14s\n", "budget", "kept", "evicted m", "kept only", "(1-m) kept",
		    "kept+mem (m)", "kept+mem best g", "mem vs y_ev", "memory MB");
	for (uint32_t budget : budgets) {
		kv::KvShape shape{1, HEADS, HEADS, HEAD_DIM, CSD_FP16, context + 8};
		kv::KvOptions opt;
		opt.sink_tokens = sink;
		opt.recent_tokens = std::min(64u, budget / 4);
		opt.aerp.budget = budget;
		opt.memory.on = true;
		std::unique_ptr<kv::KvStore> s;
		std::string err;
		if (kv::KvStore::open(shape, opt, s, err))
			die("memory session: " + err);
		kv::KvSelection sel;
		for (uint32_t t = 0; t <= context; t++) {
			if (s->append(0, &all_k[(size_t)t * DIMS], &all_v[(size_t)t * DIMS]))
				die("memory append: " + s->error());
			if ((t % period == period - 1 || t == context) && s->select(0, q.data(), context + 8, sel))
				die("memory select: " + s->error());
		}
		double kept_frac = 0, mass = 0, e_kept = 0, e_scaled = 0, e_oracle = 0, e_best = 0, e_mem = 0;
		for (uint32_t h = 0; h < HEADS; h++) {
			std::vector<uint32_t> every(n_all), kept, evicted;
			for (uint32_t t = 0; t < n_all; t++)
				every[t] = t;
			std::vector<uint8_t> keeps(n_all, 0);
			for (size_t j = 0; j < sel.positions.size(); j++)
				keeps[sel.positions[j]] = sel.heads[j * HEADS + h];
			for (uint32_t t = 0; t < n_all; t++)
				(keeps[t] ? kept : evicted).push_back(t);
			double max0 = -1e300;
			for (uint32_t t = 0; t < n_all; t++) {
				double d = 0;
				for (uint32_t e = 0; e < HEAD_DIM; e++)
					d += q[h * HEAD_DIM + e] * csd_half_to_float(all_k[(size_t)t * DIMS + h * HEAD_DIM + e]);
				max0 = std::max(max0, d * scale);
			}
			std::vector<double> y, yk, ye;
			const double s_all = attend(every, h, max0, y), s_kept = attend(kept, h, max0, yk);
			attend(evicted, h, max0, ye);
			const double m = 1 - s_kept / s_all;
			std::vector<double> mem(HEAD_DIM), comb(HEAD_DIM);
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				mem[e] = sel.memory[(size_t)h * HEAD_DIM + e];
			const bool used = sel.memory_state[h] == (uint8_t)kv::policy::MemoryState::Used;
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				comb[e] = used ? (1 - m) * yk[e] + m * mem[e] : yk[e];
			// The best scalar gate g in [0, 1] for this head and query: least squares of y - yk against mem - yk.
			double num = 0, den = 0;
			for (uint32_t e = 0; e < HEAD_DIM; e++)
				num += (y[e] - yk[e]) * (mem[e] - yk[e]), den += (mem[e] - yk[e]) * (mem[e] - yk[e]);
			const double g = used && den > 0 ? std::clamp(num / den, 0.0, 1.0) : 0.0;
			std::vector<double> best(HEAD_DIM), scaled(HEAD_DIM);
			for (uint32_t e = 0; e < HEAD_DIM; e++) {
				best[e] = (1 - g) * yk[e] + g * mem[e];
				scaled[e] = (1 - m) * yk[e];
			}
			kept_frac += (double)kept.size() / n_all / HEADS;
			mass += m / HEADS;
			e_kept += rel(yk, y) / HEADS;
			e_scaled += rel(scaled, y) / HEADS;
			e_oracle += rel(comb, y) / HEADS;
			e_best += rel(best, y) / HEADS;
			e_mem += (used ? rel(mem, ye) : 1.0) / HEADS;
		}
		const kv::KvStats a = s->stats();
		std::printf("%7u %7.1f%% %10.3f %12.4f %14.4f %14.4f %16.4f %12.4f %14.2f\n", budget, 100 * kept_frac, mass, e_kept,
			    e_scaled, e_oracle, e_best, e_mem, a.memory_bytes / 1e6);
		std::fflush(stdout);
	}
	std::printf("kept: tokens each head keeps, of the context; evicted m: exact attention mass on the evicted tokens; "
		    "kept only: y_kept; (1-m) kept: the same gate with a memory that reads zero (what the mass alone gives); kept+mem (m): (1 - m) y_kept + m A_mem, the oracle gate; kept+mem best g: the best "
		    "scalar gate for each head and query (least squares, in [0, 1]); mem vs y_ev: A_mem against softmax "
		    "attention over the evicted tokens; memory MB: M and z of the layer's %u heads. No trained gate and no "
		    "model: synthetic keys and values.\n",
		    HEADS);
}

// Two-plane precision: one layer of `context` tokens (32 query heads x 128, kv_heads KV heads, fp16)
// spilled to DEVICE but for a quarter of it, 8 selects at a 10% budget, once with the option off and
// once per fraction of the top-k fetched in full; the same data and queries each time, so the
// selections are the same and only the V rows' precision and the bytes read differ.
void run_planes(const std::string &device, uint32_t context, uint32_t kv_heads)
{
	const uint32_t QH = 32, dims = kv_heads * HEAD_DIM, g = QH / kv_heads, steps = 8, budget = context / 10;
	const uint64_t row = 2ull * dims;
	// Keys: random fp16 of magnitude in [0.125, 0.25), random sign; one page in 16, and one token in 50
	// elsewhere, lean toward the query's direction (heavy hitters, spread so the top-k falls on scattered
	// rows too). Values: random like the keys.
	std::vector<uint16_t> ks((size_t)(context + steps) * dims), vs(ks.size());
	std::vector<float> dir(dims);
	for (size_t i = 0; i < dims; i++)
		dir[i] = ((i * 2654435761u) >> 7) & 1 ? 1.0f : -1.0f;
	uint64_t x = 88172645463325252ull;
	for (size_t t = 0; t < context + steps; t++) {
		const bool heavy = (t / 32) % 16 == 8 || t % 50 == 17;
		for (size_t i = 0; i < dims; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			const size_t at = t * dims + i;
			ks[at] = heavy ? (uint16_t)((x & 0x03ff) | 0x3800 | (dir[i] < 0 ? 0x8000 : 0)) : (uint16_t)((x & 0x83ff) | 0x3000);
			vs[at] = (uint16_t)(((x >> 20) & 0x83ff) | 0x3000);
		}
	}
	kv::KvShape shape{1, QH, kv_heads, HEAD_DIM, CSD_FP16, context + steps + 64};
	const float scale = 1.0f / std::sqrt((float)HEAD_DIM);
	// The attention output of every query head over the selected rows: krows, vrows in selection order.
	auto attend = [&](const std::vector<float> &q, const uint16_t *krows, const uint16_t *vrows, size_t n) {
		std::vector<double> y((size_t)QH * HEAD_DIM, 0.0);
		for (uint32_t h = 0; h < QH; h++) {
			const uint32_t kh = h / g;
			std::vector<double> lg(n);
			double mx = -1e300, sum = 0;
			for (size_t i = 0; i < n; i++) {
				double d = 0;
				for (uint32_t e = 0; e < HEAD_DIM; e++)
					d += q[h * HEAD_DIM + e] * csd_half_to_float(krows[i * dims + kh * HEAD_DIM + e]);
				mx = std::max(mx, lg[i] = d * scale);
			}
			for (double &l : lg)
				sum += (l = std::exp(l - mx));
			for (size_t i = 0; i < n; i++)
				for (uint32_t e = 0; e < HEAD_DIM; e++)
					y[h * HEAD_DIM + e] += lg[i] / sum * csd_half_to_float(vrows[i * dims + kh * HEAD_DIM + e]);
		}
		return y;
	};
	std::printf("\nTwo-plane precision (kvio/planes.hpp), MEASURED on this host: one layer, %u query heads, %u KV heads x "
		    "%u, fp16 (%lu-byte rows, a row's high plane %lu bytes); %u tokens, 3/4 spilled to %s, pages of 32, budget "
		    "%u (sink 4, recent %u), %u selects (emulated backend: the pool's reads are the fetches alone).\n",
		    QH, kv_heads, HEAD_DIM, (unsigned long)row, (unsigned long)row / 2, context, device.c_str(), budget,
		    context / 20, steps);
	std::printf("%-10s %16s %12s %14s %14s %16s\n", "full", "dev KB/select", "vs off", "V rows high", "V rows both",
		    "attn out error");
	for (double full : {-1.0, 1.0, 0.5, 0.25, 0.1, 0.0}) {
		kv::KvOptions o;
		o.device = device;
		o.backend = "emulated";
		o.recent_tokens = context / 20;
		o.cpu_budget = (uint64_t)context * 2 * row / 4;
		o.planes.on = full >= 0;
		o.planes.full = std::max(full, 0.0);
		std::unique_ptr<kv::KvStore> s;
		std::string err;
		if (kv::KvStore::open(shape, o, s, err))
			die(err);
		for (uint32_t t = 0; t < context; t++)
			if (s->append(0, &ks[(size_t)t * dims], &vs[(size_t)t * dims]) < 0)
				die("append failed: " + s->error());
		const kv::KvStats before = s->stats();
		double error = 0;
		kv::KvSelection sel;
		std::vector<float> q((size_t)QH * HEAD_DIM);
		for (uint32_t step = 0; step < steps; step++) {
			if (s->append(0, &ks[(size_t)(context + step) * dims], &vs[(size_t)(context + step) * dims]) < 0)
				die("append failed: " + s->error());
			for (uint32_t h = 0; h < QH; h++)
				for (uint32_t e = 0; e < HEAD_DIM; e++) {
					const size_t i = h * HEAD_DIM + e;
					q[i] = dir[(h / g) * HEAD_DIM + e] + 0.5f * ((float)(((i + step * 31) * 2654435761u) % 1024) / 512.0f - 1.0f);
				}
			if (s->select(0, q.data(), budget, sel) < 0)
				die("select failed: " + s->error());
			// The same selection with every row at full precision: the rows as appended.
			const size_t n = sel.positions.size();
			std::vector<uint16_t> fk(n * dims), fv(n * dims);
			for (size_t i = 0; i < n; i++) {
				std::memcpy(&fk[i * dims], &ks[(size_t)sel.positions[i] * dims], row);
				std::memcpy(&fv[i * dims], &vs[(size_t)sel.positions[i] * dims], row);
			}
			const auto y = attend(q, fk.data(), fv.data(), n);
			const auto yp = attend(q, reinterpret_cast<const uint16_t *>(sel.k.data()),
					       reinterpret_cast<const uint16_t *>(sel.v.data()), n);
			double dn = 0, yn = 0;
			for (size_t i = 0; i < y.size(); i++)
				dn += (y[i] - yp[i]) * (y[i] - yp[i]), yn += y[i] * y[i];
			error += std::sqrt(dn / yn) / steps;
		}
		const kv::KvStats a = s->stats();
		static double off_bytes = 0;
		const double bytes = (double)(a.storage.bytes_read - before.storage.bytes_read) / steps;
		if (full < 0)
			off_bytes = bytes;
		char name[16];
		std::snprintf(name, sizeof(name), full < 0 ? "off" : "%.2f", full);
		std::printf("%-10s %16.1f %11.1f%% %14.1f %14.1f %16.2e\n", name, bytes / 1024, 100 * bytes / off_bytes,
			    (double)(a.plane_high_rows - before.plane_high_rows) / steps,
			    (double)(a.plane_full_rows - before.plane_full_rows) / steps, error);
		std::fflush(stdout);
	}
	std::printf("full: the fraction of each select's top-k (by score) whose spilled V rows are read in full; off: the "
		    "option off. dev KB: bytes the pool read per select (4 KiB blocks of the selected rows, whole slabs of "
		    "pages coming back to memory); V rows high/both: spilled V rows per select read with the high plane "
		    "alone / with both; error: |y - y'| / |y| of the attention output over the selection (all query heads), "
		    "y' with the rows as fetched, y with the rows as appended, mean of the selects.\n");
}

} // namespace

int main(int argc, char **argv)
{
	if (argc >= 3 && std::strcmp(argv[1], "--planes") == 0) {
		const uint32_t c = argc > 3 ? (uint32_t)std::atoi(argv[3]) : 4096;
		if (argc > 4)
			run_planes(argv[2], c, (uint32_t)std::atoi(argv[4]));
		else
			for (uint32_t kvh : {32u, 8u})
				run_planes(argv[2], c, kvh);
		return 0;
	}
	if (argc >= 2 && std::strcmp(argv[1], "--memory") == 0) {
		run_memory(argc > 2 ? (uint32_t)std::atoi(argv[2]) : 2048, parse_list(argc > 3 ? argv[3] : "64,128,256,512"));
		return 0;
	}
	if (argc >= 2 && std::strcmp(argv[1], "--aerp") == 0) {
		run_aerp(argc > 2 ? (uint32_t)std::atoi(argv[2]) : 512, argc > 3 ? (uint32_t)std::atoi(argv[3]) : 128);
		return 0;
	}
	if (argc < 2) {
		std::fprintf(stderr, "usage: bench_kv_decode DEVICE [contexts (4096,8192,16384,32768)] [batches (1,8)] "
				     "[measured layers (1)] [steps (3)] [heavy page period (16; 0 = uniform keys)] [bounds-first margin (2)] [warm-up steps (1)] [write full pages through (0)]\n       bench_kv_decode --aerp [context (512)] [budget (128)]\n       bench_kv_decode --memory [context (2048)] [budgets (64,128,256,512)]\n       bench_kv_decode --planes DEVICE [context (4096)] [kv heads (32 and 8)]\nDEVICE: a block device or file, overwritten; it needs "
				     "about 1.4 x 16 KiB x context x batch x layers bytes\nEach context and batch runs `ideal` (all KV in "
				     "memory), `none`, `emulated` (exact scan) and `bounds` (emulated, bounds-first), then the SmartSSD timing model predicts each run on a card.\n");
		return 2;
	}
	const std::string device = argv[1];
	const auto contexts = parse_list(argc > 2 ? argv[2] : "4096,8192,16384,32768");
	const auto batches = parse_list(argc > 3 ? argv[3] : "1,8");
	const uint32_t layers = argc > 4 ? (uint32_t)std::atoi(argv[4]) : 1, steps = argc > 5 ? (uint32_t)std::atoi(argv[5]) : 3;
	const uint32_t heavy = argc > 6 ? (uint32_t)std::atoi(argv[6]) : 16;
	if (argc > 7 && !(std::atof(argv[7]) >= 1))
		die("the bounds-first margin must be at least 1");
	g_margin = argc > 7 ? std::atof(argv[7]) : g_margin;
	g_warmup = argc > 8 ? (uint32_t)std::atoi(argv[8]) : g_warmup;
	g_write_through = argc > 9 && std::atoi(argv[9]) != 0;
	utsname u{};
	uname(&u);
	const csd::EmulatedConfig emu;
	std::printf("machine: %s, %ld cores, Linux %s; device %s\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
		    u.release, device.c_str());
	std::printf("LLaMA-2-7B-shaped KV: %u heads x head dim %u, fp16, pages of 32 tokens; per sequence a CPU budget of "
		    "1/4 of its KV, recent window 5%%, sink 4, top-k budget 10%% of the context.\n", HEADS, HEAD_DIM);
	if (layers == MODEL_LAYERS)
		std::printf("MEASURED on all %u layers, %u decode steps after %u warm-up step(s) (median); \"x32\" columns are "
			    "the measured totals over the model's 32 layers.\n", layers, steps, g_warmup);
	else
		std::printf("MEASURED on %u layer(s), %u decode steps after %u warm-up step(s) (median); \"x32\" columns are the "
			    "per-layer figures times 32 (the model's layers), an EXTRAPOLATION, not a measurement.\n",
			    layers, steps, g_warmup);
	if (heavy)
		std::printf("Keys: random, except those that lean toward the query: sink tokens (the first 4), heavy hitters (one "
			    "page in %u, and one token in 97 elsewhere) and a local window (one token in 3 of the last 2.5%%).\n",
			    heavy);
	else
		std::printf("Keys: uniformly random (importance spread over every page: the worst case for fetching).\n");
	std::printf("`emulated` is an EMULATION of a SmartSSD: the kernel runs on a host thread reading the device node, "
		    "paced to %.1f GB/s internal bandwidth (HillInfer Sec. 4.2) and %.1f G MAC/s (assumed: 32 lanes x 300 "
		    "MHz); it cannot be faster than this host. `ideal` keeps all of the KV in memory.\n\n", emu.internal_bandwidth / 1e9,
		    emu.compute_rate / 1e9);
	std::vector<Modelled> modelled;
	EngineLayer engine;
	std::printf("%7s %5s %-9s %12s %12s %14s %14s %12s %12s %12s %9s %7s\n", "context", "batch", "backend", "step ms/layer",
		    "step ms x32", "bus MB/layer", "bus MB x32", "in-dev MB/l", "fetch MB/l", "if pages MB/l", "spilled", "recall");
	for (uint32_t c : contexts)
		for (uint32_t b : batches) {
			std::vector<uint16_t> rows((size_t)ROWS * HEADS * HEAD_DIM), heavy_rows(rows.size());
			std::vector<float> dir(HEADS * HEAD_DIM);
			uint64_t x = 88172645463325252ull ^ c;
			for (size_t i = 0; i < dir.size(); i++)
				dir[i] = ((i * 2654435761u) >> 7) & 1 ? 1.0f : -1.0f;
			for (size_t i = 0; i < rows.size(); i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				rows[i] = (uint16_t)((x & 0x83ff) | 0x3000); // fp16, |k| in [0.125, 0.25), random sign
				// A key leaning toward dir: |k| in [0.5, 1) with the sign of dir (fp16 sign is bit 15).
				heavy_rows[i] = (uint16_t)((x & 0x03ff) | 0x3800 | (dir[i % dir.size()] < 0 ? 0x8000 : 0));
			}
			const double engine_s = engine.seconds(b, c / 10);
			for (const char *be : {"ideal", "none", "emulated", "bounds"}) {
				const Result r = run(device, be, c, b, layers, steps, heavy, rows, heavy_rows, dir);
				modelled.push_back({c, b, be, r, engine_s, gpu_engine_seconds(b, c / 10)});
				std::printf("%7u %5u %-9s %12.1f %12.0f %14.1f %14.0f %12.1f %12.1f %12.1f %8.0f%% %7.3f\n", c, b, be,
					    1e3 * r.step_s / layers, 1e3 * r.step_s / layers * MODEL_LAYERS, r.bus_bytes / 1e6 / layers,
					    r.bus_bytes / 1e6 / layers * MODEL_LAYERS, r.device_bytes / 1e6 / layers,
					    r.fetch_bytes / 1e6 / layers, r.whole_page_bytes / 1e6 / layers, 100 * r.spilled_fraction,
					    r.recall);
				std::fflush(stdout);
			}
		}
	std::printf("\nbus: bytes that crossed between host memory and the device per decode step (pool reads and writes, "
		    "and 8-byte Score Blocks for emulated); in-dev: K slab bytes the emulated device read internally; fetch: "
		    "bytes read to fetch the selected KV (only the 4 KiB blocks holding selected rows, whole slabs for pages "
		    "coming back to memory); if pages: what reading those pages' K and V slabs whole would have read.\n");
	std::printf("\nAppends (the prefill, before the decode steps), per layer: bytes written to the device, pages written "
		    "through as they filled (write-through %s), wall time.\n%7s %5s %-9s %12s %12s %12s\n",
		    g_write_through ? "on: every run but ideal" : "off", "context", "batch", "backend", "written MB/l",
		    "through/l", "append s/l");
	for (const Modelled &m : modelled)
		std::printf("%7u %5u %-9s %12.1f %12.0f %12.2f\n", m.context, m.batch, m.backend,
			    m.r.append_bytes / 1e6 / m.r.layers, m.r.append_written_through / m.r.layers, m.r.append_s / m.r.layers);
	print_model(modelled);
	print_bounds_summary(modelled);
	run_aerp(512, 128);
	return 0;
}
