// SPDX-License-Identifier: MIT
// make bench: replay throughput of the simulator's policies, per-access cost of the policy core, and
// memory per tracked sequence and per cached block. Every speed is printed next to a baseline measured
// in the same run on the same request stream: a bare hash-map probe per access (the floor of any
// policy that must find a block) and LRU.
#include <sys/utsname.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "libllmcache/sim/policy.hpp"
#include "libllmcache/util/flat_map.hpp"

extern "C" {
#include "libllmcache/core/core.h"
#include "machine.hpp"
}

using namespace llmcache::sim;
using Clock = std::chrono::steady_clock;

namespace {

// A decoder: a 16 MiB config scan, then per token 8 tokenizer lookups and a sweep of 128 MiB of weights.
std::vector<Request> decoder_stream(uint64_t tokens)
{
	std::vector<Request> out;
	uint64_t t = 0, rng = 88172645463325252ULL;
	auto add = [&](uint32_t file, uint64_t block) {
		out.push_back(Request{request_key(file, block), t += 100});
	};
	for (uint64_t b = 0; b < 4096; b++)
		add(2, b);
	for (uint64_t k = 0; k < tokens; k++) {
		for (int i = 0; i < 8; i++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			add(1, rng % 512);
		}
		for (uint64_t b = 0; b < 32768; b++)
			add(0, b);
	}
	return out;
}

long rss_kib()
{
	std::ifstream in("/proc/self/statm");
	long pages = 0, resident = 0;
	in >> pages >> resident;
	return resident * 4;
}

double seconds_since(Clock::time_point start)
{
	return std::chrono::duration<double>(Clock::now() - start).count();
}

double replay_rate(Policy &p, const std::vector<Request> &reqs, uint64_t &hits)
{
	p.prepare(reqs);
	hits = 0;
	auto start = Clock::now();
	for (const Request &r : reqs)
		hits += p.access(r);
	return double(reqs.size()) / seconds_since(start);
}

double hash_floor_rate(const std::vector<Request> &reqs, uint64_t capacity)
{
	llmcache::util::FlatMap<uint32_t> map(capacity);
	uint64_t found = 0;
	auto start = Clock::now();
	for (const Request &r : reqs) {
		if (map.find(r.key))
			found++;
		else if (map.size() < capacity)
			map.put(r.key, uint32_t(found));
	}
	double rate = double(reqs.size()) / seconds_since(start);
	if (found == ~uint64_t(0))
		std::puts(""); // keep the loop observable
	return rate;
}

} // namespace

int main(int argc, char **argv)
{
	uint64_t tokens = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 320;
	utsname u{};
	uname(&u);
	std::printf("machine: %s, %ld cores, Linux %s\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
		    u.release);

	std::vector<Request> reqs = decoder_stream(tokens);
	uint64_t footprint = 4096 + 512 + 32768, capacity = footprint / 2;
	std::printf("stream: decoder, %zu block accesses, footprint %llu blocks, cache %llu blocks (50%%)\n\n",
		    reqs.size(), (unsigned long long)footprint, (unsigned long long)capacity);

	double floor = hash_floor_rate(reqs, capacity);
	std::printf("%-22s %10s %10s %12s %12s\n", "replay (1 thread)", "M acc/s", "ns/acc", "vs hash", "hit ratio");
	std::printf("%-22s %10.1f %10.1f %12s %12s\n", "hash probe (floor)", floor / 1e6, 1e9 / floor, "1.00x", "-");
	double lru_rate = 0;
	for (const std::string &name : policy_names()) {
		auto p = make_policy(name, capacity);
		uint64_t hits;
		double rate = replay_rate(*p, reqs, hits);
		if (name == "lru")
			lru_rate = rate;
		std::printf("%-22s %10.1f %10.1f %11.2fx %11.1f%%\n", name.c_str(), rate / 1e6, 1e9 / rate,
			    rate / floor, 100.0 * double(hits) / double(reqs.size()));
	}
	if (lru_rate > 0)
		std::printf("reference: libCacheSim reports over 20 M requests/s for its replay; LRU here: %.1f M/s "
			    "(%.2fx of that)\n", lru_rate / 1e6, lru_rate / 20e6);

	llc_config cfg;
	llc_config_default(&cfg);
	uint64_t size = llc_core_size(&cfg);
	void *mem = std::aligned_alloc(8, (size + 7) & ~uint64_t(7));
	llc_core *core = llc_core_init(mem, size, &cfg);
	auto start = Clock::now();
	for (const Request &r : reqs)
		llc_access(core, key_file(r.key), key_block(r.key), r.time_ns);
	double core_ns = seconds_since(start) * 1e9 / double(reqs.size());
	std::printf("\ncore: llc_access %.1f ns per block access (%.2fx a hash probe); %u LOOP, %u SEQ, %u HOT sequences\n",
		    core_ns, core_ns / (1e9 / floor), llc_class_count(core, LLMCACHE_CLASS_LOOP),
		    llc_class_count(core, LLMCACHE_CLASS_SEQ), llc_class_count(core, LLMCACHE_CLASS_HOT));
	std::printf("core memory: %zu bytes per tracked sequence, %.2f bytes per remembered block "
		    "(default table: %llu KiB for %u sequences and %u chunks)\n",
		    sizeof(llc_seq), double(size - sizeof(llc_seq) * (cfg.max_seqs + 1)) /
		    (double(cfg.max_chunks) * LLC_CHUNK_BLOCKS), (unsigned long long)(size >> 10), cfg.max_seqs, cfg.max_chunks);

	// The same stream as the kernel module feeds it: runs of up to 32 consecutive blocks of a file (a
	// 128 KiB read, a fault-around) as one request, llc_access() for the first block and
	// llc_access_extend() for the blocks that only extend its sequence.
	struct Run {
		uint64_t file, first, count, time_ns;
	};
	std::vector<Run> runs;
	for (size_t i = 0, j; i < reqs.size(); i = j) {
		for (j = i + 1; j < reqs.size() && j - i < 32 && key_file(reqs[j].key) == key_file(reqs[i].key) &&
				key_block(reqs[j].key) == key_block(reqs[j - 1].key) + 1;
		     j++)
			;
		runs.push_back({key_file(reqs[i].key), key_block(reqs[i].key), j - i, reqs[i].time_ns});
	}
	core = llc_core_init(mem, size, &cfg);
	start = Clock::now();
	for (const Run &r : runs)
		for (uint64_t b = r.first, end = r.first + r.count; b < end;) {
			llc_verdict v = llc_access(core, r.file, b, r.time_ns);
			b += 1 + llc_access_extend(core, r.file, b + 1, end - b - 1, v.seq);
		}
	double run_ns = seconds_since(start) * 1e9 / double(reqs.size());
	std::printf("core: requests of up to 32 blocks (%.1f blocks on average) through llc_access_extend: "
		    "%.1f ns per block (%.2fx the per-block path)\n",
		    double(reqs.size()) / double(runs.size()), run_ns, core_ns / run_ns);
	std::free(mem);

	const uint64_t big = 1 << 20;
	for (const char *name : {"lru", "llm"}) {
		// The fixed part (the core's tables for llm) is what a one-block cache costs.
		long before = rss_kib();
		auto tiny = make_policy(name, 1);
		long fixed = rss_kib() - before;
		auto p = make_policy(name, big);
		for (uint64_t b = 0; b < big; b++)
			p->access(Request{request_key(0, b * 3), b}); // scattered: every block its own
		std::printf("%s: %.1f bytes per cached block (RSS growth over %llu cached blocks, less %ld KiB fixed)\n",
			    name, double(rss_kib() - before - 2 * fixed) * 1024 / double(big), (unsigned long long)big,
			    fixed);
	}
	return 0;
}
