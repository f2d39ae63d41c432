// SPDX-License-Identifier: MIT
#include "pagecache/memcg.hpp"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace llmcache::pagecache {

std::string memcg_dir(std::string_view text)
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
				return "/sys/fs/cgroup/memory" + (path == "/" ? "" : path);
		if (ctl.empty() && line.rfind("0:", 0) == 0)
			v2 = path;
	}
	if (v2.empty() || v2 == "/")
		return {};
	const std::string root = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup"
											  : "/sys/fs/cgroup/unified";
	return root + v2;
}

std::string memcg_dir(pid_t pid)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
	std::stringstream text;
	text << in.rdbuf();
	return memcg_dir(text.str());
}

MemcgUsage memcg_usage(const std::string &dir)
{
	MemcgUsage u;
	if (dir.empty())
		return u;
	const bool v1 = access((dir + "/memory.limit_in_bytes").c_str(), F_OK) == 0;
	std::ifstream lim(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"));
	std::string v;
	if (lim >> v && v != "max") {
		try {
			const uint64_t x = std::stoull(v);
			u.limit = x >= (1ull << 60) ? UINT64_MAX : x; // v1 says "unlimited" with a huge number
		} catch (...) {
		}
	}
	std::ifstream stat(dir + "/memory.stat");
	std::string key;
	for (uint64_t n; stat >> key >> n;)
		if (v1 ? key == "total_rss" || key == "total_shmem" : key == "anon" || key == "shmem")
			u.anon += n;
	return u;
}

std::vector<FileMapping> file_mappings(std::string_view maps)
{
	std::vector<FileMapping> out;
	std::istringstream in{std::string(maps)};
	for (std::string line; std::getline(in, line);) {
		// "start-end perms offset major:minor inode [path]"
		unsigned long long start, end, offset, inode;
		unsigned ma, mi;
		char perms[8];
		if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &offset, &ma, &mi,
				&inode) == 7 &&
		    inode && end > start)
			out.push_back({start, end, offset, makedev(ma, mi), inode});
	}
	return out;
}

int read_file_mappings(pid_t pid, std::vector<FileMapping> &out)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
	if (!in)
		return -ESRCH;
	std::stringstream text;
	text << in.rdbuf();
	out = file_mappings(text.str());
	return 0;
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
