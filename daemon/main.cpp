// SPDX-License-Identifier: MIT
/*
 * llmcached: the llmcache KV service. Inference engines connect through the Unix socket (the C API in
 * libllmcache/kv/llmcache_kv.h), open sessions, append K/V and ask for the KV to attend to; the daemon
 * keeps each session's CPU pool within its budget, spills to the storage device, and scores spilled
 * keys through the configured computational-storage backend (Documentation/kv.md). Options come from
 * the command line and from a config file with the same names (command line wins). SIGTERM and SIGINT
 * stop it cleanly: sessions closed, socket removed. --mode=bpf adds the page-cache policy in userspace
 * (bpf_mode.hpp, Documentation/userspace-mode.md); the KV service runs in both modes.
 */
#include "bpf_mode.hpp"
#include "kv/server.hpp"
#include "util/units.hpp"

#include <boost/program_options.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace po = boost::program_options;
using namespace llmcache;

namespace {

kv::Server *g_server;

void on_signal(int) { g_server->stop(); }

void say(const std::string &msg) { std::fprintf(stderr, "llmcached: %s\n", msg.c_str()); }

} // namespace

int main(int argc, char **argv)
{
	std::string config = "/etc/llmcache/llmcached.conf", budget = "256MiB", region = "1GiB", emu_bw = "4GB/s",
		    backend = "none", estimator = "exact", mode = "kv";
	llmcached::BpfModeConfig bpf_cfg;
	double emu_compute = 9.6e9;
	kv::ServerConfig cfg;
	kv::KvOptions &o = cfg.kv;
	po::options_description d("Options (a config file takes the same names, without dashes: name = value)");
	d.add_options()
		("help,h", "show this help")
		("mode", po::value(&mode)->default_value(mode), "kv: the KV service; bpf: the KV service and the page-cache policy in userspace (BPF feed, mlock pins)")
		("config", po::value(&config)->default_value(config), "config file; read if it exists (must exist when given)")
		("socket", po::value(&cfg.socket_path)->default_value(cfg.socket_path), "Unix socket for clients and llmcachectl")
		("kv-device", po::value(&o.device), "storage pool: block device (/dev/nvme0n1, /dev/loop0) or file; none = memory only")
		("kv-cpu-budget", po::value(&budget)->default_value(budget), "memory for each session's KV pages")
		("kv-session-device-bytes", po::value(&region)->default_value(region), "storage region given to each session")
		("kv-max-sessions", po::value(&cfg.max_sessions)->default_value(cfg.max_sessions), "most sessions at once")
		("kv-backend", po::value(&backend)->default_value(backend), "who scores spilled keys: none, emulated or xrt")
		("kv-estimator", po::value(&estimator)->default_value(estimator), "token importance: exact or quest (page bounds)")
		("kv-xclbin", po::value(&o.xclbin), "xrt backend: the kernel binary built from libllmcache/csd/kernels")
		("kv-page-tokens", po::value(&o.page_tokens)->default_value(o.page_tokens), "tokens per page (slab)")
		("kv-sink-tokens", po::value(&o.sink_tokens)->default_value(o.sink_tokens), "first tokens always kept")
		("kv-recent-tokens", po::value(&o.recent_tokens)->default_value(o.recent_tokens), "last tokens always kept")
		("kv-score-block", po::value(&o.score_block)->default_value(o.score_block), "tokens per Score Block")
		("kv-beta", po::value(&o.beta)->default_value(o.beta), "CPU:storage split of the KV (HillInfer's beta): 0 off, > 0 fixed, -1 adaptive")
		("kv-queue-depth", po::value(&o.queue_depth)->default_value(o.queue_depth), "io_uring requests in flight")
		("emu-bandwidth", po::value(&emu_bw)->default_value(emu_bw), "emulated backend: flash-to-FPGA bandwidth")
		("emu-compute", po::value(&emu_compute)->default_value(emu_compute), "emulated backend: multiply-accumulates/s");
	llmcached::add_bpf_mode_options(d, bpf_cfg);
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(argc, argv).options(d).positional({}).run(), vm);
		if (vm.count("help")) {
			std::cout << "Usage: llmcached [options]\n\n" << d
				  << "\nEXAMPLES\n"
				     "  llmcached --kv-device /dev/nvme1n1 --kv-backend xrt --kv-xclbin /usr/lib/llmcache/score.xclbin\n"
				     "  llmcached --socket /tmp/llmcached.sock --kv-device /var/tmp/kv.img --kv-backend emulated\n"
				     "  llmcached --mode=bpf --manage /models/llama.gguf --pin-budget 512MiB --bw 1GB/s\n"
				     "  llmcached --mode=bpf --pid $(pidof llama-cli) --min-size 64MiB\n"
				     "  systemctl start llmcached      (reads /etc/llmcache/llmcached.conf)\n";
			return 0;
		}
		const bool given = !vm["config"].defaulted();
		config = vm["config"].as<std::string>();
		std::ifstream in(config);
		if (in)
			po::store(po::parse_config_file(in, d), vm);
		else if (given)
			throw po::error("cannot read the config file " + config);
		po::notify(vm);
		o.cpu_budget = units::parse_bytes(budget);
		cfg.session_device_bytes = units::parse_bytes(region);
		o.emulated.internal_bandwidth = (double)units::parse_bandwidth(emu_bw);
		o.emulated.compute_rate = emu_compute;
		if (backend != "none" && backend != "emulated" && backend != "xrt")
			throw po::error("--kv-backend " + backend + ": use none, emulated or xrt");
		o.backend = backend;
		if (o.device == "none")
			o.device.clear(); // memory only
		if (estimator != "exact" && estimator != "quest")
			throw po::error("--kv-estimator " + estimator + ": use exact or quest");
		o.estimator = estimator == "quest" ? csd::Estimator::QuestBounds : csd::Estimator::Exact;
		if (mode != "kv" && mode != "bpf")
			throw po::error("--mode " + mode + ": use kv or bpf");
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
	if (kv::Server::open(cfg, server, err)) {
		say("failed to start: " + err);
		return 1;
	}
	server->log = say;
	if (bpf)
		server->pagecache_status = [&bpf] { return bpf->status(); };
	g_server = server.get();
	struct sigaction sa{};
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGINT, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);
	say("serving on " + cfg.socket_path + " (device " + (o.device.empty() ? "none: memory only" : o.device) +
	    ", backend " + backend + ", " + units::format_bytes(o.cpu_budget) + " per session)");
	const int r = server->run();
	const size_t open_sessions = server->sessions();
	server.reset();
	bpf.reset();
	g_server = nullptr;
	if (r < 0) {
		say("event loop failed: " + std::string(strerror(-r)));
		return 1;
	}
	say("stopped; closed " + std::to_string(open_sessions) + " sessions");
	return 0;
}
