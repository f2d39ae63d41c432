// SPDX-License-Identifier: MIT
#include "pagecache/memcg.hpp"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace llmcache::pagecache {

std::string memcg_limit_file(std::string_view text)
{
	std::istringstream in{std::string(text)};
	std::string v2;
	for (std::string line; std::getline(in, line);) {
		// "ID:CONTROLLERS:PATH"
		const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
		if (b == std::string::npos)
			continue;
		const std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
		std::istringstream names(ctl);
		for (std::string n; std::getline(names, n, ',');)
			if (n == "memory")
				return "/sys/fs/cgroup/memory" + (path == "/" ? "" : path) + "/memory.limit_in_bytes";
		if (ctl.empty() && line.rfind("0:", 0) == 0)
			v2 = path;
	}
	if (v2.empty() || v2 == "/")
		return {};
	const std::string root = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup"
											  : "/sys/fs/cgroup/unified";
	return root + v2 + "/memory.max";
}

uint64_t memcg_limit(pid_t pid)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
	std::stringstream text;
	text << in.rdbuf();
	const std::string file = memcg_limit_file(text.str());
	std::ifstream lim(file);
	std::string v;
	if (file.empty() || !(lim >> v) || v == "max")
		return UINT64_MAX;
	try {
		const uint64_t x = std::stoull(v);
		return x >= (1ull << 60) ? UINT64_MAX : x; // v1 says "unlimited" with a huge number
	} catch (...) {
		return UINT64_MAX;
	}
}

uint64_t readahead_bytes(dev_t dev)
{
	const std::string base = "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
	for (const char *q : {"/queue/read_ahead_kb", "/../queue/read_ahead_kb"}) // a disk, or a partition of one
		if (std::ifstream in(base + q); in) {
			uint64_t kb = 0;
			if (in >> kb)
				return kb << 10;
		}
	return 0;
}

} // namespace llmcache::pagecache
