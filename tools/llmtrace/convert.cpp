// SPDX-License-Identifier: MIT
// llmtrace convert: stream a trace from one format into another, with its file names and flags. The
// output is written under a temporary name and renamed into place only when the whole input has been
// read without error; an output that is the input is refused before anything is opened for writing.
// What the output format cannot hold is said in a note, never dropped silently (strace text: mmap
// faults; oracleGeneral: flags, ops, pids, names, sub-second times). --files / --exclude-files keep the
// records of the files whose path matches (does not match) an extended regular expression, so that a
// trace's parts (a model, an engine's code) can be replayed apart; only the kept files are named.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <regex>

#include "progress.hpp"
#include "strace_text.hpp"
#include "trace/trace.hpp"

namespace po = boost::program_options;
using namespace llmcache;

int cmd_convert(int argc, char **argv)
{
	std::string in, out, to, from = "auto", progress = "auto", files, exclude_files;
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("to", po::value(&to), "output format: native, csv, oracleGeneral or strace (strace -f -ttt -yy style text)")
		("from,f", po::value(&from)->default_value(from), "input format: auto, native, strace, csv or oracleGeneral")
		("files", po::value(&files), "keep only the records of files whose path matches this extended regular "
		 "expression (searched anywhere in the path: '\\.gguf$')")
		("exclude-files", po::value(&exclude_files), "drop the records of files whose path matches this extended "
		 "regular expression")
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
				     "  llmtrace convert engine.trace code.trace --to native --exclude-files '\\.gguf$'\n"
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
	std::optional<std::regex> keep_re, drop_re;
	try {
		tf = trace::parse_format(to);
		if (from != "auto")
			ff = trace::parse_format(from);
	} catch (const std::invalid_argument &e) {
		std::fprintf(stderr, "llmtrace convert: %s (see llmtrace convert --help)\n", e.what());
		return 2;
	}
	auto compile = [](const std::string &text, const char *opt, std::optional<std::regex> &re) {
		if (text.empty())
			return true;
		try {
			re.emplace(text, std::regex::extended | std::regex::nosubs);
			return true;
		} catch (const std::regex_error &e) {
			std::fprintf(stderr, "llmtrace convert: %s '%s' is not an extended regular expression: %s\n", opt,
				     text.c_str(), e.what());
			return false;
		}
	};
	if (!compile(files, "--files", keep_re) || !compile(exclude_files, "--exclude-files", drop_re))
		return 2;
	const bool filtered = keep_re || drop_re;
	try {
		llmtrace::Progress bar(progress, in);
		auto r = from == "auto" ? trace::open_reader(in) : trace::open_reader(in, ff);
		auto w = llmtrace::open_writer(out, tf, r->producer().empty() ? "llmtrace convert" : r->producer());
		auto kept_path = [&](const std::string &path) {
			return (!keep_re || std::regex_search(path, *keep_re)) && (!drop_re || !std::regex_search(path, *drop_re));
		};
		std::map<trace::FileKey, bool> named; // every named file, and whether it is kept
		size_t kept_files = 0;
		auto name_new = [&]() { // name the kept files before their first access, once each
			if (r->paths().size() != named.size())
				for (const auto &[key, path] : r->paths())
					if (auto [it, added] = named.try_emplace(key, false); added && kept_path(path)) {
						it->second = true;
						kept_files++;
						w->name(key.first, key.second, path);
					}
		};
		llmcache_access a;
		uint64_t n = 0, kept = 0, faults = 0, writes = 0;
		while (r->next(a)) {
			name_new();
			bar.update(++n, *r);
			if (filtered) { // a file without a name matches nothing
				auto it = named.find(trace::FileKey{a.dev, a.inode});
				if (it == named.end() ? !!keep_re : !it->second)
					continue;
			}
			kept++;
			try {
				w->write(a);
			} catch (const std::invalid_argument &e) { // a sound record that the output format cannot hold
				trace::Reader::Position p = r->position();
				throw trace::TraceError(in == "-" ? "<stdin>" : in, p.kind, p.where, e.what());
			}
			faults += a.op == LLMCACHE_OP_MMAP_FAULT;
			writes += a.op == LLMCACHE_OP_WRITE;
		}
		bar.clear();
		name_new();
		if (filtered && r->paths().empty())
			throw std::runtime_error("the input names no files (an oracleGeneral trace keeps no names), so --files "
						 "and --exclude-files cannot select any; the output is left as it was");
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
		if (filtered)
			std::fprintf(stderr, "llmtrace convert: kept %llu of %llu records, %zu of %zu files\n",
				     (unsigned long long)kept, (unsigned long long)n, kept_files, r->paths().size());
		else
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
