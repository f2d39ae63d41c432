// SPDX-License-Identifier: MIT
/*
 * Throwing finished scans away from userspace. A read()-based engine's pages of a scan that is over are
 * dropped with posix_fadvise(POSIX_FADV_DONTNEED) on the daemon's own descriptor: the kernel invalidates
 * the clean, unmapped, unlocked pages of the range (mapped pages are skipped). An mmap-based engine
 * keeps its pages mapped: the scans of a mapped file are not dropped at all (its loop looks like one
 * scan), but the passed blocks of a loop that cannot fit are, so for each process that faulted the file
 * the daemon finds where it is mapped (/proc/PID/maps) and asks process_madvise(MADV_PAGEOUT) through a
 * pidfd: the pages are unmapped and reclaimed at once, since they would only be read again after the
 * rest of the loop has gone through the cache. That needs PTRACE_MODE_READ on the target and
 * CAP_SYS_NICE (Linux 5.10+); when it is refused, the range is counted as denied and the pages age
 * normally.
 */
#pragma once
#include "pagecache/memcg.hpp"
#include "pagecache/pinned_file.hpp"

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace llmcache::pagecache {

// posix_fadvise(DONTNEED) of blocks [first, first + count) of fd. Returns 0 or -errno.
int drop_blocks(int fd, uint64_t first, uint64_t count);

// Whether maps holds a mapping of the file (dev, inode).
bool maps_file(const std::vector<FileMapping> &maps, dev_t dev, uint64_t inode);

// process_madvise(MADV_PAGEOUT) of the ranges of blocks of the file (dev, inode) wherever maps, pid's
// file mappings as last read, says pid maps them. Returns the bytes advised (0 when maps has none of
// them), or -errno: -ENOMEM when a range is no longer mapped there (maps is out of date: read it
// again), -EPERM when refused, -ENOSYS when the kernel has no process_madvise, -ESRCH when pid is gone.
long cold_blocks(pid_t pid, const std::vector<FileMapping> &maps, dev_t dev, uint64_t inode,
		 const std::vector<Range> &ranges);

// The same for the whole of each of pid's mappings maps (its pages that other processes map stay).
long cold_mappings(pid_t pid, const std::vector<FileMapping> &maps);

} // namespace llmcache::pagecache
