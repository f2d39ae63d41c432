// SPDX-License-Identifier: MIT
/*
 * One managed file and the pins on it. The daemon maps the whole file read-only and MAP_SHARED; its
 * mapping shares the page cache with every other process, so mlock() of a range of it keeps those
 * page-cache pages resident for all of them: reclaim skips mlocked pages, and posix_fadvise(DONTNEED)
 * skips mapped ones. The locks go with the process: on exit or SIGKILL the kernel unmaps and unlocks.
 *
 * apply() makes the locked blocks match a plan. It locks only blocks that are resident already (asked
 * with mincore()), like the kernel module pins only cached folios: the daemon does not read the file
 * itself, so the pages stay charged to the memory cgroup of the engine that read them, and the pins
 * grow as the engine reads the planned ranges. Called again, it locks what became resident since.
 * Blocks it does not lock are kept unmapped here, so that the mapping protects nothing but the pins.
 */
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmcache::pagecache {

struct Range {
	uint64_t first, count; // blocks
};

// The runs of a and b together, sorted and disjoint.
std::vector<Range> union_of(const std::vector<Range> &a, const std::vector<Range> &b);

// A read-only shared mapping of size bytes of fd at a PMD-aligned address, so that the page cache's
// PMD-size folios are mapped whole, one entry each, and unmapped so (4 KiB at a time, the daemon spent
// about a tenth more of its CPU time beside a streaming engine). System calls only: the prefetcher calls
// it after fork(). MAP_FAILED on failure, with errno set.
void *map_pmd_aligned(int fd, size_t size);

class PinnedFile {
public:
	// Opens and maps path (a regular file). Returns 0, or -errno with err saying why.
	static int open(const std::string &path, std::unique_ptr<PinnedFile> &out, std::string &err);
	~PinnedFile();
	PinnedFile(const PinnedFile &) = delete;
	PinnedFile &operator=(const PinnedFile &) = delete;

	// Unlock locked blocks outside want and keep; lock resident blocks inside want (sorted, disjoint), at
	// most `allow` more than before. Returns 0 or the -errno of the first failed mlock() (err says why);
	// what was locked before the failure stays locked.
	int apply(const std::vector<Range> &want, uint64_t allow, std::string &err, const std::vector<Range> &keep = {});
	void release(); // unlock everything

	uint64_t locked() const { return locked_; }
	uint64_t blocks() const { return blocks_; }
	uint64_t resident(uint64_t first, uint64_t count) const; // mincore()
	uint64_t locked_in(uint64_t first, uint64_t count) const;
	std::vector<Range> locked_runs() const;
	int fd() const { return fd_; }
	dev_t dev() const { return dev_; }
	ino_t inode() const { return inode_; }
	const std::string &path() const { return path_; }

private:
	PinnedFile() = default;
	void set(uint64_t first, uint64_t count, bool lock);
	template <typename Fn> void for_locked_runs(uint64_t first, uint64_t end, Fn fn) const; // fn(first, count)
	void unmap_unlocked(uint64_t first, uint64_t end); // blocks [first, end)
	// Lock the resident (vec, from mincore) unlocked runs of [first, end), at most allow blocks.
	int lock_window(uint64_t first, uint64_t end, const unsigned char *vec, uint64_t &allow, std::string &err);
	std::vector<Range> changed_; // runs locked or unlocked by this apply(), in whole PMD-size folios

	std::string path_;
	int fd_ = -1;
	dev_t dev_ = 0;
	ino_t inode_ = 0;
	uint8_t *map_ = nullptr;
	uint64_t blocks_ = 0, locked_ = 0;
	std::vector<uint8_t> is_locked_; // one byte per block
};

} // namespace llmcache::pagecache
