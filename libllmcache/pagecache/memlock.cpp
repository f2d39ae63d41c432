// SPDX-License-Identifier: MIT
#include "pagecache/memlock.hpp"

#include "util/units.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace llmcache::pagecache {

bool has_cap_ipc_lock()
{
	constexpr int CAP_IPC_LOCK_BIT = 14; // linux/capability.h
	std::ifstream in("/proc/self/status");
	for (std::string line; std::getline(in, line);)
		if (line.rfind("CapEff:", 0) == 0)
			return (std::stoull(line.substr(7), nullptr, 16) >> CAP_IPC_LOCK_BIT) & 1;
	return false;
}

int ensure_memlock(uint64_t budget_bytes, std::string &err)
{
	if (has_cap_ipc_lock())
		return 0; // mlock() ignores RLIMIT_MEMLOCK with CAP_IPC_LOCK
	rlimit rl{};
	getrlimit(RLIMIT_MEMLOCK, &rl);
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= budget_bytes)
		return 0;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= budget_bytes) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? budget_bytes : rl.rlim_max;
		if (!setrlimit(RLIMIT_MEMLOCK, &rl))
			return 0;
	}
	err = "the pin budget " + units::format_bytes(budget_bytes) + " exceeds RLIMIT_MEMLOCK (soft " +
	      units::format_bytes(rl.rlim_cur) + ", hard " +
	      (rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : units::format_bytes(rl.rlim_max)) +
	      ") and llmcached lacks CAP_IPC_LOCK: lower --pin-budget, raise the limit (ulimit -l, or "
	      "LimitMEMLOCK= in the systemd unit) or grant CAP_IPC_LOCK (AmbientCapabilities=CAP_IPC_LOCK)";
	return -EPERM;
}

} // namespace llmcache::pagecache
