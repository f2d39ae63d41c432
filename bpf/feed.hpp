// SPDX-License-Identifier: MIT
// The BPF access feed: loads bpf/llmtrace.bpf.c with the hooks this kernel has, follows processes, and
// hands every struct llmcache_access and every file name to the caller. `llmtrace record` writes them
// to a trace; llmcached's userspace mode feeds them to the policy core.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include "../include/uapi/llmcache.h"
}

namespace llmtrace {

struct FeedOptions {
	uint32_t pid = 0;                       // follow this process and its children; 0: every process
	std::string cgroup;                     // follow a cgroup v2 directory and its descendants
	std::string cgroup_option = "--cgroup"; // how the user named it, for the message when it is no cgroup
	uint64_t min_size = 0;                  // ignore smaller files
	std::vector<std::string> path_prefixes; // only files under these (whole components)
	uint64_t ring_bytes = 16 << 20;         // power of two, at least 4 KiB
	std::string hooks = "auto";             // auto, filemap or syscalls
	// Record writes with the filemap hooks too. They come from the sys_enter tracepoint, which puts every
	// system call of every task on the kernel's slower path. The syscall hooks always record them.
	bool writes = false;
	// A thread's consecutive reads of a file join into one record of up to this many blocks, with the
	// first read's time: a reader of 4 KiB blocks costs a ring buffer record per join_blocks blocks.
	// 1: a record per read.
	uint32_t join_blocks = 32;
};

// What went wrong, said for the user. usage() is true for bad options (exit status 2), false when the
// machine cannot run the feed: not root, BPF unavailable (exit status 1).
class FeedError : public std::runtime_error {
public:
	FeedError(const std::string &what, bool usage) : std::runtime_error(what), usage_(usage) {}
	bool usage() const { return usage_; }

private:
	bool usage_;
};

class Feed {
public:
	// Checks privileges, mounts tracefs and bpffs when missing, loads and attaches. Throws FeedError.
	explicit Feed(const FeedOptions &o);
	~Feed();
	Feed(const Feed &) = delete;
	Feed &operator=(const Feed &) = delete;

	// Follow one more process, the children it has (from /proc) and those it starts.
	void follow(uint32_t tgid);
	// Deliver what is waiting, after waiting up to timeout_ms for the ring to fill. A file is named
	// (on_name) before its first access. Returns the records delivered; throws std::runtime_error.
	int poll(int timeout_ms);
	// Wait up to timeout_ms for records, delivering none: a caller that must lock its state around
	// the callbacks waits here unlocked, then polls with a timeout of 0.
	void wait(int timeout_ms);
	// Stop recording: detach the hooks, send the reads threads have joined and not sent yet, and deliver
	// everything left. The feed delivers nothing after this.
	void finish();
	std::function<void(const llmcache_access &)> on_access;
	std::function<void(uint32_t dev, uint64_t inode, const std::string &path)> on_name;

	uint64_t lost() const;   // records the ring had no room for: always report them
	uint64_t merged() const; // filemap_get_pages batches folded into their read
	uint64_t joined() const; // reads joined to the read before them (FeedOptions::join_blocks)
	// Pages of the files delivered so far (named, not ignored) that entered the page cache (read from
	// storage) and that left it.
	uint64_t inserted() const;
	uint64_t evicted() const;
	bool filemap() const { return filemap_; } // filemap tracepoints, else syscall tracepoints
	bool faults() const { return faults_; }   // mmap faults are seen
	bool writes() const { return writes_; }   // writes are recorded
	// How mmap accesses are seen: "filemap" (tracepoints), "kprobe" (on filemap_map_pages and
	// filemap_fault: fault-around too), "fault" (exceptions:page_fault_user: the faulting pages only) or "".
	const std::string &mmap_hooks() const { return mmap_hooks_; }

private:
	struct Impl;
	std::unique_ptr<Impl> impl_;
	bool filemap_ = false, faults_ = false, writes_ = false;
	std::string mmap_hooks_;
};

} // namespace llmtrace
