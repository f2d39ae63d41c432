// SPDX-License-Identifier: MIT
#include "pagecache/prefetcher.hpp"
#include "pagecache/pinned_file.hpp"

#include "../../include/uapi/llmcache.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace llmcache::pagecache {

namespace {

struct Request {
	uint32_t slot;
	uint64_t offset, bytes;
};

// The child, after fork() from a multithreaded daemon: system calls only, no allocation. procs is the
// cgroup's cgroup.procs path; the first byte sent back is 0 once the child is in the cgroup, else errno.
[[noreturn]] void child_main(int sock, const char *procs, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	if (dup2(sock, 3) < 0)
		_exit(1);
	close_range(4, ~0u, 0); // no copies of the daemon's sockets, maps and ring buffers
	sock = 3;
	char pid[24];
	int len = 0;
	for (pid_t p = getpid(); p; p /= 10)
		pid[len++] = char('0' + p % 10);
	for (int i = 0; i < len / 2; i++) {
		const char c = pid[i];
		pid[i] = pid[len - 1 - i];
		pid[len - 1 - i] = c;
	}
	unsigned char status = 0;
	const int cg = open(procs, O_WRONLY | O_CLOEXEC);
	if (cg < 0 || write(cg, pid, size_t(len)) != len)
		status = (unsigned char)errno;
	if (cg >= 0)
		close(cg);
	if (write(sock, &status, 1) != 1 || status)
		_exit(1);
	struct File {
		char *map;
		size_t size;
	} files[Prefetcher::MAX_FILES] = {};
	for (;;) {
		Request r;
		alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
		iovec iov{&r, sizeof(r)};
		msghdr m{};
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		const ssize_t n = recvmsg(sock, &m, 0);
		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0);
		if (n != ssize_t(sizeof(r)) || r.slot >= Prefetcher::MAX_FILES)
			continue;
		File &f = files[r.slot];
		if (cmsghdr *c = CMSG_FIRSTHDR(&m); c && c->cmsg_type == SCM_RIGHTS) {
			int fd;
			std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
			if (f.map)
				munmap(f.map, f.size);
			struct stat st;
			void *p = fstat(fd, &st) || !st.st_size ? MAP_FAILED : map_pmd_aligned(fd, size_t(st.st_size));
			close(fd);
			f = p == MAP_FAILED ? File{} : File{static_cast<char *>(p), size_t(st.st_size)};
			if (f.map)
				madvise(f.map, f.size, MADV_HUGEPAGE); // read in PMD-size folios where the file system can
		}
		if (!f.map || r.offset >= f.size)
			continue;
		const size_t len = size_t(std::min<uint64_t>(r.bytes, f.size - r.offset));
		madvise(f.map + r.offset, len, MADV_POPULATE_READ);
		madvise(f.map + r.offset, len, MADV_DONTNEED); // the pages stay cached, mapped by nobody here
	}
}

} // namespace

int Prefetcher::start(const std::string &cgroup_dir, std::unique_ptr<Prefetcher> &out, std::string &err)
{
	std::unique_ptr<Prefetcher> p(new Prefetcher());
	p->cgroup_ = cgroup_dir;
	p->sent_.assign(MAX_FILES, -1);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return err = std::string("cannot create the prefetcher's socket: ") + std::strerror(errno), -errno;
	const std::string procs = cgroup_dir + "/cgroup.procs";
	const pid_t parent = getpid();
	const pid_t child = fork();
	if (child < 0) {
		const int e = errno;
		close(sv[0]);
		close(sv[1]);
		return err = std::string("cannot start the prefetcher: ") + std::strerror(e), -e;
	}
	if (child == 0) {
		close(sv[0]);
		child_main(sv[1], procs.c_str(), parent);
	}
	close(sv[1]);
	p->sock_ = sv[0];
	p->child_ = child;
	pollfd pfd{p->sock_, POLLIN, 0};
	unsigned char status = ETIMEDOUT;
	if (poll(&pfd, 1, 5000) != 1 || read(p->sock_, &status, 1) != 1 || status)
		return err = "the prefetcher could not join the memory cgroup " + cgroup_dir + ": " + std::strerror(status),
		       -int(status);
	fcntl(p->sock_, F_SETFL, O_NONBLOCK);
	out = std::move(p);
	return 0;
}

Prefetcher::~Prefetcher()
{
	if (sock_ >= 0)
		close(sock_); // the child reads end-of-file and exits
	if (child_ > 0) {
		kill(child_, SIGKILL); // or is stuck in a read: it holds nothing worth waiting for
		waitpid(child_, nullptr, 0);
	}
}

bool Prefetcher::read_ahead(uint32_t slot, int fd, uint64_t first, uint64_t count)
{
	if (slot >= MAX_FILES || !count)
		return false;
	Request r{slot, first * LLMCACHE_BLOCK_SIZE, count * LLMCACHE_BLOCK_SIZE};
	iovec iov{&r, sizeof(r)};
	msghdr m{};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
	if (sent_[slot] != fd) {
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(sock_, &m, MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(sizeof(r))) {
		skipped_ += count;
		return false;
	}
	sent_[slot] = fd;
	asked_ += count;
	return true;
}

} // namespace llmcache::pagecache
