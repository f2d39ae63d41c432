// SPDX-License-Identifier: MIT
/*
 * llmcached --mode=bpf: the page-cache policy without the kernel module. The BPF access feed
 * (bpf/feed.hpp: the recorder's program, hooks chosen per kernel) runs on a thread of its own and hands
 * every access to the policy manager (libllmcache/pagecache/manager.hpp), which pins loops with mlock()
 * and drops finished scans. The KV service keeps running on the main thread and answers
 * PAGECACHE_STATUS with this mode's status. Documentation/userspace-mode.md says what it needs and
 * what it cannot do.
 */
#pragma once
#include <boost/program_options.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmcached {

struct BpfModeConfig {
	std::vector<std::string> manage;
	std::vector<std::string> pid_args; // --pid as given; check_bpf_mode_options() fills pids
	std::vector<uint32_t> pids;
	std::string cgroup, pin_budget = "256MiB", hot_reserve = "4MiB", bw = "100MB/s", t = "100ms",
			    min_size = "1MiB", scan_idle = "1s", memcg_headroom = "16MiB", ring = "4MiB", hooks = "auto";
	bool no_prefetch = false;
};

// The options of this mode (they take effect with --mode=bpf).
void add_bpf_mode_options(boost::program_options::options_description &d, BpfModeConfig &c);
// Checks every option of this mode against its range, before anything starts, and fills c.pids.
// Throws boost::program_options::error naming the option, its value and what it may be.
void check_bpf_mode_options(BpfModeConfig &c);

class BpfMode {
public:
	// Checks the options, privileges, RLIMIT_MEMLOCK and BPF, opens the --manage files and starts the
	// feed thread. Returns 0, or -errno with err saying what to do.
	static int start(const BpfModeConfig &c, std::function<void(const std::string &)> log,
			 std::unique_ptr<BpfMode> &out, std::string &err);
	~BpfMode(); // stops the thread; the pins go with the mapping
	std::string status();

private:
	struct Impl;
	std::unique_ptr<Impl> impl_;
};

} // namespace llmcached
