// SPDX-License-Identifier: MIT
#include "pagecache/engine_code.hpp"

#include "../../include/uapi/llmcache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace llmcache::pagecache {

namespace {
constexpr uint64_t BS = LLMCACHE_BLOCK_SIZE;
constexpr uint64_t PRESENT = 1ull << 63; // a pagemap entry's bit: the page is in the page tables
} // namespace

int present_blocks(int pagemap_fd, const FileMapping &m, std::vector<Range> &out)
{
	constexpr uint64_t CHUNK = 4096; // entries per read
	uint64_t entries[CHUNK];
	const uint64_t pages = (m.end - m.start) / BS;
	for (uint64_t at = 0; at < pages;) {
		const uint64_t n = std::min(CHUNK, pages - at);
		const ssize_t got = pread(pagemap_fd, entries, n * 8, off_t((m.start / BS + at) * 8));
		if (got < 0)
			return -errno;
		if (got < ssize_t(n * 8))
			return -EIO;
		for (uint64_t i = 0; i < n; i++) {
			if (!(entries[i] & PRESENT))
				continue;
			const uint64_t b = m.offset / BS + at + i;
			if (!out.empty() && out.back().first + out.back().count == b)
				out.back().count++;
			else
				out.push_back({b, 1});
		}
		at += n;
	}
	return 0;
}

uint64_t mapped_file_bytes(pid_t pid, const std::vector<FileMapping> &maps, const FileIds &exclude)
{
	const int pagemap = open(("/proc/" + std::to_string(pid) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
	if (pagemap < 0)
		return 0;
	uint64_t blocks = 0;
	for (const FileMapping &m : maps) {
		if (std::any_of(exclude.begin(), exclude.end(), [&](const auto &x) { return x.first == m.dev && x.second == m.inode; }))
			continue;
		std::vector<Range> present;
		if (present_blocks(pagemap, m, present) == 0)
			for (const Range &r : present)
				blocks += r.count;
	}
	close(pagemap);
	return blocks * BS;
}

} // namespace llmcache::pagecache
