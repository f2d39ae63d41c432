// SPDX-License-Identifier: MIT
// Real I/O for workload generators: file preparation, the access loop, and its exact trace.
#include "run.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

namespace llmcache::workload {
namespace {

constexpr size_t prepare_chunk = 1 << 20;

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

[[noreturn]] void fail(const std::string &what, int err = errno)
{
	throw std::system_error(err, std::generic_category(), "failed to " + what);
}

uint32_t blocks_of(uint64_t off, uint64_t len)
{
	return uint32_t((off + len + LLMCACHE_BLOCK_SIZE - 1) / LLMCACHE_BLOCK_SIZE - off / LLMCACHE_BLOCK_SIZE);
}

// One open workload file.
struct Open {
	std::string path;
	int fd = -1;
	uint32_t dev = 0;
	uint64_t ino = 0;
	uint64_t seed = 0;
	const char *map = nullptr;
	uint64_t size = 0;
};

class Runner {
public:
	Runner(Generator &g, const RunOptions &o) : g_(g), o_(o), pid_(uint32_t(getpid()))
	{
		if (!o.trace.empty())
			writer_ = trace::open_writer(o.trace, o.format, o.producer);
	}

	~Runner()
	{
		for (auto &f : files_) {
			if (f.map)
				munmap(const_cast<char *>(f.map), f.size);
			if (f.fd >= 0)
				close(f.fd);
		}
	}

	RunStats run()
	{
		namespace fs = std::filesystem;
		std::error_code ec;
		fs::create_directories(o_.dir, ec);
		fs::path root = fs::absolute(o_.dir, ec);
		if (ec)
			fail("use directory " + o_.dir, ec.value());
		root = root.lexically_normal();
		uint64_t t0 = now_ns();
		for (const auto &f : g_.files()) {
			fs::path p = root / f.name;
			fs::create_directories(p.parent_path(), ec);
			if (ec)
				fail("create directory " + p.parent_path().string(), ec.value());
			Open o{p.string()};
			o.seed = content_seed(f.name);
			o.size = f.size;
			prepare(o);
			int flags = f.role == Role::scratch ? O_RDWR : O_RDONLY;
			if ((o.fd = open(o.path.c_str(), flags | O_CLOEXEC)) < 0)
				fail("open " + o.path);
			identify(o);
			files_.push_back(std::move(o));
		}
		if (o_.drop_cache)
			for (const auto &f : files_)
				if (fdatasync(f.fd) || posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED))
					fail("drop the cached pages of " + f.path);
		st_.prepare_s = (now_ns() - t0) / 1e9;

		std::vector<llmcache_access> phase;
		while (true) {
			uint64_t start = now_ns();
			if (!g_.step(phase))
				break;
			for (const auto &a : phase)
				perform(a);
			(g_.phases_done() == 1 ? st_.startup_s : st_.run_s) += (now_ns() - start) / 1e9;
		}
		st_.iterations = g_.iterations();
		if (writer_)
			writer_->close();
		return st_;
	}

private:
	// Make the file exist with its size and content; its creation writes are accesses like any other.
	void prepare(Open &o)
	{
		struct stat st;
		if (stat(o.path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_size) == o.size)
			return;
		if ((o.fd = open(o.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
			fail("create " + o.path);
		identify(o);
		reserve(prepare_chunk);
		for (uint64_t off = 0; off < o.size; off += prepare_chunk) {
			size_t len = size_t(std::min<uint64_t>(prepare_chunk, o.size - off));
			fill_content(o.seed, off, {buf_.data(), len});
			uint64_t t = now_ns();
			if (pwrite64(o.fd, buf_.data(), len, off64_t(off)) != ssize_t(len))
				fail("write " + o.path);
			record(o, t, off, len, LLMCACHE_OP_WRITE);
			st_.bytes_prepared += len;
		}
		if (close(o.fd))
			fail("close " + o.path);
		o.fd = -1;
		st_.files_created++;
	}

	void identify(Open &o)
	{
		struct stat st;
		if (fstat(o.fd, &st))
			fail("stat " + o.path);
		uint32_t dev = encode_dev(st.st_dev);
		if (writer_ && (dev != o.dev || st.st_ino != o.ino))
			writer_->name(dev, st.st_ino, o.path);
		o.dev = dev;
		o.ino = st.st_ino;
	}

	void perform(const llmcache_access &a)
	{
		Open &f = files_[a.inode];
		uint64_t off = a.first_block * LLMCACHE_BLOCK_SIZE;
		uint64_t len = std::min<uint64_t>(f.size, (a.first_block + a.nr_blocks) * LLMCACHE_BLOCK_SIZE) - off;
		uint64_t t;
		switch (a.op) {
		case LLMCACHE_OP_READ:
			reserve(len);
			t = now_ns();
			if (pread64(f.fd, buf_.data(), len, off64_t(off)) != ssize_t(len))
				fail("read " + std::to_string(len) + " bytes at offset " + std::to_string(off) + " of " + f.path +
				     " (did the file change size?)");
			st_.bytes_read += len;
			break;
		case LLMCACHE_OP_WRITE:
			reserve(len);
			fill_content(f.seed, off, {buf_.data(), size_t(len)});
			t = now_ns();
			if (pwrite64(f.fd, buf_.data(), len, off64_t(off)) != ssize_t(len))
				fail("write " + std::to_string(len) + " bytes at offset " + std::to_string(off) + " of " + f.path);
			st_.bytes_written += len;
			break;
		case LLMCACHE_OP_MMAP_FAULT: {
			if (!f.map) {
				void *m = mmap(nullptr, f.size, PROT_READ, MAP_SHARED, f.fd, 0);
				if (m == MAP_FAILED)
					fail("mmap " + f.path);
				f.map = static_cast<const char *>(m);
			}
			t = now_ns();
			uint64_t sum = 0;
			for (uint64_t p = off; p < off + len; p += LLMCACHE_BLOCK_SIZE)
				sum += static_cast<unsigned char>(f.map[p]);
			sink_ = sink_ + sum;
			st_.bytes_read += uint64_t(blocks_of(off, len)) * LLMCACHE_BLOCK_SIZE;
			break;
		}
		default:
			throw std::logic_error("workload generator produced op " + std::to_string(a.op));
		}
		record(f, t, off, len, llmcache_op(a.op));
	}

	void record(const Open &f, uint64_t t, uint64_t off, uint64_t len, llmcache_op op)
	{
		llmcache_access r{};
		r.time_ns = t;
		r.inode = f.ino;
		r.first_block = off / LLMCACHE_BLOCK_SIZE;
		r.pid = pid_;
		r.dev = f.dev;
		r.nr_blocks = blocks_of(off, len);
		r.op = uint8_t(op);
		st_.records++;
		st_.blocks += r.nr_blocks;
		if (writer_)
			writer_->write(r);
	}

	void reserve(uint64_t n)
	{
		if (buf_.size() < n)
			buf_.resize(n);
	}

	Generator &g_;
	const RunOptions &o_;
	uint32_t pid_;
	std::unique_ptr<trace::Writer> writer_;
	std::vector<Open> files_;
	std::vector<char> buf_;
	RunStats st_;
	volatile uint64_t sink_ = 0; // keeps the page touches from being optimised away
};

} // namespace

uint32_t encode_dev(dev_t dev)
{
	return llmcache_encode_dev(major(dev), minor(dev));
}

RunStats write_trace(Generator &g, const RunOptions &o)
{
	auto w = trace::open_writer(o.trace, o.format, o.producer);
	std::vector<uint64_t> inodes;
	for (const auto &f : g.files()) {
		inodes.push_back(trace::path_inode(f.name));
		w->name(0, inodes.back(), f.name);
	}
	RunStats st;
	std::vector<llmcache_access> phase;
	while (g.step(phase))
		for (auto a : phase) {
			a.inode = inodes[a.inode];
			a.pid = o.pid;
			w->write(a);
			st.records++;
			st.blocks += a.nr_blocks;
		}
	w->close();
	st.iterations = g.iterations();
	return st;
}

RunStats run_real(Generator &g, const RunOptions &o)
{
	return Runner(g, o).run();
}

} // namespace llmcache::workload
