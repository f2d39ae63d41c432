// SPDX-License-Identifier: MIT
// llmreplay: replay a block-access trace through cache policies at several cache sizes and report hit
// ratios (the paper's Figure 4), the llm policy's per-class hits, and the data-fetch latency model
// (Figure 5). See Documentation/replay.md.
//
// The replay keeps one 16-byte request per block access in memory, so the trace is read through
// trace::limit_blocks() with a bound from --max-memory: a trace that claims more stops with the offset or
// line of the record that passed the bound instead of std::bad_alloc. Every output, stdout included, is
// checked after its last write: results that did not reach their file are an error, not exit status 0.
#include <boost/program_options.hpp>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>

#include "sim/enforce.hpp"
#include "sim/replay.hpp"
#include "sim/report.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
using namespace llmcache;
using namespace llmcache::sim;

namespace {

constexpr int exit_trace = 1; // the trace or an output file cannot be read / written, or is malformed
constexpr int exit_usage = 2; // bad options

struct Usage : std::runtime_error {
	using std::runtime_error::runtime_error;
};

std::vector<std::string> split(const std::string &s)
{
	std::vector<std::string> out;
	std::stringstream ss(s);
	for (std::string item; std::getline(ss, item, ',');)
		out.push_back(item);
	return out;
}

std::string join(const std::vector<std::string> &v)
{
	std::string out;
	for (const auto &s : v)
		out += (out.empty() ? "" : ", ") + s;
	return out;
}

std::vector<std::string> parse_policies(const std::string &list)
{
	const std::vector<std::string> known = policy_names();
	if (list == "all")
		return known;
	std::vector<std::string> out;
	for (const auto &name : split(list)) {
		if (std::find(known.begin(), known.end(), name) == known.end())
			throw Usage("unknown policy '" + name + "'; known policies: " + join(known) + " (or all)");
		if (std::find(out.begin(), out.end(), name) == out.end())
			out.push_back(name);
	}
	if (out.empty())
		throw Usage("--policies is empty; known policies: " + join(known) + " (or all)");
	return out;
}

// --sizes: parse_cache_sizes() with "N blocks" for a count of 4 KiB blocks; a plain number itself is
// refused, because llmworkload, llmtrace and llmcachectl read plain numbers as bytes. Each size keeps the
// text the user wrote, for the report.
std::vector<CacheSize> parse_sizes(const std::string &list)
{
	std::string plain;
	std::vector<std::string> texts;
	for (std::string item : split(list)) {
		while (!item.empty() && item.front() == ' ')
			item.erase(0, 1);
		while (!item.empty() && item.back() == ' ')
			item.pop_back();
		if (item.empty())
			throw std::invalid_argument("cache sizes '" + list + "': empty item; separate sizes with single commas, e.g. 10%,20%");
		texts.push_back(item);
		size_t digits = 0;
		while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits])))
			digits++;
		std::string unit = item.substr(digits);
		while (!unit.empty() && unit.front() == ' ')
			unit.erase(0, 1);
		if (digits > 0 && digits == item.size())
			throw std::invalid_argument("cache size '" + item + "': a plain number is ambiguous; write " + item +
						    "blocks for 4 KiB blocks, or a unit (" + item + "KiB, " + item + "MB) for bytes");
		if (digits > 0 && (unit == "blocks" || unit == "block")) {
			if (item.find_first_not_of('0') >= digits)
				throw std::invalid_argument("cache size '" + item + "': a cache needs at least one block");
			item = item.substr(0, digits);
		}
		plain += (texts.size() == 1 ? "" : ",") + item;
	}
	if (list.empty() || list.back() == ',')
		throw std::invalid_argument("cache sizes '" + list + "': empty item; separate sizes with single commas, e.g. 10%,20%");
	std::vector<CacheSize> sizes = parse_cache_sizes(plain);
	for (size_t i = 0; i < sizes.size() && i < texts.size(); i++)
		sizes[i].text = texts[i];
	return sizes;
}

// A one-line progress bar on stderr, redrawn in place and cleared by done().
class Progress {
public:
	explicit Progress(bool on) : on_(on), start_(std::chrono::steady_clock::now()) {}

	void loading(uint64_t records)
	{
		if (on_)
			std::fprintf(stderr, "\r\033[Kloading: %.1f M records", records / 1e6);
	}

	void replay(uint64_t done, uint64_t total)
	{
		if (!on_ || !total)
			return;
		const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
		const double frac = double(done) / double(total), rate = secs > 0 ? done / secs : 0;
		const int width = 30, filled = int(frac * width);
		std::string bar = std::string(filled, '=') + (filled < width ? ">" : "") +
				  std::string(std::max(0, width - filled - 1), ' ');
		char eta[32] = "--:--";
		if (rate > 0) {
			const uint64_t left = uint64_t(double(total - done) / rate);
			std::snprintf(eta, sizeof(eta), "%llu:%02llu", (unsigned long long)(left / 60),
				      (unsigned long long)(left % 60));
		}
		std::fprintf(stderr, "\r\033[Kreplay [%s] %5.1f%%  %.1f M acc/s  ETA %s", bar.c_str(), 100 * frac,
			     rate / 1e6, eta);
	}

	void restart() { start_ = std::chrono::steady_clock::now(); }

	void clear()
	{
		if (on_)
			std::fprintf(stderr, "\r\033[K");
	}

private:
	bool on_;
	std::chrono::steady_clock::time_point start_;
};

// Writes with `fn` to `path` ("-" = stdout), a file under a temporary name renamed into place once whole
// (trace::OutputFile); throws std::system_error naming the file on failure.
template <typename Fn> void write_output(const std::string &path, Fn fn)
{
	if (path == "-") {
		fn(std::cout);
		std::cout.flush();
		if (!std::cout)
			throw std::system_error(errno ? errno : EIO, std::generic_category(), "cannot write to stdout");
		return;
	}
	std::ostringstream text;
	fn(text);
	trace::OutputFile out(path);
	out.write(text.str());
	out.close();
}

// --enforce and its sizes, checked before the trace is read.
struct Enforce {
	std::vector<EnforceMode> modes;
	EnforceConfig config;
};

uint64_t size_option(const po::variables_map &vm, const char *name)
{
	if (!vm.count(name))
		throw Usage(std::string("--enforce needs --") + name + " (see --help)");
	try {
		return units::parse_bytes(vm[name].as<std::string>());
	} catch (const std::invalid_argument &e) {
		throw Usage(std::string("--") + name + ": " + e.what());
	}
}

// A count option (--jobs, --by-file): a whole number from 1 to 2^32 - 1 (units::parse_count).
unsigned count_option(const po::variables_map &vm, const char *name, const char *what)
{
	const std::string &text = vm[name].as<std::string>();
	uint64_t v = 0;
	try {
		v = units::parse_count(text);
	} catch (const std::invalid_argument &) {
	}
	if (v == 0 || v > UINT32_MAX)
		throw Usage("--" + std::string(name) + " '" + text + "': give " + what + ", a whole number from 1 to 4294967295");
	return unsigned(v);
}

Enforce parse_enforce(const po::variables_map &vm)
{
	Enforce e;
	for (const std::string &m : split(vm["enforce"].as<std::string>())) {
		try {
			e.modes.push_back(parse_enforce_mode(m));
		} catch (const std::invalid_argument &x) {
			throw Usage(std::string("--enforce: ") + x.what());
		}
	}
	if (e.modes.empty())
		throw Usage("--enforce is empty; give stock, module or daemon, or nothing for all three");
	e.config.limit = size_option(vm, "memcg-limit");
	e.config.anon = size_option(vm, "engine-anon");
	e.config.code = size_option(vm, "engine-code");
	e.config.read_around = size_option(vm, "read-around");
	if (e.config.limit <= e.config.anon + e.config.code)
		throw Usage("--memcg-limit must be more than --engine-anon + --engine-code: the engine's weights need "
			    "some page cache");
	if (e.config.read_around < LLMCACHE_BLOCK_SIZE)
		throw Usage("--read-around must be at least one 4 KiB block");
	return e;
}

// The enforced replay's table (or CSV rows): per mode, pins, room and the reads of the first and the later
// passes.
void write_enforced(std::ostream &os, const std::string &path, const Trace &t, const EnforceLoop &loop,
		    const Enforce &e, const std::vector<EnforceResult> &results, bool csv)
{
	const double mib = 1 << 20, mb = 1e6, bs = LLMCACHE_BLOCK_SIZE;
	char line[256];
	if (csv) {
		os << "mode,limit_bytes,pinned_bytes,room_bytes,first_pass_read_bytes,read_bytes_per_pass,passes\n";
		for (const EnforceResult &r : results)
			os << enforce_mode_name(r.mode) << ',' << e.config.limit << ',' << r.pinned * LLMCACHE_BLOCK_SIZE << ','
			   << r.room * LLMCACHE_BLOCK_SIZE << ',' << r.read_first * LLMCACHE_BLOCK_SIZE << ','
			   << uint64_t(r.later_per_pass(loop.passes) * bs) << ',' << loop.passes << '\n';
		return;
	}
	const std::string &name = loop.file < t.paths.size() && !t.paths[loop.file].empty() ? t.paths[loop.file]
											      : "file " + std::to_string(loop.file);
	std::snprintf(line, sizeof(line), "%.1f MiB, %llu passes", double(loop.blocks) * bs / mib,
		      (unsigned long long)loop.passes);
	os << "enforced replay of " << path << ": weights " << name << " (" << line << ", each in the order of the pass that"
	   << " showed them whole or most)\n";
	std::snprintf(line, sizeof(line),
		      "memory cgroup %.0f MiB; engine %.0f MiB anonymous, %.0f MiB code; read-around %.0f KiB\n",
		      double(e.config.limit) / mib, double(e.config.anon) / mib, double(e.config.code) / mib,
		      double(e.config.read_around) / 1024);
	os << line;
	std::snprintf(line, sizeof(line), "%-8s %11s %9s %15s %13s %16s %15s\n", "mode", "pinned MiB", "room MiB",
		      "first pass MB", "MB read/pass", "read ahead MB/p", "dropped MB/p");
	os << line;
	for (const EnforceResult &r : results) {
		const double later = loop.passes > 1 ? double(loop.passes - 1) : 1;
		std::snprintf(line, sizeof(line), "%-8s %11.1f %9.1f %15.1f %13.1f %16.1f %15.1f\n",
			      enforce_mode_name(r.mode).c_str(), double(r.pinned) * bs / mib, double(r.room) * bs / mib,
			      double(r.read_first) * bs / mb, r.later_per_pass(loop.passes) * bs / mb,
			      double(r.read_ahead) * bs / mb / later, double(r.dropped) * bs / mb / later);
		os << line;
	}
}

int run(int argc, char **argv)
{
	const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
	const PolicyOptions defaults;
	std::ostringstream reserve_text;
	reserve_text << defaults.hot_reserve;
	po::options_description opts("Options", 110, 50);
	// clang-format off
	opts.add_options()
		("help,h", "show this help")
		("version", "print the version")
		("from,f", po::value<std::string>()->default_value("auto")->value_name("FMT"),
		 "trace format: auto, native, strace, oracleGeneral, csv (also --format)")
		("policies,p", po::value<std::string>()->default_value("all")->value_name("LIST"),
		 "comma-separated policies to replay, or all")
		("sizes,s", po::value<std::string>()->default_value("10%,20%,...,100%")->value_name("LIST"),
		 "comma-separated cache sizes: N% of the footprint, a size in bytes with its unit (64MiB, 1GB), or "
		 "N blocks of 4 KiB (1000blocks); a plain number is refused, since other tools read it as bytes")
		("max-memory", po::value<std::string>()->default_value("auto")->value_name("SIZE"),
		 "refuse a trace whose requests (16 bytes per block access) would need more than SIZE; auto: half "
		 "the available memory")
		("jobs,j", po::value<std::string>()->default_value(std::to_string(cores))->value_name("N"),
		 "replays run in parallel (default: the number of cores)")
		("hot-reserve",
		 po::value<double>()->default_value(defaults.hot_reserve, reserve_text.str())->value_name("F"),
		 "llm: fraction of the cache reserved for HOT blocks")
		("seed", po::value<uint64_t>()->default_value(defaults.seed)->value_name("N"),
		 "seed of randomised policies (lecar)")
		("by-file", po::value<std::string>()->value_name("N"),
		 "also report each policy's hit ratio on the N files with the most accesses, at each size (and in --json)")
		("latency", po::bool_switch(), "also report the data-fetch latency model (Figure 5)")
		("bandwidths", po::value<std::string>()->default_value("100MB/s,200MB/s,500MB/s,1GB/s")->value_name("LIST"),
		 "storage bandwidths of the latency model (implies --latency)")
		("latency-policy", po::value<std::string>()->value_name("NAME"),
		 "policy whose latency the table and --latency-svg show (default: llm if replayed, else the first)")
		("csv", po::value<std::string>()->value_name("FILE"), "write one row per (policy, size) to FILE (- = stdout)")
		("json", po::value<std::string>()->implicit_value("-")->value_name("FILE"),
		 "write the results as JSON to FILE; without FILE, to stdout instead of the tables "
		 "(give it after TRACE, or as --json=FILE)")
		("svg", po::value<std::string>()->value_name("FILE"), "plot hit ratio against cache size (Figure 4) to FILE")
		("latency-svg", po::value<std::string>()->value_name("FILE"),
		 "plot fetch latency against cache size, one line per bandwidth (Figure 5) to FILE; implies --latency")
		("progress", po::value<std::string>()->default_value("auto")->value_name("WHEN"),
		 "progress bar on stderr: auto (when stderr is a terminal), always, never")
		("enforce", po::value<std::string>()->implicit_value("stock,module,daemon")->value_name("MODES"),
		 "instead of the policies: the disk reads per pass of an mmap engine whose trace this is, in a memory "
		 "cgroup of --memcg-limit, with the kernel alone (stock) and with the planner's decisions as the "
		 "module and the daemon enforce them (Documentation/replay.md, \"Enforced replay\")")
		("memcg-limit", po::value<std::string>()->value_name("SIZE"), "--enforce: the engine's memory cgroup limit")
		("engine-anon", po::value<std::string>()->value_name("SIZE"), "--enforce: the engine's anonymous memory")
		("engine-code", po::value<std::string>()->default_value("0")->value_name("SIZE"),
		 "--enforce: the code (binary, libraries) the engine keeps in memory")
		("read-around", po::value<std::string>()->default_value("128KiB")->value_name("SIZE"),
		 "--enforce: the kernel's read-around of a fault (the disk's read_ahead_kb)");
	// clang-format on
	po::options_description hidden;
	hidden.add_options()("trace", po::value<std::vector<std::string>>())("format", po::value<std::string>());
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
		std::cout << "llmreplay " LLMCACHE_VERSION "\n" << std::flush;
		if (!std::cout)
			throw std::system_error(errno ? errno : EIO, std::generic_category(), "cannot write to stdout");
		return 0;
	}
	if (vm.count("help")) {
		std::cout << "Usage: llmreplay TRACE [options]\n\n"
			     "Replay a block-access trace through cache policies at several cache sizes and print the\n"
			     "hit ratios, the per-class hits of policies that classify (llm), and optionally the\n"
			     "data-fetch latency model. TRACE is a native, strace, oracleGeneral or CSV trace, or - for\n"
			     "stdin.\n\n"
			  << opts
			  << "\nExit status: 0 on success, 1 when the trace cannot be read, is malformed or needs more than\n"
			     "--max-memory, or an output cannot be written; 2 on bad options.\n"
			     "\nEXAMPLES\n"
			     "  llmreplay app.trace\n"
			     "      every policy at 10%..100% of the trace's footprint\n"
			     "  llmreplay app.trace -p llm,lru,lecar -s 64MiB,128MiB,256MiB --svg fig4.svg\n"
			     "      three policies at three sizes, plotted like the paper's Figure 4\n"
			     "  llmreplay app.csv -p llm --latency --latency-svg fig5.svg\n"
			     "      data-fetch latency at 100, 200, 500 and 1000 MB/s (Figure 5)\n"
			     "  llmreplay strace.log --from strace -s 5%,10%,1000blocks --csv out.csv --json\n"
			     "      results as CSV in out.csv and as JSON on stdout\n"
			     "  llmreplay llama.trace --enforce --memcg-limit 646MiB --engine-anon 97MiB --engine-code 12MiB\n"
			     "      the disk reads per token of that mmap engine at 646 MiB: stock, module, daemon\n";
		std::cout.flush();
		if (!std::cout)
			throw std::system_error(errno ? errno : EIO, std::generic_category(), "cannot write to stdout");
		return 0;
	}
	if (!vm.count("trace"))
		throw Usage(vm.count("json") && vm["json"].as<std::string>() != "-"
				    ? "no TRACE given (--json took '" + vm["json"].as<std::string>() +
					      "' as its file: write --json after TRACE, or --json=FILE)"
				    : "no TRACE given (see --help)");
	const std::vector<std::string> &positionals = vm["trace"].as<std::vector<std::string>>();
	if (positionals.size() > 1)
		throw Usage("unexpected argument '" + positionals[1] + "': llmreplay takes one TRACE (see --help)");
	const std::string path = positionals[0];

	// Check every option before reading the trace.
	const std::vector<std::string> policies = parse_policies(vm["policies"].as<std::string>());
	std::vector<CacheSize> sizes;
	try {
		sizes = vm["sizes"].defaulted() ? default_cache_sizes() : parse_sizes(vm["sizes"].as<std::string>());
	} catch (const std::invalid_argument &e) {
		throw Usage(std::string("--sizes: ") + e.what());
	}
	for (const CacheSize &cs : sizes)
		if (cs.kind == CacheSize::Kind::bytes && cs.value < LLMCACHE_BLOCK_SIZE)
			throw Usage("--sizes: cache size '" + cs.text + "' is less than one 4 KiB block");
	uint64_t max_memory = trace::available_memory() / 2;
	if (const std::string &m = vm["max-memory"].as<std::string>(); m != "auto") {
		try {
			max_memory = units::parse_bytes(m);
		} catch (const std::invalid_argument &e) {
			throw Usage(std::string("--max-memory: ") + e.what());
		}
		if (max_memory < sizeof(Request))
			throw Usage("--max-memory: '" + m + "' is less than one request (" + std::to_string(sizeof(Request)) + " bytes)");
	}
	if (max_memory == 0)
		max_memory = UINT64_MAX; // unknown: no bound
	const unsigned jobs = count_option(vm, "jobs", "the number of replays to run at once");
	const unsigned by_file = vm.count("by-file") ? count_option(vm, "by-file", "the number of files to report") : 0;
	PolicyOptions popt;
	popt.seed = vm["seed"].as<uint64_t>();
	popt.hot_reserve = vm["hot-reserve"].as<double>();
	if (!(popt.hot_reserve >= 0 && popt.hot_reserve < 1))
		throw Usage("--hot-reserve must be a fraction in [0, 1), e.g. 0.01");
	const bool latency = vm["latency"].as<bool>() || !vm["bandwidths"].defaulted() || vm.count("latency-svg");
	std::vector<uint64_t> bandwidths;
	if (latency)
		for (const auto &b : split(vm["bandwidths"].as<std::string>())) {
			try {
				bandwidths.push_back(units::parse_bandwidth(b));
			} catch (const std::invalid_argument &e) {
				throw Usage(std::string("--bandwidths: ") + e.what());
			}
			if (bandwidths.back() == 0)
				throw Usage("--bandwidths: '" + b + "' is zero");
		}
	if (latency && bandwidths.empty())
		throw Usage("--bandwidths is empty; e.g. 100MB/s,1GB/s");
	std::string latency_policy = std::find(policies.begin(), policies.end(), "llm") != policies.end()
					     ? "llm" : policies.front();
	if (vm.count("latency-policy")) {
		latency_policy = vm["latency-policy"].as<std::string>();
		if (std::find(policies.begin(), policies.end(), latency_policy) == policies.end())
			throw Usage("--latency-policy '" + latency_policy + "' is not among --policies (" + join(policies) +
				    ")");
	}
	const std::string progress_mode = vm["progress"].as<std::string>();
	if (progress_mode != "auto" && progress_mode != "always" && progress_mode != "never")
		throw Usage("--progress must be auto, always or never, not '" + progress_mode + "'");
	Progress progress(progress_mode == "always" || (progress_mode == "auto" && isatty(STDERR_FILENO)));
	if (vm.count("format") && !vm["from"].defaulted())
		throw Usage("give the format once: --from (or its old name --format)");
	const std::string format_opt = vm.count("format") ? vm["format"].as<std::string>() : vm["from"].as<std::string>();
	std::optional<trace::Format> format;
	if (format_opt != "auto") {
		try {
			format = trace::parse_format(format_opt);
		} catch (const std::invalid_argument &e) {
			throw Usage(std::string("--from: ") + e.what());
		}
	}

	for (const char *o : {"csv", "json", "svg", "latency-svg"})
		if (vm.count(o) && trace::same_file(path, vm[o].as<std::string>()))
			throw Usage(std::string("--") + o + " " + vm[o].as<std::string>() + " is the trace " + path +
				    ": writing it would destroy it; write to another file");
	std::optional<Enforce> enforce;
	if (vm.count("enforce") && by_file)
		throw Usage("--by-file reports the policies' hits, and --enforce replays no policy: give one of them");
	if (vm.count("enforce"))
		enforce = parse_enforce(vm);
	else
		for (const char *o : {"memcg-limit", "engine-anon"})
			if (vm.count(o))
				throw Usage(std::string("--") + o + " is an option of --enforce");

	// Load.
	Trace t;
	std::string format_name;
	try {
		const trace::Format f = format ? *format : trace::detect_format(path);
		format_name = trace::format_name(f);
		std::unique_ptr<trace::Reader> reader = trace::limit_blocks(
			trace::open_reader(path, f), path == "-" ? "<stdin>" : path, max_memory / sizeof(Request),
			"the replay needs " + std::to_string(sizeof(Request)) + " bytes per block access and --max-memory is " +
				units::format_bytes(max_memory) + "; raise --max-memory or replay a part of the trace");
		t = load_trace(*reader, [&](uint64_t n) { progress.loading(n); });
	} catch (const std::system_error &e) {
		progress.clear();
		std::cerr << "llmreplay: cannot read '" << path << "': " << e.code().message() << '\n';
		return exit_trace;
	} catch (const trace::TraceError &e) {
		progress.clear();
		std::cerr << "llmreplay: " << e.what() << '\n';
		return exit_trace;
	} catch (const std::runtime_error &e) {
		progress.clear();
		std::cerr << "llmreplay: " << path << ": " << e.what() << '\n';
		return exit_trace;
	}
	progress.clear();
	if (t.requests.empty()) {
		std::cerr << "llmreplay: " << path << ": the trace has no block accesses; nothing to replay\n";
		return exit_trace;
	}

	if (enforce) {
		EnforceLoop loop;
		std::vector<EnforceResult> results;
		try {
			loop = enforce_loop(t);
			for (EnforceMode m : enforce->modes)
				results.push_back(replay_enforced(loop, m, enforce->config));
		} catch (const std::runtime_error &e) {
			std::cerr << "llmreplay: " << path << ": " << e.what() << '\n';
			return exit_trace;
		}
		if (!(vm.count("csv") && vm["csv"].as<std::string>() == "-"))
			write_output("-", [&](std::ostream &os) { write_enforced(os, path, t, loop, *enforce, results, false); });
		if (vm.count("csv"))
			write_output(vm["csv"].as<std::string>(),
				     [&](std::ostream &os) { write_enforced(os, path, t, loop, *enforce, results, true); });
		return 0;
	}

	Report r;
	r.set_trace(t, path, format_name);
	r.policies = policies;
	r.sizes = sizes;
	for (const auto &s : sizes)
		r.capacities.push_back(resolve_cache_size(s, t.footprint));
	r.bandwidths = bandwidths;
	r.latency_policy = latency_policy;
	if (by_file)
		r.set_top_files(t, by_file);

	SweepOptions sopt;
	sopt.jobs = jobs;
	sopt.policy = popt;
	sopt.by_file = by_file > 0;
	sopt.on_progress = [&](uint64_t done, uint64_t total) { progress.replay(done, total); };
	progress.restart();
	const auto start = std::chrono::steady_clock::now();
	// A cache of the footprint or more never evicts, so every policy hits there as at the footprint: a
	// larger size is replayed at the footprint, rather than with tables allocated for the size asked.
	std::vector<uint64_t> replayed;
	for (uint64_t c : r.capacities)
		replayed.push_back(std::min<uint64_t>(c, std::max<uint64_t>(1, t.footprint)));
	r.results = sweep(t.requests, policies, replayed, make_policy, sopt);
	const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	progress.clear();
	t.requests = {};

	const bool json_stdout = vm.count("json") && vm["json"].as<std::string>() == "-";
	if (!json_stdout) {
		write_summary(std::cout, r);
		write_tables(std::cout, r);
		const double replays = double(r.accesses) * double(r.results.size());
		std::cout.flush();
		std::printf("\nreplayed %zu runs (%.1f M accesses) in %.2f s on %u threads: %.1f M accesses/s\n",
			    r.results.size(), replays / 1e6, secs, std::min<unsigned>(jobs, unsigned(r.results.size())),
			    secs > 0 ? replays / secs / 1e6 : 0.0);
		if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout)
			throw std::system_error(errno ? errno : EIO, std::generic_category(), "cannot write the results to stdout");
	}
	if (vm.count("json"))
		write_output(vm["json"].as<std::string>(), [&](std::ostream &os) { write_json(os, r); });
	if (vm.count("csv"))
		write_output(vm["csv"].as<std::string>(), [&](std::ostream &os) { write_csv(os, r); });
	if (vm.count("svg"))
		write_output(vm["svg"].as<std::string>(), [&](std::ostream &os) { write_hit_ratio_svg(os, r); });
	if (vm.count("latency-svg"))
		write_output(vm["latency-svg"].as<std::string>(), [&](std::ostream &os) { write_latency_svg(os, r); });
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	try {
		return run(argc, argv);
	} catch (const Usage &e) {
		std::cerr << "llmreplay: " << e.what() << '\n';
		return exit_usage;
	} catch (const std::system_error &e) {
		std::cerr << "llmreplay: " << e.what() << '\n';
		return exit_trace;
	} catch (const std::exception &e) {
		std::cerr << "llmreplay: " << e.what() << '\n';
		return exit_trace;
	}
}
