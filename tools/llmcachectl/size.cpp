// SPDX-License-Identifier: MIT
/*
 * `llmcachectl size`: the sizing rule of Kim, Lee and Bahn (equation 1, sections 4.1-4.2). A loop of N
 * blocks re-read every iteration runs without I/O stalls when the loop cache holds
 * S >= max(0, floor(N - BW*T)) of its blocks, BW being the storage bandwidth in blocks/s and T the fetch
 * delay allowed per iteration (the per-token compute time, 100 ms by default). Given a cache it prints
 * the largest loop it sustains, N = S + BW*T; given a loop it prints the cache it needs and, with a cache,
 * the deficit and the stall per iteration. The arithmetic is the policy core's (core.h), in 4 KiB blocks.
 * Documentation/sizing.md works through the paper's examples.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

extern "C" {
#include "core/core.h"
}
#include "kmod.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
namespace units = llmcache::units;
using llmcache::kmod::Json;
using llmcache::kmod::json_text;

namespace {

constexpr uint64_t block = LLMCACHE_BLOCK_SIZE;

// The JSON's rounded figures: MB to a tenth, tokens/s to a thousandth.
double tenths(double v) { return std::round(v * 10) / 10; }
double thousandths(double v) { return std::round(v * 1000) / 1000; }

struct Scenario {
	std::string name;
	uint64_t cache = 0, hot = 0; // bytes
};

struct Device {
	const char *name;
	const char *bw;
	std::vector<Scenario> scenarios;
};

// Section 4.2: a watch gives ~64 MiB of cache to the LLM, <4 MiB of it for the hot set, over eMMC at
// ~100 MB/s; a phone reserves 256-512 MiB for loop data alone, over UFS 4.0 at >= 1 GB/s.
const Device devices[] = {
	{"watch", "100MB/s", {{"watch", 64ULL << 20, 4ULL << 20}}},
	{"phone", "1GB/s", {{"phone-256MiB", 256ULL << 20, 0}, {"phone-512MiB", 512ULL << 20, 0}}},
};

std::string mb(uint64_t bytes)
{
	char buf[64];
	std::snprintf(buf, sizeof(buf), "%.1f MB = %.1f MiB", bytes / 1e6, bytes / 1048576.0);
	return buf;
}

uint64_t parse(const char *opt, const std::string &text, uint64_t (*fn)(std::string_view))
{
	try {
		return fn(text);
	} catch (const std::invalid_argument &e) {
		throw po::error(std::string("--") + opt + ": " + e.what());
	}
}

int size(int argc, char **argv)
{
	std::string cache, hot, loop, bw, t = "100ms", device;
	bool json = false;
	po::options_description d("Options");
	d.add_options()
		("help,h", "show this help")
		("cache", po::value(&cache), "cache for the LLM's files: hot set plus loop cache")
		("hot", po::value(&hot), "the part of the cache kept for the hot set (default 0, or the device's)")
		("loop", po::value(&loop), "loop size N: weight bytes read once per iteration (token)")
		("bw", po::value(&bw), "sustained storage read bandwidth, e.g. 100MB/s")
		("t", po::value(&t)->default_value(t), "fetch delay allowed per iteration (the per-token time)")
		("device", po::value(&device), "the paper's presets: watch (64 MiB cache, 4 MiB hot, 100 MB/s) or "
					       "phone (256 and 512 MiB loop cache, 1 GB/s); options given override them")
		("json", po::bool_switch(&json), "print JSON");
	po::variables_map vm;
	auto parsed = po::command_line_parser(argc, argv).options(d).allow_unregistered().run();
	for (const auto &extra : po::collect_unrecognized(parsed.options, po::include_positional))
		throw po::error("unexpected argument '" + extra + "'");
	po::store(parsed, vm);
	po::notify(vm);
	if (vm.count("help")) {
		std::cout << "Usage: llmcachectl size [options]\n\n"
			  << "The sizing rule: a loop of N blocks needs S >= max(0, floor(N - BW*T)) cached blocks to run\n"
			  << "without I/O stalls, so a loop cache of S blocks sustains N = S + BW*T. 1 block = 4 KiB.\n\n"
			  << d << "\nEXAMPLES\n"
			  << "  llmcachectl size --device watch                   # the largest loop a watch sustains\n"
			  << "  llmcachectl size --device phone --json\n"
			  << "  llmcachectl size --cache 1GiB --hot 16MiB --bw 2GB/s --t 50ms\n"
			  << "  llmcachectl size --loop 600MB --bw 1GB/s          # the cache a 600 MB loop needs\n"
			  << "  llmcachectl size --loop 500MB --device watch      # deficit and stall on a watch\n";
		return 0;
	}

	std::vector<Scenario> scen;
	if (!device.empty()) {
		const Device *dev = nullptr;
		for (const auto &x : devices)
			if (device == x.name)
				dev = &x;
		if (!dev)
			throw po::error("--device: '" + device + "' is not a known device; use watch or phone");
		scen = dev->scenarios;
		if (bw.empty())
			bw = dev->bw;
	}
	if (!cache.empty())
		scen = {{"cache", parse("cache", cache, units::parse_bytes), scen.empty() ? 0 : scen[0].hot}};
	bool have_cache = !scen.empty();
	std::optional<uint64_t> n_bytes;
	if (!loop.empty())
		n_bytes = parse("loop", loop, units::parse_bytes);
	if (!have_cache && !n_bytes)
		throw po::error("give a cache (--cache or --device) for the loop it sustains, or --loop for the cache it "
				"needs");
	if (!have_cache)
		scen.push_back({"loop"});
	if (!hot.empty())
		for (auto &s : scen)
			s.hot = parse("hot", hot, units::parse_bytes);
	for (const auto &s : scen)
		if (have_cache && (s.hot + block - 1) / block > s.cache / block)
			throw po::error("the hot set (" + units::format_bytes(s.hot) + ") is larger than the cache (" +
					units::format_bytes(s.cache) + ")");
	if (bw.empty())
		throw po::error("give the storage bandwidth with --bw (e.g. --bw 100MB/s) or a --device");
	uint64_t bw_bytes = parse("bw", bw, units::parse_bandwidth);
	uint64_t bw_blocks = bw_bytes / block;
	if (!bw_blocks)
		throw po::error("--bw: '" + bw + "' is less than one 4 KiB block per second");
	uint64_t t_ns = parse("t", t, units::parse_duration_ns);
	// Nothing may wrap silently. The core computes BW*T as blocks/s x ns in 64 bits (exact below 2^64,
	// e.g. 1.8e9 blocks/s at T = 10 s): checked here in 128 bits first. The cache and the loop are held
	// to 4 EiB each, so their sums with BW*T, in bytes, stay within 64 bits too.
	constexpr uint64_t limit = 1ull << 62;
	if ((unsigned __int128)bw_blocks * t_ns + 1'000'000'000u > UINT64_MAX)
		throw po::error("--bw " + bw + " x --t " + t + " is beyond what the sizing rule computes exactly (BW in "
				"4 KiB blocks/s times T in ns must stay below 2^64, e.g. 1.8e9 blocks/s at T = 10 s): lower "
				"--bw or --t");
	for (const auto &s : scen)
		if (s.cache > limit)
			throw po::error("--cache " + units::format_bytes(s.cache) + " is more than 4 EiB");
	if (n_bytes && *n_bytes > limit)
		throw po::error("--loop " + loop + " is more than 4 EiB");
	for (const auto &s : scen) { // the stall, (N - S)/BW in ns, must fit in 64 bits too
		const uint64_t n = n_bytes ? (*n_bytes + block - 1) / block : 0, hot_blocks = (s.hot + block - 1) / block;
		const uint64_t s_blocks = have_cache ? s.cache / block - hot_blocks : 0;
		if (have_cache && n > s_blocks &&
		    (unsigned __int128)(n - s_blocks) * 1'000'000'000u / bw_blocks > UINT64_MAX - t_ns)
			throw po::error("the stall per iteration of this loop is beyond 500 years: is --bw " + bw + " right?");
	}
	uint64_t bwt = llc_size_max_loop(0, bw_blocks, t_ns); // floor(BW*T)

	Json out = {{"mode", n_bytes ? "min_cache" : "max_loop"},
		    {"device", device.empty() ? Json() : Json(device)},
		    {"bw_bytes_per_s", bw_bytes},
		    {"bw_blocks_per_s", bw_blocks},
		    {"t_ns", t_ns},
		    {"bw_t_blocks", bwt},
		    {"scenarios", Json::array()}};
	if (!json)
		std::printf("bandwidth %.1f MB/s = %llu blocks/s, T = %s: BW*T = %llu blocks (%s)\n", bw_bytes / 1e6,
			    (unsigned long long)bw_blocks, units::format_duration(t_ns).c_str(), (unsigned long long)bwt,
			    mb(bwt * block).c_str());

	for (const auto &s : scen) {
		uint64_t hot_blocks = (s.hot + block - 1) / block;
		uint64_t s_blocks = have_cache ? s.cache / block - hot_blocks : 0;
		auto u = [](uint64_t v) { return (unsigned long long)v; };
		if (!n_bytes) {
			uint64_t n = llc_size_max_loop(s_blocks, bw_blocks, t_ns);
			// Section 4.2 adds the cache in MiB to BW*T in MB: (64 - 4) + 100 x 0.1 = 70.
			double paper = s_blocks * block / 1048576.0 + bw_bytes * (t_ns / 1e9) / 1e6;
			if (json)
				out["scenarios"].push_back({{"name", s.name},
							    {"cache_bytes", s.cache},
							    {"hot_bytes", s.hot},
							    {"loop_cache_blocks", s_blocks},
							    {"loop_cache_bytes", s_blocks * block},
							    {"max_loop_blocks", n},
							    {"max_loop_bytes", n * block},
							    {"max_loop_mb", tenths(n * block / 1e6)},
							    {"max_loop_mib", tenths(n * block / 1048576.0)},
							    {"paper_estimate", tenths(paper)}});
			else
				std::printf("%s: cache %s - hot set %s = loop cache S = %llu blocks (%s)\n"
					    "  sustainable loop N = S + BW*T = %llu + %llu = %llu blocks = %s\n"
					    "  the paper's rounding (S in MiB + BW*T in MB): %.1f + %.1f = %.1f \"MB\"\n",
					    s.name.c_str(), units::format_bytes(s.cache).c_str(), units::format_bytes(s.hot).c_str(),
					    u(s_blocks), mb(s_blocks * block).c_str(), u(s_blocks), u(bwt), u(n), mb(n * block).c_str(),
					    s_blocks * block / 1048576.0, bw_bytes * (t_ns / 1e9) / 1e6, paper);
			continue;
		}
		uint64_t n = (*n_bytes + block - 1) / block;
		uint64_t need = llc_size_min_blocks(n, bw_blocks, t_ns);
		uint64_t need_cache = (need + hot_blocks) * block;
		Json scenario = {{"name", s.name},
				 {"hot_bytes", s.hot},
				 {"loop_blocks", n},
				 {"loop_bytes", n * block},
				 {"min_loop_cache_blocks", need},
				 {"min_loop_cache_bytes", need * block},
				 {"min_cache_bytes", need_cache}};
		if (!json)
			std::printf("loop N = %llu blocks (%s): needs loop cache S >= N - BW*T = %llu blocks (%s)\n"
				    "  cache needed with hot set %s: %s\n",
				    u(n), mb(n * block).c_str(), u(need), mb(need * block).c_str(),
				    units::format_bytes(s.hot).c_str(), mb(need_cache).c_str());
		if (have_cache) {
			uint64_t deficit = need > s_blocks ? need - s_blocks : 0;
			uint64_t stall = llc_stall_ns(n, s_blocks, bw_blocks, t_ns);
			double tps = 1e9 / double(t_ns + stall);
			scenario.update({{"cache_bytes", s.cache},
					 {"loop_cache_blocks", s_blocks},
					 {"deficit_blocks", deficit},
					 {"deficit_bytes", deficit * block},
					 {"stall_ns", stall},
					 {"tokens_per_s_max", thousandths(tps)}});
			if (!json)
				std::printf("%s: cache %s - hot set %s = loop cache S = %llu blocks (%s)\n"
					    "  deficit %llu blocks (%s); stall per iteration max(0, (N - S)/BW - T) = %s;"
					    " at most %.2f tokens/s (T + stall per token)\n",
					    s.name.c_str(), units::format_bytes(s.cache).c_str(), units::format_bytes(s.hot).c_str(),
					    u(s_blocks), mb(s_blocks * block).c_str(), u(deficit), mb(deficit * block).c_str(),
					    units::format_duration(stall).c_str(), tps);
		}
		out["scenarios"].push_back(scenario);
	}
	if (json)
		std::printf("%s\n", json_text(out).c_str());
	return 0;
}

} // namespace

int cmd_size(int argc, char **argv)
{
	try {
		return size(argc, argv);
	} catch (const po::error &e) {
		std::fprintf(stderr, "llmcachectl size: %s (see llmcachectl size --help)\n", e.what());
		return 2;
	}
}
