// SPDX-License-Identifier: MIT
#include "pagecache/scan_drop.hpp"

#include "pagecache/memcg.hpp"

#include "../../include/uapi/llmcache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstdio>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

namespace llmcache::pagecache {

constexpr uint64_t BS = LLMCACHE_BLOCK_SIZE;

int drop_blocks(int fd, uint64_t first, uint64_t count)
{
	const int e = posix_fadvise(fd, off_t(first * BS), off_t(count * BS), POSIX_FADV_DONTNEED);
	return -e;
}

namespace {

// process_madvise(MADV_PAGEOUT) of pid's address ranges iov: the bytes advised, or -errno.
long pageout(pid_t pid, const std::vector<iovec> &iov)
{
	if (iov.empty())
		return 0;
	const int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
	if (pidfd < 0)
		return -errno;
	long done = 0;
	for (size_t i = 0; i < iov.size(); i += IOV_MAX) {
		const long n = syscall(SYS_process_madvise, pidfd, &iov[i], std::min<size_t>(IOV_MAX, iov.size() - i),
				       MADV_PAGEOUT, 0u);
		if (n < 0) {
			done = -errno; // ENOMEM: a range is no longer mapped
			break;
		}
		done += n;
	}
	close(pidfd);
	return done;
}

} // namespace

bool maps_file(const std::vector<FileMapping> &maps, dev_t dev, uint64_t inode)
{
	return std::any_of(maps.begin(), maps.end(), [&](const FileMapping &m) { return m.dev == dev && m.inode == inode; });
}

long cold_blocks(pid_t pid, const std::vector<FileMapping> &maps, dev_t dev, uint64_t inode,
		 const std::vector<Range> &ranges)
{
	std::vector<iovec> iov;
	for (const Range &r : ranges)
		for (const FileMapping &m : maps) {
			if (m.dev != dev || m.inode != inode)
				continue;
			const uint64_t a = std::max(r.first * BS, m.offset);
			const uint64_t b = std::min((r.first + r.count) * BS, m.offset + (m.end - m.start));
			if (a < b)
				iov.push_back({reinterpret_cast<void *>(m.start + (a - m.offset)), size_t(b - a)});
		}
	return pageout(pid, iov);
}

long cold_mappings(pid_t pid, const std::vector<FileMapping> &maps)
{
	std::vector<iovec> iov;
	for (const FileMapping &m : maps)
		iov.push_back({reinterpret_cast<void *>(m.start), size_t(m.end - m.start)});
	return pageout(pid, iov);
}

} // namespace llmcache::pagecache
