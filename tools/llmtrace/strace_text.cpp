// SPDX-License-Identifier: MIT
// strace-like text output for `llmtrace record --format strace` and `llmtrace convert --to strace`: one
// line per record in the shape of `strace -f -ttt -yy`, so people can read it and the project's strace
// reader reads it back (same blocks, inode = path_inode(path), dev 0):
//   4242 1234.567890123 pread64(3</models/w.bin>, "", 131072, 262144) = 131072
// mmap faults have no system call; they are written as `mmap_fault(</path>, LENGTH, OFFSET)`, which strace
// readers skip. Files never named are written as </dev:DEV/inode:INODE>.
#include "strace_text.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <system_error>

namespace llmtrace {

namespace {

class StraceWriter : public llmcache::trace::Writer {
public:
	StraceWriter(const std::string &path, std::string_view producer) : path_(path)
	{
		f_ = path == "-" ? stdout : std::fopen(path.c_str(), "w");
		if (!f_)
			throw std::system_error(errno, std::generic_category(), "failed to open " + path);
		std::fprintf(f_, "# %.*s, strace -f -ttt -yy style: pid seconds call\n", int(producer.size()),
			     producer.data());
	}
	~StraceWriter() override
	{
		try {
			close();
		} catch (...) {
		}
	}

	void write(const llmcache_access &a) override
	{
		auto it = names_.find({a.dev, a.inode});
		std::string unnamed;
		if (it == names_.end())
			unnamed = "/dev:" + std::to_string(a.dev) + "/inode:" + std::to_string(a.inode);
		const std::string &path = it != names_.end() ? it->second : unnamed;
		uint64_t off = a.first_block << LLMCACHE_BLOCK_SHIFT, len = uint64_t(a.nr_blocks) << LLMCACHE_BLOCK_SHIFT;
		std::fprintf(f_, "%u %" PRIu64 ".%09" PRIu64 " ", a.pid, uint64_t(a.time_ns / 1000000000), uint64_t(a.time_ns % 1000000000));
		if (a.op == LLMCACHE_OP_MMAP_FAULT)
			std::fprintf(f_, "mmap_fault(<%s>, %" PRIu64 ", %" PRIu64 ")\n", path.c_str(), len, off);
		else
			std::fprintf(f_, "%s(3<%s>, \"\", %" PRIu64 ", %" PRIu64 ") = %" PRIu64 "\n",
				     a.op == LLMCACHE_OP_WRITE ? "pwrite64" : "pread64", path.c_str(), len, off, len);
	}

	void name(uint32_t dev, uint64_t inode, std::string_view path) override { names_[{dev, inode}] = path; }

	void close() override
	{
		if (!f_)
			return;
		bool bad = std::ferror(f_) | (f_ == stdout ? std::fflush(f_) : std::fclose(f_));
		f_ = nullptr;
		if (bad)
			throw std::system_error(errno, std::generic_category(), "failed to write " + path_);
	}

private:
	std::string path_;
	FILE *f_ = nullptr;
	std::map<llmcache::trace::FileKey, std::string> names_;
};

} // namespace

std::unique_ptr<llmcache::trace::Writer> open_writer(const std::string &path, llmcache::trace::Format f,
						     std::string_view producer)
{
	if (f == llmcache::trace::Format::strace)
		return std::make_unique<StraceWriter>(path, producer);
	return llmcache::trace::open_writer(path, f, producer);
}

} // namespace llmtrace
