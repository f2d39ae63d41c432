// SPDX-License-Identifier: MIT
/*
 * Reading a managed file in for an engine, charged to the engine's memory cgroup, in large folios. The
 * kernel charges a page-cache page to the memory cgroup of the process that reads it in (its mm's
 * owner, whichever thread reads), so the daemon's own reads would hold the engine's weights outside the
 * engine's limit. A Prefetcher is a child process that joins the engine's memory cgroup and does nothing
 * but read the ranges the daemon sends it over a socket pair (each file's descriptor travels with its
 * first range, SCM_RIGHTS): it maps the file with MADV_HUGEPAGE and faults the range in with
 * MADV_POPULATE_READ, so the page cache gets PMD-size folios that an mmap engine maps with one entry
 * each (readahead(2) and the engine's own read-around under memory pressure give 4 KiB folios, and a
 * matrix kernel streaming through 4 KiB mappings spends most of its time in page walks), then drops its
 * own mapping of them (MADV_DONTNEED). The child dies with the daemon (PR_SET_PDEATHSIG) or when the
 * socket closes, and is reaped by the destructor. Sends never block: when the child is behind, a range
 * is skipped.
 */
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmcache::pagecache {

class Prefetcher {
public:
	static constexpr uint32_t MAX_FILES = 64;
	// Start the child in the memory cgroup whose directory is cgroup_dir. 0, or -errno with err saying why.
	static int start(const std::string &cgroup_dir, std::unique_ptr<Prefetcher> &out, std::string &err);
	~Prefetcher();
	Prefetcher(const Prefetcher &) = delete;
	Prefetcher &operator=(const Prefetcher &) = delete;

	// Ask for blocks [first, first + count) of fd, the file in slot (< MAX_FILES) from now on, to be
	// read in. false when the request was not queued: the child is behind or gone.
	bool read_ahead(uint32_t slot, int fd, uint64_t first, uint64_t count);
	const std::string &cgroup() const { return cgroup_; }
	pid_t pid() const { return child_; }
	uint64_t asked() const { return asked_; }   // blocks
	uint64_t skipped() const { return skipped_; } // blocks

private:
	Prefetcher() = default;
	int sock_ = -1;
	pid_t child_ = -1;
	std::string cgroup_;
	std::vector<int> sent_; // per slot: the fd the child has for it, -1: none
	uint64_t asked_ = 0, skipped_ = 0;
};

} // namespace llmcache::pagecache
