// SPDX-License-Identifier: MIT
// Buffered streaming input and output for the trace formats: read(2)/write(2) on 1 MiB buffers; output
// to a regular file goes to a temporary file beside it that close() renames into place.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
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

// The process's umask without changing it (umask(2) can only set it, which races with other threads):
// the Umask line of /proc/self/status (Linux 4.7), else the usual 022.
static mode_t current_umask()
{
	FILE *f = std::fopen("/proc/self/status", "re");
	unsigned mask = 022;
	if (f) {
		char line[256];
		while (std::fgets(line, sizeof line, f))
			if (std::sscanf(line, "Umask: %o", &mask) == 1)
				break;
		std::fclose(f);
	}
	return mode_t(mask);
}

Input::Input(const std::string &path)
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
	// A small file gets a buffer its size (the buffer still grows if the file does): opening many
	// small traces, as tests and fuzzers do, need not allocate and clear a megabyte each.
	buf_.resize(regular_size_ >= 0 ? std::clamp<size_t>(size_t(regular_size_) + 1, 4096, io_buffer_size) : io_buffer_size);
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
		if (nl && size_t(nl - p) > max_line)
			throw LineTooLong{offset()};
		if (nl) {
			line = std::string_view(p, size_t(nl - p));
			terminated = true;
			consume(line.size() + 1);
			return true;
		}
		scanned = avail();
		if (scanned > max_line)
			throw LineTooLong{offset()};
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
	name_ = path;
	struct stat st;
	bool exists = ::stat(path.c_str(), &st) == 0;
	if (exists && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		throw_errno("write", path);
	}
	if (exists && !S_ISREG(st.st_mode)) {
		fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
		if (fd_ < 0)
			throw_errno("open", path);
		owned_ = true;
		return;
	}
	// Rename over what a symbolic link points to, not over the link.
	final_path_ = path;
	if (exists) {
		if (char *real = realpath(path.c_str(), nullptr)) {
			final_path_ = real;
			std::free(real);
		}
	}
	std::string tmpl = final_path_ + ".tmp-XXXXXX";
	fd_ = mkostemp(tmpl.data(), O_CLOEXEC);
	if (fd_ < 0)
		throw_errno("create a temporary file beside", path);
	owned_ = true;
	tmp_path_ = tmpl;
	// mkostemp makes 0600; a replaced file keeps its mode, a new one gets 0666 less the umask.
	fchmod(fd_, exists ? st.st_mode & 07777 : 0666 & ~current_umask());
}

Output::Output(int fd, std::string name, bool owned) : name_(std::move(name)), fd_(fd), owned_(owned) {}

Output::~Output() { discard(); }

void Output::discard()
{
	if (owned_ && fd_ >= 0)
		::close(fd_);
	fd_ = -1;
	if (!tmp_path_.empty())
		::unlink(tmp_path_.c_str());
	tmp_path_.clear();
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
	try {
		flush();
	} catch (...) {
		discard();
		throw;
	}
	int fd = fd_;
	fd_ = -1;
	if (owned_ && ::close(fd) < 0) {
		int e = errno;
		discard();
		errno = e;
		throw_errno("write", name_);
	}
	if (tmp_path_.empty())
		return;
	if (::rename(tmp_path_.c_str(), final_path_.c_str()) < 0) {
		int e = errno;
		discard();
		errno = e;
		throw_errno("rename a temporary file to", name_);
	}
	tmp_path_.clear();
}

} // namespace llmcache::trace::detail
