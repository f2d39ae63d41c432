// SPDX-License-Identifier: MIT
// llmtrace convert: stream a trace from one format into another, with its file names and flags.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <set>

#include "strace_text.hpp"
#include "trace/trace.hpp"

namespace po = boost::program_options;
using namespace llmcache;

int cmd_convert(int argc, char **argv)
{
	std::string in, out, to, from = "auto";
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("to", po::value(&to), "output format: native, csv, oracleGeneral or strace (strace -f -ttt -yy style text)")
		("from", po::value(&from)->default_value(from), "input format: auto, native, strace, csv or oracleGeneral");
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
				     "  llmtrace convert app.trace app.oracle --to oracleGeneral\n";
			return 0;
		}
		if (in.empty() || out.empty())
			throw po::error("give the input and the output: llmtrace convert IN OUT --to FORMAT");
		if (to.empty())
			throw po::error("say which format to write: --to native, csv, oracleGeneral or strace");
	} catch (const po::error &e) {
		std::fprintf(stderr, "llmtrace convert: %s (see llmtrace convert --help)\n", e.what());
		return 2;
	}
	try {
		trace::Format tf = trace::parse_format(to);
		auto r = from == "auto" ? trace::open_reader(in) : trace::open_reader(in, trace::parse_format(from));
		auto w = llmtrace::open_writer(out, tf, r->producer().empty() ? "llmtrace convert" : r->producer());
		std::set<trace::FileKey> named;
		auto name_new = [&]() { // name files before their first access, once each
			if (r->paths().size() != named.size())
				for (const auto &[key, path] : r->paths())
					if (named.insert(key).second)
						w->name(key.first, key.second, path);
		};
		llmcache_access a;
		uint64_t n = 0;
		while (r->next(a)) {
			name_new();
			w->write(a);
			n++;
		}
		name_new();
		w->set_flags(r->flags());
		w->close();
		for (const auto &note : r->notes())
			std::fprintf(stderr, "llmtrace convert: note: %s\n", note.c_str());
		std::fprintf(stderr, "llmtrace convert: %llu records, %zu files\n", (unsigned long long)n, r->paths().size());
	} catch (const std::invalid_argument &e) {
		std::fprintf(stderr, "llmtrace convert: %s\n", e.what());
		return 2;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmtrace convert: %s\n", e.what());
		return 1;
	}
	return 0;
}
