// SPDX-License-Identifier: MIT
/*
 * llmcachectl status / loops in both modes. With llmcache.ko loaded, `status` is the module's
 * (kmod.cpp, /sys/kernel/llmcache). Without it, both ask llmcached --mode=bpf over its socket
 * (PAGECACHE_STATUS) and print the same fields: tunables, statistics, files, plus what only the
 * userspace mode has (the budget after the memory-cgroup cap, VmLck, scans dropped); --json in the
 * module's schema (Documentation/admin-guide.md, "The status schema"). daemon_reply.cpp reads the
 * daemon's answer and makes its JSON.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "../../include/uapi/llmcache.h"
#include "daemon_reply.hpp"
#include "kmod.hpp"
#include "kv/protocol.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
namespace proto = llmcache::kv::proto;
namespace units = llmcache::units;
using namespace llmcache::kmod;

int cmd_status(int argc, char **argv); // kmod.cpp
int cmd_loops(int argc, char **argv);  // control.cpp

namespace {

// One PAGECACHE_STATUS request; the daemon's text, or a Failure that says what to do.
std::string ask(const std::string &socket_path, uint32_t timeout_ms)
{
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	if (socket_path.size() >= sizeof(addr.sun_path))
		throw Failure{"socket path " + socket_path + " is too long"};
	std::strcpy(addr.sun_path, socket_path.c_str());
	const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	// Bounded waits: a daemon that accepts and never answers must not hang llmcachectl.
	const timeval tv{time_t(timeout_ms / 1000), suseconds_t(timeout_ms % 1000) * 1000};
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (fd < 0 || connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) < 0) {
		const int e = errno;
		if (fd >= 0)
			close(fd);
		throw Failure{"the llmcache module is not loaded and llmcached does not answer on " + socket_path + " (" +
			      std::strerror(e) + "): load the module, or start llmcached --mode=bpf (see "
						 "Documentation/userspace-mode.md); --socket names another socket"};
	}
	proto::Header h{proto::MAGIC, proto::VERSION, proto::PAGECACHE_STATUS, 0, 1};
	std::vector<uint8_t> buf(1 << 20);
	ssize_t n = send(fd, &h, sizeof(h), MSG_NOSIGNAL);
	if (n == ssize_t(sizeof(h)))
		do
			n = recv(fd, buf.data(), buf.size(), 0);
		while (n < 0 && errno == EINTR);
	const bool late = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	close(fd);
	if (late)
		throw Failure{"llmcached on " + socket_path + " did not answer within " + std::to_string(timeout_ms) +
			      " ms: it is stuck or overloaded (see its log); --timeout waits longer"};
	proto::Header rh;
	proto::Reply r;
	if (n < ssize_t(sizeof(rh) + sizeof(r)))
		throw Failure{"no reply from llmcached on " + socket_path};
	std::memcpy(&rh, buf.data(), sizeof(rh));
	std::memcpy(&r, buf.data() + sizeof(rh), sizeof(r));
	if (rh.magic != proto::MAGIC || rh.type != proto::REPLY || sizeof(rh) + sizeof(r) + r.text_len != size_t(n))
		throw Failure{"malformed reply from llmcached on " + socket_path};
	std::string text(reinterpret_cast<const char *>(buf.data()) + sizeof(rh) + sizeof(r), r.text_len);
	if (r.status < 0)
		throw Failure{text};
	return text;
}

struct Args {
	bool json = false;
	std::string socket = "/run/llmcached/llmcached.sock", timeout = "5s";
	uint32_t timeout_ms = 5000;
};

bool parse_args(const char *name, const char *what, int argc, char **argv, Args &a)
{
	po::options_description d(std::string("llmcachectl ") + name + ": " + what);
	d.add_options()("help,h", "show this help")("json", po::bool_switch(&a.json), "print JSON")(
		"socket", po::value(&a.socket)->default_value(a.socket), "llmcached's socket (when the module is not loaded)")(
		"timeout", po::value(&a.timeout)->default_value(a.timeout), "give up when llmcached does not answer within this (1ms-1h)");
	po::variables_map vm;
	po::store(po::command_line_parser(argc, argv).options(d).positional({}).run(), vm);
	po::notify(vm);
	uint64_t ns = 0;
	try {
		ns = units::parse_duration_ns(a.timeout);
	} catch (const std::exception &e) {
		throw po::error("--timeout " + a.timeout + ": " + e.what());
	}
	if (ns < 1'000'000 || ns > 3600'000'000'000ull)
		throw po::error("--timeout " + a.timeout + ": must be from 1ms to 1h");
	a.timeout_ms = uint32_t(ns / 1'000'000);
	if (vm.count("help"))
		std::cout << "Usage: llmcachectl " << name << " [--json] [--socket PATH]\n\n"
			  << d << "\nEXAMPLES\n  llmcachectl " << name << "\n  llmcachectl " << name
			  << " --json --socket /tmp/llmcached.sock\n";
	return vm.count("help") == 0;
}

void print_loops(const std::vector<StatusLine> &lines)
{
	std::printf("%6s %5s %10s %10s %6s %12s %10s %10s %10s %12s\n", "seq", "file", "first", "N", "iters", "period",
		    "S_min", "pinned", "deficit", "stall/iter");
	for (const StatusLine &l : lines)
		if (l.kind == "loop")
			std::printf("%6s %5s %10s %10s %6s %12s %10s %10s %10s %12s\n", l.get("seq").c_str(), l.get("file").c_str(),
				    l.get("first").c_str(), l.get("n").c_str(), l.get("iterations").c_str(),
				    units::format_duration(l.num("period_ns")).c_str(), l.get("s_min").c_str(),
				    l.get("pinned").c_str(), l.get("deficit").c_str(),
				    units::format_duration(l.num("stall_ns")).c_str());
}

int daemon_status(const Args &a)
{
	const auto lines = parse_status(ask(a.socket, a.timeout_ms));
	const StatusLine &g = find_line(lines, "global"), &st = find_line(lines, "stats");
	if (a.json) {
		std::printf("%s\n", json_text(status_json(lines)).c_str());
		return 0;
	}
	std::printf("llmcached --mode=bpf: %s, hooks %s, %s files registered\n", g.num("enable") ? "enabled" : "disabled",
		    g.get("hook_mode").c_str(), g.get("registered").c_str());
	std::printf("pin budget %s (%s after the memory-cgroup cap), hot reserve %s, BW %s/s, T %s, locked %s\n",
		    units::format_bytes(g.num("pin_budget")).c_str(), units::format_bytes(g.num("effective_budget")).c_str(),
		    units::format_bytes(g.num("hot_reserve")).c_str(), units::format_bytes(g.num("bw")).c_str(),
		    units::format_duration(g.num("t_ns")).c_str(), units::format_bytes(g.num("vm_locked")).c_str());
	for (const auto &[k, v] : st.values)
		std::printf("  %-18s %s\n", k.c_str(), v.c_str());
	for (const StatusLine &l : lines)
		if (l.kind == "file")
			std::printf("file %s: %s\n  accesses %s (SEQ %s, LOOP %s, HOT %s), pinned %s, resident %s of %s, "
				    "dropped %s, cold %s\n",
				    l.get("id").c_str(), l.get("path").c_str(), l.get("accesses").c_str(), l.get("seq_blocks").c_str(),
				    l.get("loop_blocks").c_str(), l.get("hot_blocks").c_str(), l.get("pinned").c_str(),
				    l.get("resident").c_str(), l.get("blocks").c_str(), l.get("dropped").c_str(), l.get("cold").c_str());
	for (const StatusLine &l : lines)
		if (l.kind == "truncated")
			std::printf("(%s more files not shown)\n", l.get("files").c_str());
	return 0;
}

bool module_loaded() { return access(LLMCACHE_SYSFS_DIR, F_OK) == 0; }

} // namespace

// `status`: the module's when it is loaded, else llmcached's page-cache mode.
int cmd_status_routed(int argc, char **argv)
{
	if (module_loaded())
		return cmd_status(argc, argv);
	return report_errors("status", [&] {
		Args a;
		return parse_args("status", "settings, statistics and files of llmcache.ko or llmcached --mode=bpf", argc,
				  argv, a)
			       ? daemon_status(a)
			       : 0;
	});
}

// `loops`: the module's when it is loaded, else llmcached --mode=bpf's per-loop sizing table.
int cmd_loops_routed(int argc, char **argv)
{
	if (module_loaded())
		return cmd_loops(argc, argv);
	return report_errors("loops", [&] {
		Args a;
		if (!parse_args("loops", "the loops and their sizing (S_min = max(0, N - BW*T)), in blocks", argc, argv, a))
			return 0;
		const auto lines = parse_status(ask(a.socket, a.timeout_ms));
		if (a.json)
			std::printf("%s\n", json_text(loops_json(lines)).c_str());
		else
			print_loops(lines);
		return 0;
	});
}
