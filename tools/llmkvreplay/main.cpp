// SPDX-License-Identifier: MIT
// llmkvreplay: replay a KV trace (written by llmcached --kv-trace, kv/kv_trace.hpp) through the KV
// policy (kv/policy_*.hpp) and print, per set of parameters, the tokens kept in the CPU pool and
// spilled, the tokens selected and where they were, and the bytes that would cross the bus; --check
// compares the replay's decisions with the recorded ones. An AERP session's trace replays Kelle's
// eviction and format decisions (and EdgeInfinite's folds) instead, and prints their figures. See
// Documentation/kv.md, "KV traces and llmkvreplay".
#include <boost/program_options.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <system_error>

#include "kv/kv_replay.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
using namespace llmcache;
using namespace llmcache::kv;

namespace {

constexpr int exit_trace = 1; // unreadable or malformed trace, a check that failed, an unwritable output
constexpr int exit_usage = 2;

struct Usage : std::runtime_error {
	using std::runtime_error::runtime_error;
};

std::vector<std::string> split_list(const std::string &s)
{
	std::vector<std::string> out;
	std::stringstream in(s);
	for (std::string item; std::getline(in, item, ',');)
		out.push_back(item);
	return out;
}

std::string read_all(const std::string &path)
{
	std::ostringstream ss;
	if (path == "-") {
		ss << std::cin.rdbuf();
		return ss.str();
	}
	std::ifstream in(path, std::ios::binary);
	if (!in)
		throw std::system_error(errno ? errno : ENOENT, std::generic_category(), "cannot open " + path);
	ss << in.rdbuf();
	if (in.bad())
		throw std::system_error(EIO, std::generic_category(), "cannot read " + path);
	return ss.str();
}

const char *const TABLE_HEAD = "  cpu_budget   beta cpu_tokens stor_tokens  selected from_stor   spilled    clean promoted   spills"
				"      written      fetched      scanned\n";
const char *const AERP_HEAD = "aerp_budget d_model memory   appends   selects  selected   evicted ev_tokens  retained  x_tokens"
			      "  bytes/token    folded recomputed\n";

void aerp_row(std::ostream &o, const KvReplayResult &r)
{
	const KvReplayFigures &f = r.figures;
	char b[512];
	std::snprintf(b, sizeof(b), "%11u %7u %6d %9llu %9llu %9llu %9llu %9llu %9llu %9llu %12.1f %9llu %10llu\n",
		      r.params.aerp.budget, r.params.aerp.d_model, r.params.memory ? 1 : 0, (unsigned long long)f.appends,
		      (unsigned long long)f.selects, (unsigned long long)f.selected, (unsigned long long)f.aerp_evicted_heads,
		      (unsigned long long)f.aerp_evicted_tokens, (unsigned long long)f.aerp_tokens,
		      (unsigned long long)f.aerp_x_tokens, f.aerp_tokens ? (double)f.aerp_bytes / f.aerp_tokens : 0.0,
		      (unsigned long long)f.memory_folded, (unsigned long long)f.aerp_recomputed);
	o << b;
}

void row(std::ostream &o, const KvReplayResult &r)
{
	if (r.params.aerp.budget)
		return aerp_row(o, r);
	const KvReplayFigures &f = r.figures;
	char b[512];
	std::snprintf(b, sizeof(b), "%12s %6g %9llu %9llu %9llu %9llu %9llu %8llu %8llu %8llu %12s %12s %12s\n",
		      units::format_bytes(r.params.policy.cpu_budget).c_str(), r.params.beta, (unsigned long long)f.cpu_tokens,
		      (unsigned long long)f.storage_tokens, (unsigned long long)f.selected,
		      (unsigned long long)f.selected_from_storage, (unsigned long long)f.spilled_pages,
		      (unsigned long long)f.clean_spills, (unsigned long long)f.promoted_pages, (unsigned long long)f.spills,
		      units::format_bytes(f.bytes_written).c_str(), units::format_bytes(f.bytes_fetched).c_str(),
		      units::format_bytes(f.bytes_scanned).c_str());
	o << b;
}

// A token count option: a whole number up to 2^32 - 1 (units::parse_count: "-1" is refused, not wrapped).
uint32_t token_option(const po::variables_map &vm, const char *name)
{
	const std::string &text = vm[name].as<std::string>();
	try {
		const uint64_t v = llmcache::units::parse_count(text);
		if (v <= UINT32_MAX)
			return uint32_t(v);
	} catch (const std::invalid_argument &) {
	}
	throw Usage(std::string("--") + name + " '" + text + "': give a number of tokens, a whole number from 0 to 4294967295");
}

int run(int argc, char **argv)
{
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("version", "print the version")
		("cpu-budget,b", po::value<std::string>()->value_name("LIST"),
		 "comma-separated CPU pool budgets (64MiB, 1GiB, ...), one replay each (default: as recorded)")
		("beta", po::value<double>()->value_name("F"), "a fixed CPU:storage split (0 = none; default: as recorded, adaptive as none)")
		("sink-tokens", po::value<std::string>()->value_name("N"), "first tokens always kept (default: as recorded)")
		("recent-tokens", po::value<std::string>()->value_name("N"), "last tokens always kept (default: as recorded)")
		("page-tokens", po::value<std::string>()->value_name("N"), "tokens per page, 1-4096 (default: as recorded)")
		("select-budget", po::value<std::string>()->value_name("N"), "tokens per select (default: each select's recorded budget)")
		("memory-only", po::bool_switch(), "replay without a storage pool: nothing spills")
		("write-through", po::value<std::string>()->value_name("on|off"),
		 "write full pages to the device as they fill, so that their first spill is clean (default: as recorded)")
		("check", po::bool_switch(), "compare every decision with the recorded one; exit 1 at the first that differs "
					      "(only with the recorded parameters)")
		("decisions", po::value<std::string>()->value_name("FILE"),
		 "write the replay's decisions (s, p and v lines of the trace format; s, f and e for AERP) to FILE (- = stdout); one budget only")
		("json", po::bool_switch(), "print the figures as JSON, one object per replay, instead of the table");
	po::options_description hidden;
	hidden.add_options()("trace", po::value<std::vector<std::string>>());
	po::options_description all;
	all.add(opts).add(hidden);
	po::positional_options_description pos;
	pos.add("trace", -1);
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
		po::notify(vm);
	} catch (const po::error &e) {
		throw Usage(std::string(e.what()) + " (see --help)");
	}
	if (vm.count("version")) {
		std::cout << "llmkvreplay " LLMCACHE_VERSION "\n";
		return std::cout.flush() ? 0 : exit_trace;
	}
	if (vm.count("help")) {
		std::cout << "Usage: llmkvreplay TRACE [options]\n\n"
			     "Replay a KV trace (llmcached --kv-trace) through the KV policy: the spill victims, the\n"
			     "selection and the pool update, with the recorded scores and no KV data. Prints per set of\n"
			     "parameters the tokens in the CPU pool and on storage at the end, the tokens selected and\n"
			     "those read from storage, pages spilled (clean: spilled again without a write, their device\n"
			     "copy kept) and brought back, and the payload bytes written, fetched and (for a host-scoring\n"
			     "backend) scanned. The trace of an AERP session (Kelle's eviction and recomputation, with\n"
			     "or without EdgeInfinite's compressed memory) replays its accumulation, evictions and\n"
			     "format decisions over the recorded logits, with the recorded parameters (only\n"
			     "--select-budget varies), and prints the (token, head) pairs evicted, the tokens retained\n"
			     "and stored as x, the bytes stored per retained token and the pairs folded into the\n"
			     "memory. TRACE may be - for stdin.\n\n"
			  << opts
			  << "\nEXAMPLES\n"
			     "  llmkvreplay /var/tmp/kv.trace.1 --check\n"
			     "  llmkvreplay /var/tmp/kv.trace.1 --cpu-budget 16MiB,64MiB,256MiB\n"
			     "  llmkvreplay /var/tmp/kv.trace.1 --recent-tokens 256 --select-budget 512 --json\n"
			     "  llmkvreplay /var/tmp/kv.trace.1 --write-through on   (what writing full pages through writes)\n"
			     "\nExit status: 0 on success, 1 when the trace cannot be read or is malformed, a --check\n"
			     "finds a difference or an output cannot be written; 2 on bad options.\n";
		return std::cout.flush() ? 0 : exit_trace;
	}
	const auto traces = vm.count("trace") ? vm["trace"].as<std::vector<std::string>>() : std::vector<std::string>{};
	if (traces.size() != 1)
		throw Usage(traces.empty() ? "give one TRACE (see --help)" : "one TRACE only, not " + std::to_string(traces.size()));
	KvReplayOverrides o;
	std::vector<uint64_t> budgets{0};
	if (vm.count("cpu-budget")) {
		budgets.clear();
		for (const std::string &b : split_list(vm["cpu-budget"].as<std::string>())) {
			uint64_t v;
			try {
				v = units::parse_bytes(b);
			} catch (const std::exception &e) {
				throw Usage(std::string("--cpu-budget: ") + e.what());
			}
			if (v < 4096)
				throw Usage("--cpu-budget " + b + ": must be at least 4KiB");
			budgets.push_back(v);
		}
		if (budgets.empty())
			throw Usage("--cpu-budget: give at least one size");
	}
	if (vm.count("beta")) {
		o.beta = vm["beta"].as<double>();
		if (!(o.beta >= 0 && o.beta <= 1e6))
			throw Usage("--beta: must be from 0 to 1e6 (the adaptive split depends on measured rates, which a trace does not hold)");
	}
	if (vm.count("sink-tokens"))
		o.sink_tokens = token_option(vm, "sink-tokens");
	if (vm.count("recent-tokens"))
		o.recent_tokens = token_option(vm, "recent-tokens");
	if (vm.count("page-tokens")) {
		o.page_tokens = token_option(vm, "page-tokens");
		if (o.page_tokens < 1 || o.page_tokens > 4096)
			throw Usage("--page-tokens: must be from 1 to 4096");
	}
	if (vm.count("select-budget"))
		o.select_budget = token_option(vm, "select-budget");
	if (vm["memory-only"].as<bool>())
		o.device = 0;
	if (vm.count("write-through")) {
		const std::string w = vm["write-through"].as<std::string>();
		if (w != "on" && w != "off")
			throw Usage("--write-through " + w + ": use on or off");
		o.write_through = w == "on";
	}
	const bool check = vm["check"].as<bool>(), json = vm["json"].as<bool>();
	const bool overridden = vm.count("cpu-budget") || vm.count("beta") || vm.count("sink-tokens") || vm.count("recent-tokens") ||
				vm.count("page-tokens") || vm.count("select-budget") || o.device == 0 || vm.count("write-through");
	if (check && overridden)
		throw Usage("--check compares with the recorded decisions: give no parameter to vary");
	if (vm.count("decisions") && budgets.size() > 1)
		throw Usage("--decisions writes one replay's decisions: give one --cpu-budget");

	const std::string text = read_all(traces[0]);
	std::ostringstream out;
	bool diverged = false;
	for (size_t i = 0; i < budgets.size(); i++) {
		o.cpu_budget = budgets[i];
		std::istringstream in(text);
		KvReplayResult r;
		std::string err;
		if (replay_kv_trace(in, o, vm.count("decisions") > 0, check, r, err) < 0)
			throw std::runtime_error(traces[0] + ": " + err);
		if (json)
			out << format_kv_replay_json(r) << '\n';
		else
			row(out << (i ? "" : r.params.aerp.budget ? AERP_HEAD : TABLE_HEAD), r);
		if (check) {
			if (!r.divergence.empty()) {
				std::cerr << "llmkvreplay: " << traces[0] << ": the replay differs from the recorded run: " << r.divergence << '\n';
				diverged = true;
			} else if (!json) {
				out << "check: " << r.recorded_decisions << " recorded decisions, all reproduced\n";
			}
		}
		if (vm.count("decisions")) {
			const std::string path = vm["decisions"].as<std::string>();
			std::ofstream f;
			std::ostream &d = path == "-" ? std::cout : (f.open(path, std::ios::binary), f);
			d << format_kv_trace_header(r.header);
			for (const KvTraceEvent &e : r.decisions)
				d << format_kv_trace_event(e);
			d.flush();
			if (!d)
				throw std::system_error(errno ? errno : EIO, std::generic_category(), "cannot write " + path);
		}
	}
	std::cout << out.str() << std::flush;
	if (!std::cout)
		throw std::system_error(errno ? errno : EIO, std::generic_category(), "cannot write to stdout");
	return diverged ? exit_trace : 0;
}

} // namespace

int main(int argc, char **argv)
{
	try {
		return run(argc, argv);
	} catch (const Usage &e) {
		std::cerr << "llmkvreplay: " << e.what() << '\n';
		return exit_usage;
	} catch (const std::exception &e) {
		std::cerr << "llmkvreplay: " << e.what() << '\n';
		return exit_trace;
	}
}
