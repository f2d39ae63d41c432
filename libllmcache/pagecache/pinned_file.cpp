// SPDX-License-Identifier: MIT
#include "pagecache/pinned_file.hpp"

#include "../../include/uapi/llmcache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace llmcache::pagecache {

constexpr uint64_t BS = LLMCACHE_BLOCK_SIZE;

std::vector<Range> union_of(const std::vector<Range> &a, const std::vector<Range> &b)
{
	std::vector<Range> all(a);
	all.insert(all.end(), b.begin(), b.end());
	std::sort(all.begin(), all.end(), [](const Range &x, const Range &y) { return x.first < y.first; });
	std::vector<Range> out;
	for (const Range &r : all) {
		if (!out.empty() && r.first <= out.back().first + out.back().count)
			out.back().count = std::max(out.back().first + out.back().count, r.first + r.count) - out.back().first;
		else
			out.push_back(r);
	}
	return out;
}

int PinnedFile::open(const std::string &path, std::unique_ptr<PinnedFile> &out, std::string &err)
{
	std::unique_ptr<PinnedFile> f(new PinnedFile());
	f->path_ = path;
	f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (f->fd_ < 0 || fstat(f->fd_, &st) < 0)
		return err = "cannot open " + path + ": " + std::strerror(errno), -errno;
	if (!S_ISREG(st.st_mode))
		return err = path + " is not a regular file", -EINVAL;
	f->dev_ = st.st_dev;
	f->inode_ = st.st_ino;
	f->blocks_ = (uint64_t(st.st_size) + BS - 1) / BS;
	if (f->blocks_) {
		void *m = map_pmd_aligned(f->fd_, f->blocks_ * BS);
		if (m == MAP_FAILED)
			return err = "cannot map " + path + ": " + std::strerror(errno), -errno;
		f->map_ = static_cast<uint8_t *>(m);
		// No readahead through this mapping: a fault of mlock() on a page the engine's readahead marked
		// would start the next readahead window here, read by the daemon and charged to its cgroup.
		madvise(m, f->blocks_ * BS, MADV_RANDOM);
	}
	f->is_locked_.assign(f->blocks_, 0);
	out = std::move(f);
	return 0;
}

void *map_pmd_aligned(int fd, size_t size)
{
	constexpr size_t PMD = 2ul << 20;
	void *area = mmap(nullptr, size + PMD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		return area;
	const uintptr_t start = uintptr_t(area), at = (start + PMD - 1) & ~(PMD - 1);
	const uintptr_t end = at + ((size + BS - 1) & ~(BS - 1));
	void *p = mmap(reinterpret_cast<void *>(at), size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		const int e = errno;
		munmap(area, size + PMD);
		errno = e;
		return p;
	}
	if (at > start)
		munmap(area, at - start);
	if (start + size + PMD > end)
		munmap(reinterpret_cast<void *>(end), start + size + PMD - end);
	return p;
}

PinnedFile::~PinnedFile()
{
	if (map_)
		munmap(map_, blocks_ * BS); // unlocks too
	if (fd_ >= 0)
		close(fd_);
}

void PinnedFile::set(uint64_t first, uint64_t count, bool lock)
{
	std::fill_n(is_locked_.begin() + long(first), count, uint8_t(lock));
	locked_ = lock ? locked_ + count : locked_ - count;
	constexpr uint64_t FOLIO = 512; // blocks of a PMD-size folio
	const uint64_t a = first / FOLIO * FOLIO, b = (first + count + FOLIO - 1) / FOLIO * FOLIO;
	if (Range *r = changed_.empty() ? nullptr : &changed_.back(); r && a <= r->first + r->count && b >= r->first) {
		const uint64_t end = std::max(r->first + r->count, b);
		r->first = std::min(r->first, a);
		r->count = end - r->first;
	} else {
		changed_.push_back({a, b - a});
	}
}

void PinnedFile::release()
{
	if (locked_ && map_)
		munlock(map_, blocks_ * BS);
	std::fill(is_locked_.begin(), is_locked_.end(), 0);
	locked_ = 0;
	if (map_)
		madvise(map_, blocks_ * BS, MADV_DONTNEED);
}

uint64_t PinnedFile::resident(uint64_t first, uint64_t count) const
{
	count = first < blocks_ ? std::min(count, blocks_ - first) : 0;
	std::vector<unsigned char> vec(count);
	if (!count || mincore(map_ + first * BS, count * BS, vec.data()))
		return 0;
	return uint64_t(std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; }));
}

uint64_t PinnedFile::locked_in(uint64_t first, uint64_t count) const
{
	if (first >= blocks_)
		return 0;
	const auto b = is_locked_.begin() + long(first);
	return uint64_t(std::count(b, b + long(std::min(count, blocks_ - first)), 1));
}

// mlock() faults pages in, and a fault maps its neighbours too (fault-around, whole large folios, at
// most a PMD-size folio). A page mapped here would be skipped by everyone's posix_fadvise(DONTNEED):
// unmap what is not locked around what changed.
void PinnedFile::unmap_unlocked(uint64_t first, uint64_t end)
{
	for (uint64_t b = first; b < end;) {
		uint64_t e = b;
		while (e < end && !is_locked_[e])
			e++;
		if (e > b)
			madvise(map_ + b * BS, (e - b) * BS, MADV_DONTNEED);
		b = e + 1;
	}
}

// The runs of locked blocks in [first, end), by memchr-speed searches for the edges of each run: ticks
// run every 5 ms on files of hundreds of thousands of blocks.
template <typename Fn> void PinnedFile::for_locked_runs(uint64_t first, uint64_t end, Fn fn) const
{
	const auto lo = is_locked_.begin() + long(first), hi = is_locked_.begin() + long(end);
	for (auto b = std::find(lo, hi, uint8_t(1)); b != hi;) {
		const auto e = std::find(b, hi, uint8_t(0));
		fn(uint64_t(b - is_locked_.begin()), uint64_t(e - b));
		b = std::find(e, hi, uint8_t(1));
	}
}

std::vector<Range> PinnedFile::locked_runs() const
{
	std::vector<Range> out;
	for_locked_runs(0, blocks_, [&](uint64_t first, uint64_t count) { out.push_back({first, count}); });
	return out;
}

int PinnedFile::apply(const std::vector<Range> &want, uint64_t allow, std::string &err, const std::vector<Range> &keep)
{
	struct Unmap {
		PinnedFile *f;
		~Unmap()
		{
			for (const Range &r : f->changed_)
				f->unmap_unlocked(r.first, std::min(r.first + r.count, f->blocks_));
			f->changed_.clear();
		}
	} unmap{this};
	// Unlock runs of locked blocks that left the plan: the locked runs in the gaps between its ranges.
	uint64_t gap = 0;
	auto unlock_gap = [&](uint64_t end) {
		for_locked_runs(std::min(gap, blocks_), std::min(end, blocks_), [&](uint64_t first, uint64_t count) {
			munlock(map_ + first * BS, count * BS);
			set(first, count, false);
		});
	};
	for (const Range &r : union_of(want, keep)) {
		unlock_gap(r.first);
		gap = std::max(gap, r.first + r.count);
	}
	unlock_gap(blocks_);
	// Lock runs of resident, planned, unlocked blocks. A page evicted between mincore() and mlock() would
	// be read back by mlock() and charged to the daemon's memory cgroup: ask mincore() just before, a
	// window of WINDOW blocks at a time.
	constexpr uint64_t WINDOW = 128;
	unsigned char vec[WINDOW];
	for (const Range &r : want)
		for (uint64_t w = std::min(r.first, blocks_), end = std::min(r.first + r.count, blocks_); w < end && allow;
		     w += WINDOW) {
			const uint64_t first = w, wend = std::min(end, w + WINDOW);
			if (std::find(is_locked_.begin() + long(first), is_locked_.begin() + long(wend), 0) ==
			    is_locked_.begin() + long(wend))
				continue; // all locked already
			if (mincore(map_ + first * BS, (wend - first) * BS, vec))
				return err = "mincore on " + path_ + " failed: " + std::strerror(errno), -errno;
			if (int e = lock_window(first, wend, vec, allow, err); e < 0)
				return e;
		}
	return 0;
}

int PinnedFile::lock_window(uint64_t first, uint64_t end, const unsigned char *vec, uint64_t &allow, std::string &err)
{
	for (uint64_t b = first; b < end && allow;) {
		if (is_locked_[b] || !(vec[b - first] & 1)) {
			b++;
			continue;
		}
		uint64_t e = b;
		while (e < end && e - b < allow && !is_locked_[e] && (vec[e - first] & 1))
			e++;
		if (mlock(map_ + b * BS, (e - b) * BS)) {
			const int x = errno;
			munlock(map_ + b * BS, (e - b) * BS); // a failed mlock may have locked part of the run
			err = "mlock of " + std::to_string((e - b) * BS) + " bytes of " + path_ + " failed: " + std::strerror(x) +
			      (x == ENOMEM || x == EAGAIN ? " (RLIMIT_MEMLOCK reached? grant CAP_IPC_LOCK or lower --pin-budget)"
							  : "");
			return -x;
		}
		set(b, e - b, true);
		allow -= e - b;
		b = e;
	}
	return 0;
}

} // namespace llmcache::pagecache
