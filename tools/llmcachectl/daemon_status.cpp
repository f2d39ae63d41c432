// SPDX-License-Identifier: MIT
/*
 * llmcachectl status / loops in both modes. With llmcache.ko loaded, `status` is the module's
 * (kmod.cpp, /sys/kernel/llmcache). Without it, both ask llmcached --mode=bpf over its socket
 * (PAGECACHE_STATUS) and print the same fields: tunables, statistics, files, plus what only the
 * userspace mode has (the budget after the memory-cgroup cap, VmLck, scans dropped); --json in the
 * module's schema (Documentation/admin-guide.md, "The status schema"). The daemon's answer is
 * "key value" lines whose first word says what they describe (global, stats, file, loop); a file's
 * path is its last value, with space, newline and % escaped as %20, %0a, %25.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "../../include/uapi/llmcache.h"
#include "kmod.hpp"
#include "kv/protocol.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
namespace proto = llmcache::kv::proto;
namespace units = llmcache::units;
using llmcache::kmod::Failure;
using llmcache::kmod::Json;
using llmcache::kmod::json_text;
using llmcache::kmod::report_errors;

int cmd_status(int argc, char **argv); // kmod.cpp
int cmd_loops(int argc, char **argv);  // control.cpp

namespace {

struct Line {
	std::string kind;
	std::vector<std::pair<std::string, std::string>> kv;
	std::string get(const std::string &k) const
	{
		for (const auto &[key, v] : kv)
			if (key == k)
				return v;
		return "0";
	}
	uint64_t num(const std::string &k) const { return std::stoull(get(k)); }
};

std::string unescape(const std::string &s)
{
	std::string out;
	for (size_t i = 0; i < s.size(); i++) {
		if (s[i] == '%' && i + 2 < s.size()) {
			out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
			i += 2;
		} else {
			out += s[i];
		}
	}
	return out;
}

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

std::vector<Line> parse(const std::string &text)
{
	std::vector<Line> out;
	std::istringstream lines(text);
	for (std::string line; std::getline(lines, line);) {
		std::istringstream words(line);
		Line l;
		words >> l.kind;
		for (std::string k, v; words >> k >> v;)
			l.kv.emplace_back(k, k == "path" ? unescape(v) : v);
		out.push_back(std::move(l));
	}
	return out;
}

// Line l's values into object out, after the keys out already has: the words as strings, the rest as
// counts (the protocol's values are unsigned decimals but for these).
void add_values(Json &out, const Line &l, std::initializer_list<std::string> words = {})
{
	for (const auto &[k, v] : l.kv)
		if (!out.contains(k))
			out[k] = std::find(words.begin(), words.end(), k) != words.end()
					 ? Json(v)
					 : llmcache::kmod::json_count(v, "llmcached's " + l.kind + " " + k);
}

const Line &find(const std::vector<Line> &lines, const std::string &kind)
{
	for (const Line &l : lines)
		if (l.kind == kind)
			return l;
	throw Failure{"llmcached's status has no '" + kind + "' line: is llmcachectl older than the daemon?"};
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

void print_loops(const std::vector<Line> &lines)
{
	std::printf("%6s %5s %10s %10s %6s %12s %10s %10s %10s %12s\n", "seq", "file", "first", "N", "iters", "period",
		    "S_min", "pinned", "deficit", "stall/iter");
	for (const Line &l : lines)
		if (l.kind == "loop")
			std::printf("%6s %5s %10s %10s %6s %12s %10s %10s %10s %12s\n", l.get("seq").c_str(), l.get("file").c_str(),
				    l.get("first").c_str(), l.get("n").c_str(), l.get("iterations").c_str(),
				    units::format_duration(l.num("period_ns")).c_str(), l.get("s_min").c_str(),
				    l.get("pinned").c_str(), l.get("deficit").c_str(),
				    units::format_duration(l.num("stall_ns")).c_str());
}

int daemon_status(const Args &a)
{
	const auto lines = parse(ask(a.socket, a.timeout_ms));
	const Line &g = find(lines, "global"), &st = find(lines, "stats");
	if (a.json) {
		// The module's schema (Documentation/admin-guide.md): "source" says the mode, and the loops are
		// loops --json's.
		Json j = {{"source", "llmcached"}};
		add_values(j, g, {"mode", "hook_mode"});
		j.erase("mode");
		add_values(j["stats"] = Json::object(), st);
		// The daemon's events_dropped counts feed records the ring had no room for, the module's the
		// blocks of events too large to classify: one key, one unit.
		j["stats"]["records_lost"] = j["stats"]["events_dropped"];
		j["stats"].erase("events_dropped");
		j["files"] = Json::array();
		for (const Line &l : lines)
			if (l.kind == "file") {
				Json f = {{"id", llmcache::kmod::json_count(l.get("id"), "llmcached's file id")},
					  {"path", l.get("path")}};
				add_values(f, l);
				j["files"].push_back(f);
			}
		std::printf("%s\n", json_text(j).c_str());
		return 0;
	}
	std::printf("llmcached --mode=bpf: %s, hooks %s, %s files registered\n", g.num("enable") ? "enabled" : "disabled",
		    g.get("hook_mode").c_str(), g.get("registered").c_str());
	std::printf("pin budget %s (%s after the memory-cgroup cap), hot reserve %s, BW %s/s, T %s, locked %s\n",
		    units::format_bytes(g.num("pin_budget")).c_str(), units::format_bytes(g.num("effective_budget")).c_str(),
		    units::format_bytes(g.num("hot_reserve")).c_str(), units::format_bytes(g.num("bw")).c_str(),
		    units::format_duration(g.num("t_ns")).c_str(), units::format_bytes(g.num("vm_locked")).c_str());
	for (const auto &[k, v] : st.kv)
		std::printf("  %-18s %s\n", k.c_str(), v.c_str());
	for (const Line &l : lines)
		if (l.kind == "file")
			std::printf("file %s: %s\n  accesses %s (SEQ %s, LOOP %s, HOT %s), pinned %s, resident %s of %s, "
				    "dropped %s, cold %s\n",
				    l.get("id").c_str(), l.get("path").c_str(), l.get("accesses").c_str(), l.get("seq_blocks").c_str(),
				    l.get("loop_blocks").c_str(), l.get("hot_blocks").c_str(), l.get("pinned").c_str(),
				    l.get("resident").c_str(), l.get("blocks").c_str(), l.get("dropped").c_str(), l.get("cold").c_str());
	for (const Line &l : lines)
		if (l.kind == "truncated")
			std::printf("(%s more files not shown)\n", l.get("files").c_str());
	return 0;
}

// `loops --json` in the module's schema (control.cpp), so that a script reads both modes alike: the
// rule's BW and T (set: the page-cache mode takes them from its options and measures neither, so the
// measured ones are 0, the module's "not measured yet"), and per loop the module's names; a stall
// that cannot be predicted (no BW) is null.
void print_loops_like_module(const std::vector<Line> &lines)
{
	const Line &g = find(lines, "global");
	auto path_of = [&](const std::string &id) {
		for (const Line &l : lines)
			if (l.kind == "file" && l.get("id") == id)
				return l.get("path");
		return std::string("?"); // not in a truncated listing
	};
	size_t total = 0;
	for (const Line &l : lines)
		total += l.kind == "loop";
	Json j = {{"bw", g.num("bw")}, {"bw_source", "set"}, {"t_ns", g.num("t_ns")}, {"t_source", "set"},
		  {"bw_measured", 0}, {"t_measured_ns", 0}, {"total", total}, {"loops", Json::array()}};
	for (const Line &l : lines)
		if (l.kind == "loop")
			j["loops"].push_back({{"file_id", l.num("file")}, {"path", path_of(l.get("file"))}, {"seq", l.num("seq")},
					      {"first_block", l.num("first")}, {"blocks", l.num("n")},
					      {"period_ns", l.num("period_ns")}, {"iterations", l.num("iterations")},
					      {"s_min", l.num("s_min")}, {"pinned", l.num("pinned")}, {"deficit", l.num("deficit")},
					      {"stall_ns", l.num("stall_ns") == UINT64_MAX ? Json() : Json(l.num("stall_ns"))}});
	std::printf("%s\n", json_text(j).c_str());
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
		const auto lines = parse(ask(a.socket, a.timeout_ms));
		if (a.json)
			print_loops_like_module(lines);
		else
			print_loops(lines);
		return 0;
	});
}
