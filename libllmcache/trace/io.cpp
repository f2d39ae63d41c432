// SPDX-License-Identifier: MIT
// Buffered streaming input and output for the trace formats: read(2)/write(2) on 1 MiB buffers.
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

#include "io_internal.hpp"

namespace llmcache::trace::detail {

void throw_errno(const std::string &what, const std::string &name)
{
	throw std::system_error(errno, std::generic_category(), "failed to " + what + " " + name);
}

Input::Input(const std::string &path) : buf_(io_buffer_size)
{
	if (path == "-") {
		fd_ = STDIN_FILENO;
		name_ = "<stdin>";
	} else {
		fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd_ < 0)
			throw_errno("open", path);
		owned_ = true;
		name_ = path;
	}
	struct stat st;
	if (fstat(fd_, &st) == 0 && S_ISREG(st.st_mode))
		regular_size_ = st.st_size;
	if (regular_size_ > 0)
		posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

Input::~Input()
{
	if (owned_)
		::close(fd_);
}

size_t Input::refill(size_t n)
{
	if (pos_ > 0) {
		std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
		base_ += pos_;
		end_ -= pos_;
		pos_ = 0;
	}
	if (n > buf_.size())
		buf_.resize(std::max(n, buf_.size() * 2));
	while (end_ < n && !eof_) {
		ssize_t r = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			throw_errno("read", name_);
		}
		if (r == 0)
			eof_ = true;
		end_ += size_t(r);
	}
	return end_;
}

bool Input::next_line(std::string_view &line, bool &terminated)
{
	size_t scanned = 0;
	for (;;) {
		const char *p = data();
		const char *nl = static_cast<const char *>(std::memchr(p + scanned, '\n', avail() - scanned));
		if (nl) {
			line = std::string_view(p, size_t(nl - p));
			terminated = true;
			consume(line.size() + 1);
			return true;
		}
		scanned = avail();
		if (eof_) {
			if (scanned == 0)
				return false;
			line = std::string_view(p, scanned);
			terminated = false;
			consume(scanned);
			return true;
		}
		fill(scanned + 1); // compacts, reads a buffer's worth, grows only for a line longer than it
	}
}

Output::Output(const std::string &path)
{
	if (path == "-") {
		fd_ = STDOUT_FILENO;
		name_ = "<stdout>";
		return;
	}
	fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd_ < 0)
		throw_errno("create", path);
	owned_ = true;
	name_ = path;
}

Output::Output(int fd, std::string name, bool owned) : name_(std::move(name)), fd_(fd), owned_(owned) {}

Output::~Output()
{
	if (owned_ && fd_ >= 0)
		::close(fd_);
}

void Output::write_all(const void *p, size_t n)
{
	const char *c = static_cast<const char *>(p);
	while (n > 0) {
		ssize_t r = ::write(fd_, c, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			throw_errno("write", name_);
		}
		c += r;
		n -= size_t(r);
	}
}

void Output::flush()
{
	if (used_ > 0)
		write_all(buf_.data(), used_);
	used_ = 0;
}

void Output::pwrite_at(uint64_t off, const void *p, size_t n)
{
	const char *c = static_cast<const char *>(p);
	while (n > 0) {
		ssize_t r = ::pwrite(fd_, c, n, off_t(off));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			throw_errno("write", name_);
		}
		c += r;
		off += uint64_t(r);
		n -= size_t(r);
	}
}

bool Output::seekable() const
{
	struct stat st;
	return fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
}

void Output::close()
{
	if (fd_ < 0)
		return;
	flush();
	if (owned_ && ::close(fd_) < 0) {
		fd_ = -1;
		throw_errno("close", name_);
	}
	fd_ = -1;
}

} // namespace llmcache::trace::detail
