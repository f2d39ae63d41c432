// SPDX-License-Identifier: MIT
// llmtrace convert: stream a trace from one format into another, with its file names and flags. The
// output is written under a temporary name and renamed into place only when the whole input has been
// read without error; an output that is the input is refused before anything is opened for writing.
// What the output format cannot hold is said in a note, never dropped silently (strace text: mmap
// faults; oracleGeneral: flags, ops, pids, names, sub-second times).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <set>

#include "progress.hpp"
#include "strace_text.hpp"
#include "trace/trace.hpp"

namespace po = boost::program_options;
using namespace llmcache;

int cmd_convert(int argc, char **argv)
{
	std::string in, out, to, from = "auto", progress = "auto";
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("to", po::value(&to), "output format: native, csv, oracleGeneral or strace (strace -f -ttt -yy style text)")
		("from,f", po::value(&from)->default_value(from), "input format: auto, native, strace, csv or oracleGeneral")
		("progress", po::value(&progress)->default_value(progress),
		 "progress on stderr: auto (when stderr is a terminal), always or never");
	po::options_description hidden;
	hidden.add_options()("in", po::value(&in))("out", po::value(&out));
	po::options_description all;
	all.add(opts).add(hidden);
	po::positional_options_description pos;
	pos.add("in", 1).add("out", 1);
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
		po::notify(vm);
		if (vm.count("help")) {
			std::cout << "Usage: llmtrace convert IN OUT --to FORMAT [--from FORMAT]\n"
				     "Convert a trace (\"-\": stdin / stdout). File names and flags are carried over.\n\n"
				  << opts
				  << "\nEXAMPLES\n"
				     "  llmtrace convert app.trace app.csv --to csv\n"
				     "  llmtrace convert app.strace app.trace --to native\n"
				     "  llmtrace convert app.trace app.oracle --to oracleGeneral\n"
				     "\nExit status: 0 on success, 1 when the input cannot be read or is malformed or the output\n"
				     "cannot be written (the output is then left as it was), 2 on bad options.\n";
			return 0;
		}
		if (in.empty() || out.empty())
			throw po::error("give the input and the output: llmtrace convert IN OUT --to FORMAT");
		if (to.empty())
			throw po::error("say which format to write: --to native, csv, oracleGeneral or strace");
		if (trace::same_file(in, out))
			throw po::error("the output " + out + " is the input " + in +
					": converting in place would destroy it; write to another file and rename it");
	} catch (const po::error &e) {
		std::fprintf(stderr, "llmtrace convert: %s (see llmtrace convert --help)\n", e.what());
		return 2;
	}
	trace::Format tf, ff = trace::Format::native;
	try {
		tf = trace::parse_format(to);
		if (from != "auto")
			ff = trace::parse_format(from);
	} catch (const std::invalid_argument &e) {
		std::fprintf(stderr, "llmtrace convert: %s (see llmtrace convert --help)\n", e.what());
		return 2;
	}
	try {
		llmtrace::Progress bar(progress, in);
		auto r = from == "auto" ? trace::open_reader(in) : trace::open_reader(in, ff);
		auto w = llmtrace::open_writer(out, tf, r->producer().empty() ? "llmtrace convert" : r->producer());
		std::set<trace::FileKey> named;
		auto name_new = [&]() { // name files before their first access, once each
			if (r->paths().size() != named.size())
				for (const auto &[key, path] : r->paths())
					if (named.insert(key).second)
						w->name(key.first, key.second, path);
		};
		llmcache_access a;
		uint64_t n = 0, faults = 0, writes = 0;
		while (r->next(a)) {
			name_new();
			try {
				w->write(a);
			} catch (const std::invalid_argument &e) { // a sound record that the output format cannot hold
				trace::Reader::Position p = r->position();
				throw trace::TraceError(in == "-" ? "<stdin>" : in, p.kind, p.where, e.what());
			}
			faults += a.op == LLMCACHE_OP_MMAP_FAULT;
			writes += a.op == LLMCACHE_OP_WRITE;
			bar.update(++n, *r);
		}
		bar.clear();
		name_new();
		uint32_t flags = r->flags();
		if (faults && tf == trace::Format::strace)
			flags |= LLMCACHE_TRACE_F_MMAP_UNSEEN; // a strace reader cannot see them, as with real strace
		w->set_flags(flags);
		w->close();
		for (const auto &note : r->notes())
			std::fprintf(stderr, "llmtrace convert: note: %s\n", note.c_str());
		if (faults && tf == trace::Format::strace)
			std::fprintf(stderr,
				     "llmtrace convert: note: %llu mmap-fault records have no system call: they are written as "
				     "mmap_fault() lines, which strace readers skip, and the output is flagged MMAP_UNSEEN; "
				     "convert to native or csv to keep them\n",
				     (unsigned long long)faults);
		if (tf == trace::Format::oracle_general) {
			// The format has a time in seconds, an object and a size per block: say what it drops.
			std::string dropped;
			auto add = [&](const std::string &what) { dropped += (dropped.empty() ? "" : ", ") + what; };
			if (const std::string fl = trace::flags_line(flags); !fl.empty()) // "# flags: A,B"
				add("the flags (" + fl.substr(fl.find(": ") + 2) + ")");
			if (writes || faults)
				add("the ops of " + std::to_string(writes) + " write and " + std::to_string(faults) +
				    " mmap-fault records (read back as reads)");
			if (!r->paths().empty())
				add("the names of " + std::to_string(r->paths().size()) + " files");
			if (!dropped.empty())
				std::fprintf(stderr,
					     "llmtrace convert: note: oracleGeneral keeps one request per block, its time in whole "
					     "seconds, and no pids: %s are not kept; convert to native or csv to keep them\n",
					     dropped.c_str());
		}
		std::fprintf(stderr, "llmtrace convert: %llu records, %zu files\n", (unsigned long long)n, r->paths().size());
	} catch (const std::invalid_argument &e) { // --progress, or a format the input cannot be read as
		std::fprintf(stderr, "llmtrace convert: %s\n", e.what());
		return 2;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmtrace convert: %s\n", e.what());
		return 1;
	}
	return 0;
}
