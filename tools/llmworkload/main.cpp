// SPDX-License-Identifier: MIT
// llmworkload: generate the paper's on-device LLM app workloads or a parametric decoder, as a trace
// (--trace) or as real I/O on real files (--dir, optionally tracing exactly what it did). Whatever it
// prints on stdout (--layout, the summary, gguf's description) is checked at exit: a write error there
// is exit status 1, not results lost silently.
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "trace/trace.hpp"
#include "util/units.hpp"
#include "workload/gguf.hpp"
#include "workload/run.hpp"
#include "workload/workload.hpp"

namespace po = boost::program_options;
namespace wl = llmcache::workload;
using llmcache::units::parse_bytes;

namespace {

const char *usage = R"(Usage: llmworkload COMMAND [options]

Commands:
  app NAME   one of the page-cache paper's on-device apps (section 3.1):
             ai-notes, ai-translate, text-embedder, text-classification
  decoder    a parametric decoder: config scan, tokenizer hot set, weights swept once per token
  gguf PATH  write a llama-architecture GGUF model with random weights, for a real engine (llama.cpp)

app and decoder either write its accesses as a trace (--trace FILE [--format F]) or performs them as real
I/O on files it creates in a directory (--dir DIR), tracing exactly what it did when --trace is given too.
Run `llmworkload COMMAND --help` for the options of a command, `llmworkload --version` for the version.
Documentation/workloads.md has the details. Sizes take a unit (64MiB, 1GB); a plain number is bytes.

EXAMPLES
  llmworkload app ai-notes --trace ai-notes.trace
  llmworkload app text-embedder --scale 0.5 --trace te.csv --format csv
  llmworkload decoder --weights-size 256MiB --tokens 16 --access mmap --dir /tmp/wl --json
  llmworkload gguf model.gguf --size 590MiB
)";

struct Common {
	std::string trace, format = "native", dir, seed = "1";
	bool json = false, drop_cache = false, layout = false;
};

po::options_description common_options(Common &c)
{
	po::options_description d("Output options");
	d.add_options()
		("help,h", "show this help")
		("trace", po::value(&c.trace), "write the accesses to this trace file (\"-\": stdout)")
		("format", po::value(&c.format)->default_value(c.format), "trace format: native, csv or oracleGeneral")
		("dir", po::value(&c.dir), "perform real I/O on the workload's files under this directory, creating "
					    "them (deterministic content) when missing or of the wrong size")
		("seed", po::value(&c.seed)->default_value(c.seed), "random seed: the same seed gives the same accesses")
		("drop-cache", po::bool_switch(&c.drop_cache), "with --dir: drop the files' cached pages before start-up")
		("json", po::bool_switch(&c.json), "print the summary (or --layout) as JSON")
		("layout", po::bool_switch(&c.layout), "print the workload's files and the paper's block ranges, and exit");
	return d;
}

using Json = nlohmann::ordered_json;

// One line of JSON; bytes that are not UTF-8 (a path may hold any) become U+FFFD.
std::string json_text(const Json &j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Seconds to the microsecond, tokens/s to the thousandth, as the text summary prints them.
double rounded(double v, double per_unit) { return std::round(v * per_unit) / per_unit; }

void print_layout(const wl::Generator &g, bool json)
{
	if (json) {
		Json out = {{"workload", g.name()}, {"iterations", g.iterations()}, {"files", Json::array()}};
		for (const auto &f : g.files()) {
			Json file = {{"name", f.name}, {"role", std::string(wl::role_name(f.role))}, {"bytes", f.size}, {"blocks", f.blocks()}};
			if (f.paper_blocks)
				file.update({{"paper_first_block", f.paper_block}, {"paper_blocks", f.paper_blocks}});
			out["files"].push_back(file);
		}
		std::printf("%s\n", json_text(out).c_str());
		return;
	}
	std::printf("%s: %llu iterations\n%-38s %-8s %11s %7s  %s\n", g.name().c_str(),
		    (unsigned long long)g.iterations(), "file", "role", "size", "blocks", "paper blocks (scale 1)");
	for (const auto &f : g.files()) {
		std::string paper = f.paper_blocks ? std::to_string(f.paper_block) + "-" +
							     std::to_string(f.paper_block + f.paper_blocks - 1)
						   : "-";
		std::printf("%-38s %-8s %11s %7llu  %s\n", f.name.c_str(), std::string(wl::role_name(f.role)).c_str(),
			    llmcache::units::format_bytes(f.size).c_str(), (unsigned long long)f.blocks(), paper.c_str());
	}
}

void print_summary(const wl::Generator &g, const wl::RunStats &s, bool real, bool json, FILE *out)
{
	double tps = s.run_s > 0 ? double(s.iterations) / s.run_s : 0;
	auto u = [](uint64_t v) { return (unsigned long long)v; };
	if (json && real)
		std::fprintf(out, "%s\n",
			     json_text({{"workload", g.name()},
					{"mode", "real"},
					{"tokens", s.iterations},
					{"seconds", rounded(s.run_s, 1e6)},
					{"tokens_per_s", rounded(tps, 1e3)},
					{"bytes_read", s.bytes_read},
					{"bytes_written", s.bytes_written},
					{"startup_seconds", rounded(s.startup_s, 1e6)},
					{"prepare_seconds", rounded(s.prepare_s, 1e6)},
					{"files_created", s.files_created},
					{"bytes_prepared", s.bytes_prepared},
					{"records", s.records},
					{"blocks", s.blocks}})
				     .c_str());
	else if (json)
		std::fprintf(out, "%s\n",
			     json_text({{"workload", g.name()},
					{"mode", "trace"},
					{"tokens", s.iterations},
					{"records", s.records},
					{"blocks", s.blocks}})
				     .c_str());
	else if (real)
		std::fprintf(out,
			     "workload=%s tokens=%llu seconds=%.6f tokens_per_s=%.3f bytes_read=%llu bytes_written=%llu "
			     "startup_seconds=%.6f prepare_seconds=%.6f files_created=%llu bytes_prepared=%llu\n",
			     g.name().c_str(), u(s.iterations), s.run_s, tps, u(s.bytes_read), u(s.bytes_written), s.startup_s,
			     s.prepare_s, u(s.files_created), u(s.bytes_prepared));
	else
		std::fprintf(out, "workload=%s tokens=%llu records=%llu blocks=%llu\n", g.name().c_str(), u(s.iterations),
			     u(s.records), u(s.blocks));
}

// A whole non-negative decimal number up to max; throws po::error naming the option and the text.
uint64_t count(const char *opt, const std::string &text, uint64_t max)
{
	uint64_t v = 0;
	auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
	if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > max)
		throw po::error(std::string("--") + opt + ": '" + text + "' is not a whole number between 0 and " +
				std::to_string(max));
	return v;
}

// Parse args (after the command word) against the command's options; throws po::error on bad input.
po::variables_map parse(const std::vector<std::string> &args, const po::options_description &all,
			const po::positional_options_description &pos)
{
	po::variables_map vm;
	po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
	po::notify(vm);
	return vm;
}

int run_gguf(const std::vector<std::string> &args)
{
	wl::GgufModel m;
	std::string path, size, type = "f16", seed = "1";
	po::options_description d("Model options");
	d.add_options()
		("help,h", "show this help")
		("size", po::value(&size), "choose the number of layers that comes closest to this file size (overrides --layers)")
		("layers", po::value(&m.layers)->default_value(m.layers), "transformer blocks")
		("embd", po::value(&m.embd)->default_value(m.embd), "embedding length (n_embd)")
		("ff", po::value(&m.ff)->default_value(m.ff), "feed-forward length (n_ff)")
		("heads", po::value(&m.heads)->default_value(m.heads), "attention heads")
		("kv-heads", po::value(&m.kv_heads)->default_value(m.kv_heads), "key/value heads (fewer than --heads: GQA)")
		("vocab", po::value(&m.vocab)->default_value(m.vocab), "vocabulary size (at least 259)")
		("context", po::value(&m.context)->default_value(m.context), "training context length")
		("type", po::value(&type)->default_value(type), "weight type: f16 or q8_0")
		("seed", po::value(&seed)->default_value(seed), "random seed of the weights")
		("json", "print the summary as JSON");
	po::options_description hidden;
	hidden.add_options()("path", po::value(&path));
	po::positional_options_description pos;
	pos.add("path", 1);
	po::options_description parsed;
	parsed.add(d).add(hidden);
	po::variables_map vm = parse(args, parsed, pos);
	if (vm.count("help")) {
		std::cout << "Usage: llmworkload gguf PATH [options]\n\n" << d
			  << "\nEXAMPLES\n"
			     "  llmworkload gguf model.gguf --size 590MiB\n"
			     "  llmworkload gguf small.gguf --embd 512 --ff 1408 --heads 8 --size 64MiB\n"
			     "  llmworkload gguf gqa.gguf --type q8_0 --heads 16 --kv-heads 4 --size 1GiB\n";
		return 0;
	}
	if (path.empty())
		throw po::error("say where the model goes: llmworkload gguf PATH");
	if (type != "f16" && type != "q8_0")
		throw po::error("--type: '" + type + "' is not f16 or q8_0");
	m.type = type == "f16" ? wl::GgufType::f16 : wl::GgufType::q8_0;
	m.seed = count("seed", seed, UINT64_MAX);
	if (!size.empty()) {
		try {
			m.layers = wl::layers_for_size(m, parse_bytes(size));
		} catch (const std::invalid_argument &e) {
			throw po::error(std::string("--size: ") + e.what());
		}
	}
	wl::write_gguf(m, path);
	const unsigned long long bytes = wl::gguf_size(m);
	if (vm.count("json"))
		std::printf("%s\n", json_text({{"path", path},
						{"bytes", bytes},
						{"layers", m.layers},
						{"embd", m.embd},
						{"ff", m.ff},
						{"heads", m.heads},
						{"kv_heads", m.kv_heads},
						{"vocab", m.vocab},
						{"type", type}})
					     .c_str());
	else
		std::printf("path=%s bytes=%llu layers=%u embd=%u ff=%u heads=%u kv_heads=%u vocab=%u type=%s\n", path.c_str(),
			    bytes, m.layers, m.embd, m.ff, m.heads, m.kv_heads, m.vocab, type.c_str());
	return 0;
}

int run(const std::string &cmd, const std::vector<std::string> &args)
{
	if (cmd == "gguf")
		return run_gguf(args);
	Common c;
	po::options_description all = common_options(c), hidden;
	std::vector<std::string> positionals;
	hidden.add_options()("positional", po::value(&positionals));
	po::positional_options_description pos;
	pos.add("positional", -1);
	wl::AppOptions app;
	wl::DecoderOptions dec;
	std::string app_name, weights = "64MiB", tokenizer = "1MiB", config = "4MiB", access = "pread", read_size = "128KiB";
	std::string iterations = "0", tokens = "32", hot_reads = "4";

	if (cmd == "app") {
		po::options_description d("App options");
		d.add_options()
			("iterations", po::value(&iterations)->default_value(iterations),
			 "loop periods to run; 0: the app's default (about 1.5 million block accesses)")
			("scale", po::value(&app.scale)->default_value(1.0), "multiply every file size by this");
		all.add(d);
	} else {
		po::options_description d("Decoder options");
		d.add_options()
			("weights-size", po::value(&weights)->default_value(weights), "size of the weights file")
			("tokenizer-size", po::value(&tokenizer)->default_value(tokenizer), "size of the tokenizer (the hot set)")
			("config-size", po::value(&config)->default_value(config), "size of the config file (read once)")
			("tokens", po::value(&tokens)->default_value(tokens), "tokens to decode: weights sweeps")
			("access", po::value(&access)->default_value(access), "how the weights are read: pread or mmap")
			("read-size", po::value(&read_size)->default_value(read_size),
			 "bytes per read call or mmap touch run (a multiple of 4 KiB)")
			("hot-reads", po::value(&hot_reads)->default_value(hot_reads),
			 "random 4 KiB tokenizer reads per token");
		all.add(d);
	}

	po::options_description parsed_options;
	parsed_options.add(all).add(hidden);
	po::variables_map vm = parse(args, parsed_options, pos);
	size_t wanted = cmd == "app" ? 1 : 0;
	if (positionals.size() > wanted)
		throw po::error("unexpected argument '" + positionals[wanted] + "'");
	if (wanted && !positionals.empty())
		app_name = positionals[0];
	if (vm.count("help")) {
		std::cout << "Usage: llmworkload " << cmd << (cmd == "app" ? " NAME" : "") << " [options]\n\n"
			  << all << "\nEXAMPLES\n"
			  << (cmd == "app" ? "  llmworkload app ai-translate --iterations 500 --seed 7 --trace at.trace\n"
					     "  llmworkload app ai-notes --scale 0.1 --dir /tmp/wl --trace notes-real.trace\n"
					     "  llmworkload app text-classification --layout\n"
					   : "  llmworkload decoder --trace dec.trace\n"
					     "  llmworkload decoder --dir /tmp/wl --weights-size 2MiB --tokenizer-size 64KiB "
					     "--config-size 256KiB --tokens 3 --access pread --trace out.trace\n"
					     "  llmworkload decoder --dir /tmp/wl --weights-size 1GiB --access mmap --drop-cache --json\n");
		return 0;
	}

	std::unique_ptr<wl::Generator> g;
	std::string producer = "llmworkload 0.1 " + cmd;
	if (cmd == "app") {
		if (app_name.empty())
			throw po::error("name the app: ai-notes, ai-translate, text-embedder or text-classification");
		producer += " " + app_name;
		app.seed = count("seed", c.seed, UINT64_MAX);
		app.iterations = count("iterations", iterations, 1000000000);
		g = wl::make_app(app_name, app);
	} else {
		auto size = [](const char *opt, const std::string &text) {
			try {
				return parse_bytes(text);
			} catch (const std::invalid_argument &e) {
				throw po::error(std::string("--") + opt + ": " + e.what());
			}
		};
		dec.weights_size = size("weights-size", weights);
		dec.tokenizer_size = size("tokenizer-size", tokenizer);
		dec.config_size = size("config-size", config);
		dec.read_size = size("read-size", read_size);
		if (access != "pread" && access != "mmap")
			throw po::error("--access: '" + access + "' is not pread or mmap");
		dec.access = access == "mmap" ? wl::Access::mmap : wl::Access::pread;
		dec.seed = count("seed", c.seed, UINT64_MAX);
		dec.tokens = count("tokens", tokens, 1000000000);
		dec.hot_reads = uint32_t(count("hot-reads", hot_reads, 1000000));
		g = wl::make_decoder(dec);
	}
	if (c.layout) {
		print_layout(*g, c.json);
		return 0;
	}
	if (c.dir.empty() && c.trace.empty())
		throw po::error("say where the accesses go: --trace FILE, --dir DIR, or both");
	if (c.drop_cache && c.dir.empty())
		throw po::error("--drop-cache needs --dir");

	wl::RunOptions ro;
	ro.dir = c.dir;
	ro.trace = c.trace;
	try {
		ro.format = llmcache::trace::parse_format(c.format);
	} catch (const std::invalid_argument &e) {
		throw po::error(std::string("--format: ") + e.what());
	}
	ro.producer = producer;
	ro.drop_cache = c.drop_cache;
	bool real = !c.dir.empty();
	wl::RunStats s = real ? wl::run_real(*g, ro) : wl::write_trace(*g, ro);
	print_summary(*g, s, real, c.json, c.trace == "-" ? stderr : stdout);
	return 0;
}

// 0 when everything printed on stdout reached it, else 1 with a message.
int stdout_written(const char *cmd)
{
	if (std::fflush(stdout) == 0 && !std::ferror(stdout))
		return 0;
	std::fprintf(stderr, "llmworkload %s: failed to write to stdout: %s\n", cmd, std::strerror(errno ? errno : EIO));
	return 1;
}

} // namespace

int main(int argc, char **argv)
{
	std::vector<std::string> args(argv + 1, argv + argc);
	if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
		std::fputs(usage, args.empty() ? stderr : stdout);
		return args.empty() ? 2 : stdout_written("--help");
	}
	if (args[0] == "--version") {
		std::printf("llmworkload %s\n", LLMCACHE_VERSION);
		return stdout_written("--version");
	}
	std::string cmd = args[0];
	args.erase(args.begin());
	if (cmd != "app" && cmd != "decoder" && cmd != "gguf") {
		std::fprintf(stderr, "llmworkload: unknown command '%s'; the commands are app, decoder and gguf "
				     "(see llmworkload --help)\n", cmd.c_str());
		return 2;
	}
	try {
		int rc = run(cmd, args);
		return rc ? rc : stdout_written(cmd.c_str());
	} catch (const po::error &e) {
		std::fprintf(stderr, "llmworkload %s: %s (see llmworkload %s --help)\n", cmd.c_str(), e.what(), cmd.c_str());
		return 2;
	} catch (const std::invalid_argument &e) {
		std::fprintf(stderr, "llmworkload %s: %s\n", cmd.c_str(), e.what());
		return 2;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmworkload %s: %s\n", cmd.c_str(), e.what());
		return 1;
	}
}
