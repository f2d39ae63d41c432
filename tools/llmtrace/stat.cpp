// SPDX-License-Identifier: MIT
// llmtrace stat: what a trace contains (records, files, footprint) and what the policy core makes of it:
// every block access goes through llc_access_req() with its record's length (a fault-around window faulted
// again is one access: libllmcache/core/core.h), then the sequences per class and the loops (length N,
// iterations, period) are reported. A write error on stdout (a full disk, /dev/full) is an error: the
// exit status says the summary was lost.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "core/core.h"
}
#include "progress.hpp"
#include "sim/policy.hpp"
#include "trace/trace.hpp"
#include "util/flat_map.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
using namespace llmcache;

namespace {

struct FileInfo {
	uint32_t dev;
	uint64_t inode;
	uint64_t records = 0, blocks = 0, footprint = 0;
};

struct Loop {
	uint32_t file;
	uint64_t start, n, iterations, period_vt, period_ns;
};

} // namespace

int cmd_stat(int argc, char **argv)
{
	std::string in, from = "auto", progress = "auto", max_memory_text = "auto";
	unsigned max_loops = 10;
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("from,f", po::value(&from)->default_value(from), "input format: auto, native, strace, csv or oracleGeneral")
		("progress", po::value(&progress)->default_value(progress),
		 "progress on stderr: auto (when stderr is a terminal), always or never")
		("loops", po::value(&max_loops)->default_value(max_loops), "list at most this many loops, longest first")
		("max-memory", po::value(&max_memory_text)->default_value(max_memory_text),
		 "refuse a trace whose footprint (about 64 bytes per distinct block) needs more than this; auto: half "
		 "the available memory")
		("json", "print the summary as JSON");
	po::options_description hidden;
	hidden.add_options()("in", po::value(&in));
	po::options_description all;
	all.add(opts).add(hidden);
	po::positional_options_description pos;
	pos.add("in", 1);
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
		po::notify(vm);
		if (vm.count("help")) {
			std::cout << "Usage: llmtrace stat TRACE [options]\n"
				     "Summarise a trace: records, files, footprint, and the block sequences the policy core\n"
				     "classifies (SEQ scans, LOOP per-token sweeps with their length N and period, HOT).\n\n"
				  << opts
				  << "\nEXAMPLES\n"
				     "  llmtrace stat app.trace\n"
				     "  llmtrace stat app.strace --json\n"
				     "\nExit status: 0 on success, 1 when the trace cannot be read or is malformed or the summary\n"
				     "cannot be written, 2 on bad options.\n";
			return 0;
		}
		if (in.empty())
			throw po::error("give the trace: llmtrace stat TRACE");
		if (from != "auto")
			trace::parse_format(from);
	} catch (const po::error &e) {
		std::fprintf(stderr, "llmtrace stat: %s (see llmtrace stat --help)\n", e.what());
		return 2;
	} catch (const std::invalid_argument &e) {
		std::fprintf(stderr, "llmtrace stat: --from: %s (see llmtrace stat --help)\n", e.what());
		return 2;
	}
	std::unique_ptr<llmtrace::Progress> bar;
	uint64_t max_memory = trace::available_memory() / 2;
	try {
		bar = std::make_unique<llmtrace::Progress>(progress, in);
		if (max_memory_text != "auto")
			max_memory = units::parse_bytes(max_memory_text);
	} catch (const std::invalid_argument &e) {
		std::fprintf(stderr, "llmtrace stat: %s (see llmtrace stat --help)\n", e.what());
		return 2;
	}

	llc_config cfg;
	llc_config_default(&cfg);
	uint64_t core_bytes = llc_core_size(&cfg);
	std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(64, (core_bytes + 63) & ~63ULL), &std::free);
	llc_core *core = mem ? llc_core_init(mem.get(), core_bytes, &cfg) : nullptr;
	if (!core) {
		std::fprintf(stderr, "llmtrace stat: failed to set up the policy core (%llu bytes)\n",
			     (unsigned long long)core_bytes);
		return 1;
	}

	std::vector<FileInfo> files;
	util::FlatMap<uint32_t> file_of(64);
	util::FlatMap<uint8_t> seen(1 << 16);
	uint64_t records = 0, blocks = 0, per_op[LLMCACHE_NR_OPS] = {}, first_ns = 0, last_ns = 0;
	trace::PathMap paths;
	std::vector<std::string> notes;
	try {
		auto r = from == "auto" ? trace::open_reader(in) : trace::open_reader(in, trace::parse_format(from));
		// The footprint map costs about 64 bytes a block (16-byte slots at most half full, doubled while
		// it grows); block keys are request_key(file, block): 24 bits of file, 40 of block.
		const uint64_t max_footprint = max_memory ? max_memory / 64 : UINT64_MAX;
		auto refuse = [&](const std::string &why) {
			trace::Reader::Position p = r->position();
			throw trace::TraceError(in == "-" ? "<stdin>" : in, p.kind, p.where, why);
		};
		llmcache_access a;
		while (r->next(a)) {
			bool inserted;
			uint32_t &idx = file_of.find_or_insert(llmcache_file_key(a.dev, a.inode), inserted);
			if (inserted) {
				if (files.size() >= (1u << 24))
					refuse("more than 2^24 distinct files: stat numbers files in 24 bits");
				idx = uint32_t(files.size());
				files.push_back({a.dev, a.inode});
			}
			if (a.first_block + a.nr_blocks > (uint64_t(1) << 40))
				refuse("block " + std::to_string(a.first_block + a.nr_blocks - 1) +
				       " is past 2^40 (4 PiB into the file): stat numbers blocks in 40 bits, like the simulator");
			FileInfo &f = files[idx];
			f.records++;
			f.blocks += a.nr_blocks;
			for (uint64_t b = a.first_block; b < a.first_block + a.nr_blocks; b++) {
				seen.find_or_insert(sim::request_key(idx, b), inserted);
				f.footprint += inserted;
				llc_access_req(core, idx, b, a.nr_blocks, a.time_ns);
			}
			if (!records)
				first_ns = a.time_ns;
			last_ns = std::max<uint64_t>(last_ns, a.time_ns);
			records++;
			blocks += a.nr_blocks;
			per_op[a.op < LLMCACHE_NR_OPS ? a.op : 0]++;
			if (seen.size() > max_footprint)
				refuse("the footprint passes " + std::to_string(max_footprint) + " blocks, about " +
				       units::format_bytes(max_memory) + " of memory (--max-memory); raise --max-memory or "
				       "cut the trace");
			bar->update(records, *r);
		}
		bar->clear();
		paths = r->paths();
		notes = r->notes();
	} catch (const std::exception &e) {
		bar->clear();
		std::fprintf(stderr, "llmtrace stat: %s\n", e.what());
		return 1;
	}
	// Whether the summary reached stdout: printf buffers, so a full disk shows at the flush.
	auto flushed = [] {
		if (std::fflush(stdout) == 0 && !std::ferror(stdout))
			return 0;
		std::fprintf(stderr, "llmtrace stat: failed to write the summary to stdout: %s\n", std::strerror(errno));
		return 1;
	};

	std::vector<Loop> loops;
	for (uint16_t id = llc_first(core, LLMCACHE_CLASS_LOOP); id; id = llc_next(core, id)) {
		const llc_seq *s = llc_seq_get(core, id);
		loops.push_back({uint32_t(s->file), s->start, s->end - s->start + 1, s->iterations, s->period_vt, s->period_ns});
	}
	std::sort(loops.begin(), loops.end(), [](const Loop &x, const Loop &y) { return x.n > y.n; });
	if (loops.size() > max_loops)
		loops.resize(max_loops);
	auto name = [&](uint32_t idx) {
		auto it = paths.find({files[idx].dev, files[idx].inode});
		return it != paths.end() ? it->second
					 : "dev " + std::to_string(files[idx].dev) + " inode " + std::to_string(files[idx].inode);
	};
	uint64_t footprint = seen.size();
	const uint64_t *st = llc_stats(core);
	uint32_t nseq = llc_class_count(core, LLMCACHE_CLASS_SEQ), nloop = llc_class_count(core, LLMCACHE_CLASS_LOOP),
		 nhot = llc_class_count(core, LLMCACHE_CLASS_HOT);

	if (vm.count("json")) {
		using Json = nlohmann::ordered_json;
		Json out = {{"records", records},
			    {"block_accesses", blocks},
			    {"reads", per_op[0]},
			    {"writes", per_op[1]},
			    {"mmap_faults", per_op[2]},
			    {"duration_ns", last_ns - first_ns},
			    {"footprint_blocks", footprint},
			    {"files", Json::array()}};
		for (size_t i = 0; i < files.size(); i++)
			out["files"].push_back({{"path", name(uint32_t(i))},
						{"dev", files[i].dev},
						{"inode", files[i].inode},
						{"records", files[i].records},
						{"block_accesses", files[i].blocks},
						{"footprint_blocks", files[i].footprint}});
		out["sequences"] = {{"seq", nseq}, {"loop", nloop}, {"hot", nhot}};
		out["blocks_by_class"] = {{"seq", st[LLMCACHE_STAT_SEQ_BLOCKS]},
					  {"loop", st[LLMCACHE_STAT_LOOP_BLOCKS]},
					  {"hot", st[LLMCACHE_STAT_HOT_BLOCKS]}};
		out["loop_iterations"] = st[LLMCACHE_STAT_LOOP_ITERATIONS];
		out["loops"] = Json::array();
		for (const Loop &l : loops)
			out["loops"].push_back({{"path", name(l.file)},
						{"first_block", l.start},
						{"n_blocks", l.n},
						{"iterations", l.iterations},
						{"period_accesses", l.period_vt},
						{"period_ns", l.period_ns}});
		// A path may hold any bytes: those that are not UTF-8 become U+FFFD.
		std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
		return flushed();
	}
	std::printf("%s: %llu records, %llu block accesses (%llu reads, %llu writes, %llu mmap faults) over %s\n",
		    in.c_str(), (unsigned long long)records, (unsigned long long)blocks, (unsigned long long)per_op[0],
		    (unsigned long long)per_op[1], (unsigned long long)per_op[2], units::format_duration(last_ns - first_ns).c_str());
	std::printf("footprint: %s in %zu files\n", units::format_bytes(footprint * LLMCACHE_BLOCK_SIZE).c_str(), files.size());
	int width = 4;
	for (size_t i = 0; i < files.size(); i++)
		width = std::max(width, int(name(uint32_t(i)).size()));
	std::printf("  %-*s %10s %14s %12s\n", width, "file", "records", "block accesses", "footprint");
	for (size_t i = 0; i < files.size(); i++)
		std::printf("  %-*s %10llu %14llu %12s\n", width, name(uint32_t(i)).c_str(), (unsigned long long)files[i].records,
			    (unsigned long long)files[i].blocks, units::format_bytes(files[i].footprint * LLMCACHE_BLOCK_SIZE).c_str());
	std::printf("classes (policy core): %u SEQ, %u LOOP, %u HOT sequences; block accesses %llu SEQ, %llu LOOP, "
		    "%llu HOT; %llu loop iterations\n",
		    nseq, nloop, nhot, (unsigned long long)st[LLMCACHE_STAT_SEQ_BLOCKS],
		    (unsigned long long)st[LLMCACHE_STAT_LOOP_BLOCKS], (unsigned long long)st[LLMCACHE_STAT_HOT_BLOCKS],
		    (unsigned long long)st[LLMCACHE_STAT_LOOP_ITERATIONS]);
	if (!loops.empty())
		std::printf("loops, longest first:\n  %-*s %17s %10s %10s %12s\n", width, "file", "blocks", "N", "iterations",
			    "period");
	for (const Loop &l : loops)
		std::printf("  %-*s %8llu-%-8llu %10llu %10llu %12s\n", width, name(l.file).c_str(), (unsigned long long)l.start,
			    (unsigned long long)(l.start + l.n - 1), (unsigned long long)l.n, (unsigned long long)l.iterations,
			    l.period_ns ? units::format_duration(l.period_ns).c_str() : "-");
	for (const auto &note : notes)
		std::printf("note: %s\n", note.c_str());
	return flushed();
}
