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
#include "kv/kv_store.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>
#include "machine.hpp"

using namespace llmcache;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t HEADS = 32, HEAD_DIM = 128, MODEL_LAYERS = 32, ROWS = 257;

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
	double bus_bytes = 0, device_bytes = 0;	      // per step: host bus (pool reads + writes + Score Blocks), in-device reads
	// per step: bytes read to fetch the selected KV (the selected rows' blocks; whole slabs of pages
	// coming back to memory), and what fetching the same pages' K and V slabs whole would read
	double fetch_bytes = 0, whole_page_bytes = 0;
	double spilled_fraction = 0;
};

Result run(const std::string &device, const std::string &backend, uint32_t context, uint32_t batch, uint32_t layers,
	   uint32_t steps, uint32_t heavy, const std::vector<uint16_t> &rows, const std::vector<uint16_t> &heavy_rows,
	   const std::vector<float> &dir)
{
	const uint64_t row = (uint64_t)HEADS * HEAD_DIM * 2, kv_bytes = (uint64_t)context * layers * 2 * row;
	const uint64_t slab = (64 + 8ull * HEADS * HEAD_DIM + 32 * row + 4095) / 4096 * 4096; // a K slab of 32 tokens
	kv::KvShape shape{layers, HEADS, HEADS, HEAD_DIM, CSD_FP16, context + steps + 64};
	kv::KvOptions o;
	o.cpu_budget = kv_bytes / 4; // a quarter of each sequence's KV stays in memory
	o.recent_tokens = context / 20;
	o.device = device;
	o.device_capacity = (kv_bytes + kv_bytes / 3 + (64u << 20)) / 4096 * 4096; // spilled 3/4, slab rounding
	o.backend = backend;
	std::vector<std::unique_ptr<kv::KvStore>> seqs(batch);
	for (uint32_t b = 0; b < batch; b++) {
		o.device_offset = b * o.device_capacity;
		std::string err;
		if (kv::KvStore::open(shape, o, seqs[b], err))
			die(err);
	}
	const uint16_t *r = rows.data();
	auto append = [&](kv::KvStore &s, uint32_t l, uint32_t pos) {
		const bool hot = heavy && (pos / 32) % heavy == heavy / 2;
		const uint16_t *k = (hot ? heavy_rows.data() : r) + (size_t)((pos * 7 + l) % ROWS) * HEADS * HEAD_DIM;
		const uint16_t *v = r + (size_t)((pos * 13 + l + 1) % ROWS) * HEADS * HEAD_DIM;
		const int e = s.append(l, k, v);
		if (e < 0)
			die("append failed: " + s.error());
	};
	for (uint32_t b = 0; b < batch; b++)
		for (uint32_t t = 0; t < context; t++)
			for (uint32_t l = 0; l < layers; l++)
				append(*seqs[b], l, t);
	std::vector<float> q(HEADS * HEAD_DIM);
	const uint32_t budget = context / 10; // HillInfer's importance rate of 10%
	std::vector<double> times;
	double bus = 0, dev = 0, fetch = 0, whole = 0;
	kv::KvSelection sel;
	for (uint32_t step = 0; step <= steps; step++) {
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
			for (auto &s : seqs)
				if (s->select_end(sel) < 0)
					die("select failed: " + s->error());
		}
		const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
		if (step == 0)
			continue; // the first step settles the pools (pages promoted and spilled)
		times.push_back(dt);
		for (size_t b = 0; b < seqs.size(); b++) {
			const kv::KvStats a = seqs[b]->stats(), &p = before[b];
			const double scored = (double)(a.scored_storage - p.scored_storage);
			bus += (double)(a.storage.bytes_read - p.storage.bytes_read + a.storage.bytes_written - p.storage.bytes_written);
			// none reads every scored page's K slab through the pool before the fetch
			fetch += (double)(a.storage.bytes_read - p.storage.bytes_read) -
				 (backend == "none" ? scored / o.page_tokens * (double)slab : 0);
			whole += (double)(a.fetched_pages - p.fetched_pages) * 2 * (double)slab;
			if (backend != "none") {
				bus += scored * sizeof(csd_score);
				dev += scored / o.page_tokens * (double)slab;
			}
		}
	}
	Result res;
	std::sort(times.begin(), times.end());
	res.step_s = times[times.size() / 2];
	res.bus_bytes = bus / steps;
	res.device_bytes = dev / steps;
	res.fetch_bytes = fetch / steps;
	res.whole_page_bytes = whole / steps;
	uint64_t spilled = 0, pages = 0;
	for (auto &s : seqs) {
		const kv::KvStats st = s->stats();
		spilled += st.spilled_pages;
		pages += st.spilled_pages + st.cpu_pages;
	}
	res.spilled_fraction = pages ? (double)spilled / pages : 0;
	return res;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		std::fprintf(stderr, "usage: bench_kv_decode DEVICE [contexts (4096,8192,16384,32768)] [batches (1,8)] "
				     "[measured layers (1)] [steps (3)] [heavy page period (16; 0 = uniform keys)]\nDEVICE: a block device or file, overwritten; it needs "
				     "about 1.4 x 16 KiB x context x batch x layers bytes\n");
		return 2;
	}
	const std::string device = argv[1];
	const auto contexts = parse_list(argc > 2 ? argv[2] : "4096,8192,16384,32768");
	const auto batches = parse_list(argc > 3 ? argv[3] : "1,8");
	const uint32_t layers = argc > 4 ? (uint32_t)std::atoi(argv[4]) : 1, steps = argc > 5 ? (uint32_t)std::atoi(argv[5]) : 3;
	const uint32_t heavy = argc > 6 ? (uint32_t)std::atoi(argv[6]) : 16;
	utsname u{};
	uname(&u);
	const csd::EmulatedConfig emu;
	std::printf("machine: %s, %ld cores, Linux %s; device %s\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
		    u.release, device.c_str());
	std::printf("LLaMA-2-7B-shaped KV: %u heads x head dim %u, fp16, pages of 32 tokens; per sequence a CPU budget of "
		    "1/4 of its KV, recent window 5%%, sink 4, top-k budget 10%% of the context.\n", HEADS, HEAD_DIM);
	if (layers == MODEL_LAYERS)
		std::printf("MEASURED on all %u layers, %u decode steps after one warm-up step (median); \"x32\" columns are "
			    "the measured totals over the model's 32 layers.\n", layers, steps);
	else
		std::printf("MEASURED on %u layer(s), %u decode steps after one warm-up step (median); \"x32\" columns are the "
			    "per-layer figures times 32 (the model's layers), an EXTRAPOLATION, not a measurement.\n",
			    layers, steps);
	if (heavy)
		std::printf("Keys: random, except one page in %u whose keys lean toward the query (concentrated importance).\n",
			    heavy);
	else
		std::printf("Keys: uniformly random (importance spread over every page: the worst case for fetching).\n");
	std::printf("`emulated` is an EMULATION of a SmartSSD: the kernel runs on a host thread reading the device node, "
		    "paced to %.1f GB/s internal bandwidth (HillInfer Sec. 4.2) and %.1f G MAC/s (assumed: 32 lanes x 300 "
		    "MHz); it cannot be faster than this host.\n\n", emu.internal_bandwidth / 1e9, emu.compute_rate / 1e9);
	std::printf("%7s %5s %-9s %12s %12s %14s %14s %12s %12s %12s %9s\n", "context", "batch", "backend", "step ms/layer",
		    "step ms x32", "bus MB/layer", "bus MB x32", "in-dev MB/l", "fetch MB/l", "if pages MB/l", "spilled");
	for (uint32_t c : contexts)
		for (uint32_t b : batches) {
			std::vector<uint16_t> rows((size_t)ROWS * HEADS * HEAD_DIM), heavy_rows(rows.size());
			std::vector<float> dir(HEADS * HEAD_DIM);
			uint64_t x = 88172645463325252ull ^ c;
			for (size_t i = 0; i < dir.size(); i++)
				dir[i] = ((i * 2654435761u) >> 7) & 1 ? 1.0f : -1.0f;
			for (size_t i = 0; i < rows.size(); i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				rows[i] = (uint16_t)((x & 0x83ff) | 0x3000); // fp16 in (-1, 1)
				// A key leaning toward dir: |k| in [0.5, 1) with the sign of dir (fp16 sign is bit 15).
				heavy_rows[i] = (uint16_t)((x & 0x03ff) | 0x3800 | (dir[i % dir.size()] < 0 ? 0x8000 : 0));
			}
			for (const char *be : {"none", "emulated"}) {
				const Result r = run(device, be, c, b, layers, steps, heavy, rows, heavy_rows, dir);
				std::printf("%7u %5u %-9s %12.1f %12.0f %14.1f %14.0f %12.1f %12.1f %12.1f %8.0f%%\n", c, b, be,
					    1e3 * r.step_s / layers, 1e3 * r.step_s / layers * MODEL_LAYERS, r.bus_bytes / 1e6 / layers,
					    r.bus_bytes / 1e6 / layers * MODEL_LAYERS, r.device_bytes / 1e6 / layers,
					    r.fetch_bytes / 1e6 / layers, r.whole_page_bytes / 1e6 / layers, 100 * r.spilled_fraction);
				std::fflush(stdout);
			}
		}
	std::printf("\nbus: bytes that crossed between host memory and the device per decode step (pool reads and writes, "
		    "and 8-byte Score Blocks for emulated); in-dev: K slab bytes the emulated device read internally; fetch: "
		    "bytes read to fetch the selected KV (only the 4 KiB blocks holding selected rows, whole slabs for pages "
		    "coming back to memory); if pages: what reading those pages' K and V slabs whole would have read.\n");
	return 0;
}
