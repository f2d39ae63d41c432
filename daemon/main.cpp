// SPDX-License-Identifier: MIT
/*
 * llmcached: the llmcache KV service. Inference engines connect through the Unix socket (the C API in
 * libllmcache/kv/llmcache_kv.h), open sessions, append K/V and ask for the KV to attend to; the daemon
 * keeps each session's CPU pool within its budget, spills to the storage device, and scores spilled
 * keys through the configured computational-storage backend (Documentation/kv.md). Options come from
 * the command line and from a config file with the same names (command line wins); every option is
 * checked at start-up against its range, and a bad one is named with the range. SIGTERM, SIGINT and
 * SIGHUP stop it cleanly at any point, start-up and shutdown included: sessions closed, socket removed.
 * The handlers only write to an eventfd that lives as long as the process (never to an object that
 * shutdown frees), and the server's loop watches it. --mode=bpf adds the page-cache policy in userspace
 * (bpf_mode.hpp, Documentation/userspace-mode.md); the KV service runs in both modes.
 */
#include "bpf_mode.hpp"
#include "kv/server.hpp"
#include "util/units.hpp"

#include "csd/kernels/kernel_common.h"

#include <boost/program_options.hpp>

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

namespace po = boost::program_options;
using namespace llmcache;

namespace {

int g_stop_fd = -1;		      // an eventfd, never closed: readable once a stop signal came
volatile sig_atomic_t g_stopping = 0; // the same, for the start-up steps before the loop

void on_signal(int)
{
	const int saved = errno;
	const uint64_t one = 1;
	g_stopping = 1;
	(void)!write(g_stop_fd, &one, sizeof(one));
	errno = saved;
}

// An unsigned option from its text, within [lo, hi]; the message names the option and its range.
uint32_t number(const char *opt, const std::string &text, uint32_t lo, uint32_t hi)
{
	size_t end = 0;
	unsigned long long v = 0;
	try {
		if (text.empty() || text[0] == '-' || text[0] == '+')
			throw std::invalid_argument(text);
		v = std::stoull(text, &end, 10);
	} catch (const std::exception &) {
		end = 0;
	}
	if (end != text.size() || end == 0 || v < lo || v > hi)
		throw po::error(std::string("--") + opt + " " + text + ": must be a whole number from " + std::to_string(lo) +
				" to " + std::to_string(hi));
	return (uint32_t)v;
}

template <class F> auto parsed(const char *opt, const std::string &text, F parse)
{
	try {
		return parse(text);
	} catch (const std::exception &e) {
		throw po::error(std::string("--") + opt + " " + text + ": " + e.what());
	}
}

void check(bool ok, const char *opt, const std::string &text, const std::string &range)
{
	if (!ok)
		throw po::error(std::string("--") + opt + " " + text + ": " + range);
}

void say(const std::string &msg) { std::fprintf(stderr, "llmcached: %s\n", msg.c_str()); }

// 0 when --help or --version reached stdout, else 1 with a message (> /dev/full). errno is 0 from
// before the text was written: a write that failed on the way left its cause there.
int stdout_written()
{
	const bool flushed = std::fflush(stdout) == 0; // std::cout writes through stdout's buffer
	const int e = errno;
	if (flushed && std::cout && !std::ferror(stdout))
		return 0;
	say(std::string("cannot write to stdout: ") + strerror(e ? e : EIO));
	return 1;
}

} // namespace

int main(int argc, char **argv)
{
	std::string config = "/etc/llmcache/llmcached.conf", budget = "256MiB", region = "1GiB", emu_bw = "4GB/s",
		    backend = "none", estimator = "exact", mode = "kv", timeout = "5s", planes = "off";
	llmcached::BpfModeConfig bpf_cfg;
	double emu_compute = 9.6e9;
	kv::ServerConfig cfg;
	kv::KvOptions &o = cfg.kv;
	std::string max_sessions = std::to_string(cfg.max_sessions), per_uid = std::to_string(cfg.max_sessions_per_uid),
		    page_tokens = std::to_string(o.page_tokens), sink = std::to_string(o.sink_tokens),
		    recent = std::to_string(o.recent_tokens), score_block = std::to_string(o.score_block),
		    queue_depth = std::to_string(o.queue_depth);

	// First of all, so that a signal at any later point stops the daemon cleanly.
	g_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g_stop_fd < 0) {
		say(std::string("cannot create an eventfd: ") + strerror(errno));
		return 1;
	}
	struct sigaction sa{};
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (int sig : {SIGTERM, SIGINT, SIGHUP})
		sigaction(sig, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);

	po::options_description d("Options (a config file takes the same names, without dashes: name = value)");
	d.add_options()
		("help,h", "show this help")
		("version", "print the version")
		("mode", po::value(&mode)->default_value(mode), "kv: the KV service; bpf: the KV service and the page-cache policy in userspace (BPF feed, mlock pins)")
		("config", po::value(&config)->default_value(config), "config file; read if it exists (must exist when given)")
		("socket", po::value(&cfg.socket_path)->default_value(cfg.socket_path), "Unix socket for clients and llmcachectl")
		("kv-device", po::value(&o.device), "storage pool: block device (/dev/nvme0n1, /dev/loop0) or file; none = memory only")
		("kv-cpu-budget", po::value(&budget)->default_value(budget), "memory for each session's KV pages")
		("kv-session-device-bytes", po::value(&region)->default_value(region), "storage region given to each session")
		("kv-max-sessions", po::value(&max_sessions)->default_value(max_sessions), "most sessions at once (1-4096)")
		("kv-max-sessions-per-uid", po::value(&per_uid)->default_value(per_uid), "most sessions of one uid other than root (1-4096); the uid also holds at most this + 8 connections")
		("kv-client-timeout", po::value(&timeout)->default_value(timeout), "a client that leaves a reply unread this long is dropped with its sessions (10ms-1h)")
		("kv-backend", po::value(&backend)->default_value(backend), "who scores spilled keys: none, emulated or xrt")
		("kv-estimator", po::value(&estimator)->default_value(estimator), "token importance: exact or quest (page bounds)")
		("kv-xclbin", po::value(&o.xclbin), "xrt backend: the kernel binary built from libllmcache/csd/kernels")
		("kv-page-tokens", po::value(&page_tokens)->default_value(page_tokens), "tokens per page (slab), 1-4096")
		("kv-sink-tokens", po::value(&sink)->default_value(sink), "first tokens always kept, 0-4096")
		("kv-recent-tokens", po::value(&recent)->default_value(recent), "last tokens always kept, 0-65536")
		("kv-score-block", po::value(&score_block)->default_value(score_block), ("tokens per Score Block, 1-" + std::to_string(CSD_MAX_BLOCK)).c_str())
		("kv-beta", po::value(&o.beta)->default_value(o.beta), "CPU:storage split of the KV (HillInfer's beta): 0 off, > 0 fixed (at most 1e6), -1 adaptive")
		("kv-queue-depth", po::value(&queue_depth)->default_value(queue_depth), "io_uring requests in flight, 1-4096")
		("kv-planes", po::value(&planes)->default_value(planes), "two-plane precision (kv.md): off, or the fraction 0-1 of each select's top-k whose spilled V rows are read in full; the others' are read as their high byte plane alone")
		("kv-device-select", po::value<std::string>()->default_value("exact")->notifier([&o](const std::string &v) { if (v != "exact" && v != "bounds") throw po::error("--kv-device-select " + v + ": use exact or bounds"); o.device_select = v == "bounds" ? csd::DeviceSelect::BoundsFirst : csd::DeviceSelect::Exact; }), "emulated backend: score every spilled key (exact), or read the pages' Quest bounds first and score the keys of the best pages only (bounds; kv.md, \"Bounds-first device selection\")")
		("kv-write-through", po::bool_switch(&o.write_through), "write each full KV page to the device as it fills, so that its first spill writes nothing (kv.md, \"Writing full pages through\"); off by default")
		("kv-trace", po::value(&o.trace)->value_name("FILE"), "write each session's KV trace (what the KV policy decided and from what, for llmkvreplay) to FILE.SESSION; off by default")
		("emu-bandwidth", po::value(&emu_bw)->default_value(emu_bw), "emulated backend: flash-to-FPGA bandwidth (> 0)")
		("emu-compute", po::value(&emu_compute)->default_value(emu_compute), "emulated backend: multiply-accumulates/s (> 0)");
	llmcached::add_bpf_mode_options(d, bpf_cfg);
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(argc, argv).options(d).positional({}).run(), vm);
		if (vm.count("help")) {
			errno = 0;
			std::cout << "Usage: llmcached [options]\n\n" << d
				  << "\nEXAMPLES\n"
				     "  llmcached --kv-device /dev/nvme1n1 --kv-backend xrt --kv-xclbin /usr/lib/llmcache/score.xclbin\n"
				     "  llmcached --socket /tmp/llmcached.sock --kv-device /var/tmp/kv.img --kv-backend emulated\n"
				     "  llmcached --kv-device /var/tmp/kv.img --kv-trace /var/tmp/kv.trace   (then: llmkvreplay /var/tmp/kv.trace.1)\n"
				     "  llmcached --mode=bpf --manage /models/llama.gguf --pin-budget 512MiB --bw 1GB/s\n"
				     "  llmcached --mode=bpf --pid $(pidof llama-cli) --min-size 64MiB\n"
				     "  systemctl start llmcached      (reads /etc/llmcache/llmcached.conf)\n";
			return stdout_written();
		}
		if (vm.count("version")) {
			errno = 0;
			std::cout << "llmcached " LLMCACHE_VERSION "\n";
			return stdout_written();
		}
		const bool given = !vm["config"].defaulted();
		config = vm["config"].as<std::string>();
		struct stat st;
		if (stat(config.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) // ifstream opens a directory, reads nothing
			throw po::error("the config file " + config + " is a directory");
		std::ifstream in(config);
		if (in) {
			try {
				po::store(po::parse_config_file(in, d), vm);
			} catch (const po::error &e) {
				throw po::error("the config file " + config + ": " + e.what());
			}
		} else if (given)
			throw po::error("cannot read the config file " + config + ": " + strerror(errno));
		po::notify(vm);
		cfg.max_sessions = number("kv-max-sessions", max_sessions, 1, 4096);
		cfg.max_sessions_per_uid = number("kv-max-sessions-per-uid", per_uid, 1, 4096);
		o.page_tokens = number("kv-page-tokens", page_tokens, 1, 4096);
		o.sink_tokens = number("kv-sink-tokens", sink, 0, 4096);
		o.recent_tokens = number("kv-recent-tokens", recent, 0, 65536);
		o.score_block = number("kv-score-block", score_block, 1, CSD_MAX_BLOCK);
		o.queue_depth = number("kv-queue-depth", queue_depth, 1, 4096);
		const uint64_t timeout_ns = parsed("kv-client-timeout", timeout, units::parse_duration_ns);
		check(timeout_ns >= 10'000'000 && timeout_ns <= 3600'000'000'000ull, "kv-client-timeout", timeout,
		      "must be from 10ms to 1h");
		cfg.client_timeout_ms = (uint32_t)(timeout_ns / 1'000'000);
		o.cpu_budget = parsed("kv-cpu-budget", budget, units::parse_bytes);
		check(o.cpu_budget >= 4096 && o.cpu_budget <= (1ull << 40), "kv-cpu-budget", budget, "must be from 4KiB to 1TiB");
		cfg.session_device_bytes = parsed("kv-session-device-bytes", region, units::parse_bytes);
		check(cfg.session_device_bytes >= 8192 && cfg.session_device_bytes % 4096 == 0, "kv-session-device-bytes", region,
		      "must be a multiple of 4KiB and at least 8KiB");
		o.emulated.internal_bandwidth = (double)parsed("emu-bandwidth", emu_bw, units::parse_bandwidth);
		check(o.emulated.internal_bandwidth > 0, "emu-bandwidth", emu_bw, "must be more than 0 B/s");
		check(std::isfinite(emu_compute) && emu_compute > 0, "emu-compute", std::to_string(emu_compute),
		      "must be more than 0 multiply-accumulates/s");
		o.emulated.compute_rate = emu_compute;
		check(o.beta == -1 || (o.beta >= 0 && o.beta <= 1e6), "kv-beta", std::to_string(o.beta),
		      "use 0 (off), a fixed split up to 1e6, or -1 (adaptive)");
		if (planes != "off") {
			char *end = nullptr;
			o.planes.full = std::strtod(planes.c_str(), &end);
			check(!planes.empty() && *end == 0 && o.planes.full >= 0 && o.planes.full <= 1, "kv-planes", planes,
			      "use off or a fraction from 0 to 1");
			o.planes.on = true;
		}
		if (backend != "none" && backend != "emulated" && backend != "xrt")
			throw po::error("--kv-backend " + backend + ": use none, emulated or xrt");
		o.backend = backend;
		if (!o.xclbin.empty()) { // read at each session's open: a wrong path would fail them all later
			struct stat xs;
			if (stat(o.xclbin.c_str(), &xs) < 0 || access(o.xclbin.c_str(), R_OK) < 0)
				throw po::error("--kv-xclbin " + o.xclbin + ": " + strerror(errno));
			if (!S_ISREG(xs.st_mode))
				throw po::error("--kv-xclbin " + o.xclbin + ": not a regular file (the kernel binary built from "
										 "libllmcache/csd/kernels)");
		}
		if (o.device == "none")
			o.device.clear(); // memory only
		if (!o.trace.empty()) { // each session creates FILE.ID: the directory must take new files
			const size_t slash = o.trace.rfind('/');
			const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : o.trace.substr(0, slash);
			struct stat ds;
			errno = 0;
			if (stat(dir.c_str(), &ds) < 0 || !S_ISDIR(ds.st_mode) || access(dir.c_str(), W_OK | X_OK) < 0)
				throw po::error("--kv-trace " + o.trace + ": the directory " + dir + " " +
						(errno == ENOENT ? "does not exist" : "is not a directory this daemon can write to") +
						" (each session writes FILE.SESSION there)");
		}
		if (estimator != "exact" && estimator != "quest")
			throw po::error("--kv-estimator " + estimator + ": use exact or quest");
		o.estimator = estimator == "quest" ? csd::Estimator::QuestBounds : csd::Estimator::Exact;
		if (mode != "kv" && mode != "bpf")
			throw po::error("--mode " + mode + ": use kv or bpf");
		if (mode == "bpf")
			llmcached::check_bpf_mode_options(bpf_cfg);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmcached: %s (see llmcached --help)\n", e.what());
		return 2;
	}
	std::unique_ptr<kv::Server> server;
	std::unique_ptr<llmcached::BpfMode> bpf;
	std::string err;
	if (mode == "bpf" && llmcached::BpfMode::start(bpf_cfg, say, bpf, err)) {
		say("failed to start the page-cache mode: " + err);
		return 1;
	}
	cfg.stop_fd = g_stop_fd;
	if (g_stopping) {
		say("stopped during start-up");
		return 0;
	}
	if (kv::Server::open(cfg, server, err)) {
		say("failed to start: " + err);
		return 1;
	}
	server->log = say;
	if (bpf)
		server->pagecache_status = [&bpf] { return bpf->status(); };
	if (!o.device.empty() && server->regions() < cfg.max_sessions)
		say("the KV device " + o.device + " holds " + std::to_string(server->regions()) + " session regions of " +
		    units::format_bytes(cfg.session_device_bytes) + ": at most " + std::to_string(server->regions()) +
		    " sessions at once, not kv-max-sessions " + std::to_string(cfg.max_sessions));
	if (backend == "xrt" && o.xclbin.empty())
		say("--kv-backend xrt without --kv-xclbin: sessions score spilled keys with the emulated backend");
	if (backend != "none" && o.device.empty())
		say("--kv-backend " + backend + " without --kv-device: nothing spills, so nothing is scored in storage");
	say("serving on " + cfg.socket_path + " (device " + (o.device.empty() ? "none: memory only" : o.device) +
	    ", backend " + backend + ", " + units::format_bytes(o.cpu_budget) + " per session)");
	const int r = server->run();
	const size_t open_sessions = server->sessions();
	server.reset();
	bpf.reset();
	if (r < 0) {
		say("event loop failed: " + std::string(strerror(-r)));
		return 1;
	}
	say("stopped; closed " + std::to_string(open_sessions) + " sessions");
	return 0;
}
