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

namespace llmcache::pagecache {

// The limit file of the memory cgroup named in a /proc/PID/cgroup text: the v1 "memory" hierarchy's
// memory.limit_in_bytes, else the v2 (unified) hierarchy's memory.max. Empty when there is none.
std::string memcg_limit_file(std::string_view proc_pid_cgroup);

// The limit of pid's memory cgroup in bytes; UINT64_MAX when it is unlimited or unknown.
uint64_t memcg_limit(pid_t pid);

// The readahead window of the block device that holds a file system (st_dev), in bytes; 0 if unknown.
// An engine streaming a file keeps up to two windows in flight: the pins must leave room for them.
uint64_t readahead_bytes(dev_t dev);

} // namespace llmcache::pagecache
