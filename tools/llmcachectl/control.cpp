// SPDX-License-Identifier: MIT
// llmcachectl loops / auto: llmcache.ko's per-loop sizing table (LLMCACHE_IOC_LOOPS: one consistent
// snapshot of every loop of the registered files with the sizing rule applied) and its automatic mode
// (LLMCACHE_IOC_SET_AUTO; its state in /sys/kernel/llmcache/auto/). See Documentation/admin-guide.md.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <string>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

#include <boost/program_options.hpp>

#include "../../include/uapi/llmcache.h"
#include "kmod.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
namespace units = llmcache::units;
using namespace llmcache::kmod;

namespace {

constexpr uint64_t unknown_stall = ~0ULL; // the module's stall when BW is unknown
const po::positional_options_description no_positionals; // words that are not options are errors

// Bandwidth in decimal MB/s, as storage is rated (and as `llmcachectl size` prints it).
std::string mbps(uint64_t bytes_per_s)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "%.1f MB/s", bytes_per_s / 1e6);
	return buf;
}

std::string path_of(uint64_t id)
{
	try {
		return read_value("files/" + std::to_string(id) + "/path");
	} catch (const Failure &) {
		return "?"; // unregistered since the snapshot
	}
}

int loops(const std::vector<std::string> &args)
{
	bool json = false;
	po::options_description d("Options");
	d.add_options()("help,h", "show this help")("json", po::bool_switch(&json), "print JSON");
	po::variables_map vm;
	po::store(po::command_line_parser(args).options(d).positional(no_positionals).run(), vm);
	po::notify(vm);
	if (vm.count("help")) {
		std::cout << "Usage: llmcachectl loops [--json]\n\nThe loops of the registered files and what the sizing "
			     "rule makes of them (root only):\nN blocks per iteration, period, S_min = max(0, N - BW*T), "
			     "pinned blocks, deficit = S_min - pinned,\npredicted stall per iteration. BW and T are the "
			     "bw and t_ns tunables, or measured when those are 0.\n\n"
			  << d << "\nEXAMPLES\n  llmcachectl loops\n  llmcachectl loops --json\n";
		return 0;
	}
	int dev = open_device();
	std::vector<llmcache_loop> table(4096);
	llmcache_ioc_loops req{};
	req.loops = reinterpret_cast<uintptr_t>(table.data());
	req.max = table.size();
	if (ioctl(dev, LLMCACHE_IOC_LOOPS, &req)) {
		int err = errno;
		close(dev);
		throw Failure{std::string("reading the loops table failed: ") + std::strerror(err)};
	}
	close(dev);
	table.resize(req.count);
	const bool bw_measured = req.flags & LLMCACHE_LOOPS_BW_MEASURED, t_measured = req.flags & LLMCACHE_LOOPS_T_MEASURED;
	if (json) {
		Json j = {{"bw", req.bw}, {"bw_source", bw_measured ? "measured" : "set"}, {"t_ns", req.t_ns},
			  {"t_source", t_measured ? "measured" : "set"}, {"bw_measured", req.bw_measured},
			  {"t_measured_ns", req.t_measured_ns}, {"total", req.total}, {"loops", Json::array()}};
		for (const auto &l : table)
			j["loops"].push_back({{"file_id", l.file_id}, {"path", path_of(l.file_id)}, {"seq", l.seq},
					      {"first_block", l.first_block}, {"blocks", l.blocks}, {"period_ns", l.period_ns},
					      {"iterations", l.iterations}, {"s_min", l.s_min}, {"pinned", l.pinned},
					      {"deficit", l.deficit},
					      {"stall_ns", l.stall_ns == unknown_stall ? Json() : Json(l.stall_ns)}});
		std::printf("%s\n", json_text(j).c_str());
		return 0;
	}
	std::printf("BW %s (%s), T %s (%s); measured: BW %s, T %s\n",
		    req.bw ? mbps(req.bw).c_str() : "unknown", bw_measured ? "measured" : "set",
		    units::format_duration(req.t_ns).c_str(), t_measured ? "measured" : "set",
		    req.bw_measured ? mbps(req.bw_measured).c_str() : "none yet",
		    req.t_measured_ns ? units::format_duration(req.t_measured_ns).c_str() : "none yet");
	if (table.empty()) {
		std::printf("no loops in the registered files\n");
		return 0;
	}
	std::printf("%5s %6s %10s %9s %10s %6s %9s %9s %9s %10s  %s\n", "file", "seq", "first", "N", "period", "iters",
		    "S_min", "pinned", "deficit", "stall", "path");
	for (const auto &l : table)
		std::printf("%5llu %6llu %10llu %9llu %10s %6llu %9llu %9llu %9llu %10s  %s\n",
			    (unsigned long long)l.file_id, (unsigned long long)l.seq, (unsigned long long)l.first_block,
			    (unsigned long long)l.blocks, units::format_duration(l.period_ns).c_str(),
			    (unsigned long long)l.iterations, (unsigned long long)l.s_min, (unsigned long long)l.pinned,
			    (unsigned long long)l.deficit,
			    l.stall_ns == unknown_stall ? "no BW" : units::format_duration(l.stall_ns).c_str(),
			    path_of(l.file_id).c_str());
	if (req.total > req.count)
		std::printf("(%u more loops not shown)\n", req.total - req.count);
	return 0;
}

int auto_mode(const std::vector<std::string> &args)
{
	int pid = 0;
	std::string cgroup, min_size_text = "64MiB";
	bool off = false, json = false;
	po::options_description d("Options");
	d.add_options()("help,h", "show this help")("pid", po::value(&pid), "manage the files of this process")(
		"cgroup", po::value(&cgroup), "manage the files of the processes of this cgroup v2 directory")(
		"min-size", po::value(&min_size_text)->default_value(min_size_text), "smallest file to register")(
		"off", po::bool_switch(&off), "stop the automatic mode (registered files stay registered)")(
		"json", po::bool_switch(&json), "print the state as JSON");
	po::variables_map vm;
	po::store(po::command_line_parser(args).options(d).positional(no_positionals).run(), vm);
	po::notify(vm);
	if (vm.count("help")) {
		std::cout << "Usage: llmcachectl auto [--pid PID | --cgroup PATH [--min-size SIZE] | --off] [--json]\n\n"
			     "The automatic mode registers, every second, the regular files on storage that the process "
			     "(or the\ncgroup's processes) has open or mapped and that are at least --min-size bytes. It "
			     "stops when the\nprocess exits, the cgroup is removed or --off is given (root only). Without "
			     "an option: its state.\n\n"
			  << d
			  << "\nEXAMPLES\n  llmcachectl auto --pid $(pidof llama-server) --min-size 64MiB\n"
			     "  llmcachectl auto --cgroup /sys/fs/cgroup/llm.slice\n  llmcachectl auto --off\n"
			     "  llmcachectl auto --json\n";
		return 0;
	}
	if ((vm.count("pid") > 0) + !cgroup.empty() + off > 1)
		throw po::error("say one of --pid, --cgroup and --off");
	if (vm.count("pid") || !cgroup.empty() || off) {
		llmcache_ioc_auto req{};
		try {
			req.min_size = units::parse_bytes(min_size_text);
		} catch (const std::invalid_argument &e) {
			throw po::error(std::string("--min-size: ") + e.what());
		}
		if (!off && req.min_size < LLMCACHE_BLOCK_SIZE)
			throw po::error("--min-size must be at least 4 KiB");
		if (vm.count("pid") && pid <= 0)
			throw po::error("--pid must be a process id above 0");
		int cgfd = -1;
		if (!cgroup.empty() && (cgfd = open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			throw Failure{cgroup + ": " + std::strerror(errno)};
		req.mode = off ? LLMCACHE_AUTO_OFF : cgfd >= 0 ? LLMCACHE_AUTO_CGROUP : LLMCACHE_AUTO_PID;
		req.target = cgfd >= 0 ? cgfd : pid;
		int dev;
		try {
			dev = open_device();
		} catch (...) {
			if (cgfd >= 0)
				close(cgfd);
			throw;
		}
		int rc = ioctl(dev, LLMCACHE_IOC_SET_AUTO, &req), err = errno;
		close(dev);
		if (cgfd >= 0)
			close(cgfd);
		if (rc && err == ESRCH)
			throw Failure{"no process " + std::to_string(pid) + " (a process id, not a thread's)"};
		if (rc && err == EBADF && cgfd >= 0)
			throw Failure{cgroup + " is not a cgroup v2 directory (mount -t cgroup2 none /sys/fs/cgroup)"};
		if (rc)
			throw Failure{std::string("setting the automatic mode failed: ") + std::strerror(err)};
	} else {
		require_loaded();
	}
	std::string mode = read_value("auto/mode");
	if (json) {
		Json j = {{"mode", mode}};
		for (const char *f : {"target", "min_size", "registered", "scans"})
			j[f] = json_count(read_value(std::string("auto/") + f), sysfs + "/auto/" + f);
		std::printf("%s\n", json_text(j).c_str());
	} else if (mode == "off") {
		std::printf("automatic mode off\n");
	} else {
		std::printf("automatic mode on: %s %s, files from %s, %s registered in %s scans\n", mode.c_str(),
			    read_value("auto/target").c_str(),
			    units::format_bytes(std::stoull(read_value("auto/min_size"))).c_str(),
			    read_value("auto/registered").c_str(), read_value("auto/scans").c_str());
	}
	return 0;
}

int run(const std::string &cmd, int argc, char **argv)
{
	std::vector<std::string> args(argv + 1, argv + argc);
	return report_errors(cmd, [&] { return cmd == "loops" ? loops(args) : auto_mode(args); });
}

} // namespace

int cmd_loops(int argc, char **argv) { return run("loops", argc, argv); }
int cmd_auto(int argc, char **argv) { return run("auto", argc, argv); }
