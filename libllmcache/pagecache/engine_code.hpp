// SPDX-License-Identifier: MIT
/*
 * The engine's own code: its binary, its libraries and their data, as it maps them. When pins hold most
 * of a memory cgroup, reclaim has little else to take than these pages, and each one the engine faults
 * back in costs a whole read-around window (8 MiB on a disk whose read_ahead_kb is 8192): node-llama-cpp
 * at a 650 MiB limit re-read its 94 MiB node binary 18 times in 10 tokens. So the manager locks the blocks
 * of these files that the engine has present in its page tables (/proc/PID/pagemap) once it runs its
 * loop, after paging them out once (MADV_PAGEOUT): what comes back is what it keeps using, not what it
 * touched at start-up. The room is already outside the pin budget, which subtracts the engine's mapped
 * code (mapped_file_bytes()).
 */
#pragma once
#include "pagecache/memcg.hpp"
#include "pagecache/pinned_file.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace llmcache::pagecache {

// The blocks of m's file that the process whose /proc/PID/pagemap is open as pagemap_fd has present in
// its page tables, as sorted runs appended to out. Returns 0 or -errno.
int present_blocks(int pagemap_fd, const FileMapping &m, std::vector<Range> &out);

// The bytes of pid's file mappings maps (its binary, libraries, data files, as last read from its maps)
// other than the files in exclude that are present in its page tables: the code an engine keeps hot
// besides its weights. From its pagemap, for those mappings only (smaps would have the kernel walk the
// weights' page tables too); 0 when pid is gone.
uint64_t mapped_file_bytes(pid_t pid, const std::vector<FileMapping> &maps, const FileIds &exclude);

} // namespace llmcache::pagecache
