// SPDX-License-Identifier: MIT
/*
 * The memory limit of the cgroup an engine runs in. Pinned pages stay charged to the memory cgroup that
 * read them into the page cache (the engine's), and mlocked pages cannot be reclaimed: pinning close to
 * that cgroup's limit would leave the engine no room and end in its OOM kill. The daemon has no
 * shrinker to give pins back under pressure, so it caps its budget below the limit instead.
 */
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmcache::pagecache {

// The directory of the memory cgroup named in a /proc/PID/cgroup text: in the v1 "memory" hierarchy,
// else in the v2 (unified) one. Empty when there is none (the v2 root).
std::string memcg_dir(std::string_view proc_pid_cgroup);
// The directory of pid's memory cgroup; empty when unknown.
std::string memcg_dir(pid_t pid);

// What the budget is sized from: the cgroup's limit (UINT64_MAX: none) and its anonymous memory (the
// engine's heap, context and compute buffers: memory.stat's total_rss + total_shmem in v1, anon + shmem
// in v2).
struct MemcgUsage {
	uint64_t limit = UINT64_MAX, anon = 0;
};
MemcgUsage memcg_usage(const std::string &dir);

// One file mapping of a process: [start, end) of its address space maps the file (dev, inode) from
// byte offset on.
struct FileMapping {
	uint64_t start = 0, end = 0, offset = 0;
	dev_t dev = 0;
	uint64_t inode = 0;
};
// The file mappings in a /proc/PID/maps text.
std::vector<FileMapping> file_mappings(std::string_view maps);
// pid's file mappings, from /proc/PID/maps: 0, or -ESRCH when pid is gone.
int read_file_mappings(pid_t pid, std::vector<FileMapping> &out);

// Files by (st_dev, st_ino).
using FileIds = std::vector<std::pair<dev_t, uint64_t>>;

// The readahead window of the block device that holds a file system (st_dev), in bytes; 0 if unknown.
// An engine streaming a file keeps up to two windows in flight: the pins must leave room for them.
uint64_t readahead_bytes(dev_t dev);

} // namespace llmcache::pagecache
