// SPDX-License-Identifier: MIT
// strace-like text output for `llmtrace record --format strace` and `llmtrace convert --to strace`: one
// line per record in the shape of `strace -f -ttt -yy`, so people can read it and the project's strace
// reader reads it back (same blocks, inode = path_inode(path), dev 0):
//   4242 1234.567890123 pread64(3</models/w.bin>, "", 131072, 262144) = 131072
// mmap faults have no system call; they are written as `mmap_fault(</path>, LENGTH, OFFSET)`, which strace
// readers skip, after an mmap() line for the file the first time, so that the reader flags the trace
// MMAP_UNSEEN and names the files whose faults it cannot see instead of losing them silently. The trace's
// flags follow the last line as "# flags: A,B". Files never named are written as </dev:DEV/inode:INODE>.
// The output goes through trace::OutputFile: a temporary file renamed into place at close().
#include "strace_text.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <set>

namespace llmtrace {

namespace {

class StraceWriter : public llmcache::trace::Writer {
public:
	StraceWriter(const std::string &path, std::string_view producer) : out_(path)
	{
		out_.write("# " + std::string(producer) + ", strace -f -ttt -yy style: pid seconds call\n");
	}
	~StraceWriter() override
	{
		if (std::uncaught_exceptions() > unwinding_)
			return; // out_ removes the temporary file
		try {
			close();
		} catch (const std::exception &e) {
			std::fprintf(stderr, "llmtrace: %s\n", e.what());
		}
	}

	void write(const llmcache_access &a) override
	{
		llmcache::trace::check_access(a);
		auto it = names_.find({a.dev, a.inode});
		std::string unnamed;
		if (it == names_.end())
			unnamed = "/dev:" + std::to_string(a.dev) + "/inode:" + std::to_string(a.inode);
		const std::string &path = it != names_.end() ? it->second : unnamed;
		uint64_t off = a.first_block << LLMCACHE_BLOCK_SHIFT, len = uint64_t(a.nr_blocks) << LLMCACHE_BLOCK_SHIFT;
		char head[64];
		std::snprintf(head, sizeof head, "%u %" PRIu64 ".%09" PRIu64 " ", a.pid, uint64_t(a.time_ns / 1000000000),
			      uint64_t(a.time_ns % 1000000000));
		char tail[96];
		if (a.op == LLMCACHE_OP_MMAP_FAULT) {
			if (mapped_.insert({a.dev, a.inode}).second)
				out_.write(head + ("mmap(NULL, " + std::to_string(len) + ", PROT_READ, MAP_SHARED, 3<" + path +
						   ">, 0) = 0x7f0000000000\n"));
			mmap_faults_++;
			std::snprintf(tail, sizeof tail, ">, %" PRIu64 ", %" PRIu64 ")\n", len, off);
			out_.write(head + ("mmap_fault(<" + path + tail));
		} else {
			std::snprintf(tail, sizeof tail, ">, \"\", %" PRIu64 ", %" PRIu64 ") = %" PRIu64 "\n", len, off, len);
			out_.write(head + std::string(a.op == LLMCACHE_OP_WRITE ? "pwrite64" : "pread64") + "(3<" + path + tail);
		}
	}

	void name(uint32_t dev, uint64_t inode, std::string_view path) override { names_[{dev, inode}] = path; }
	void set_flags(uint32_t flags) override { flags_ = flags; }

	void close() override
	{
		if (closed_)
			return;
		closed_ = true;
		if (std::string line = llmcache::trace::flags_line(flags_); !line.empty())
			out_.write(line + "\n");
		out_.close();
	}

	uint64_t mmap_faults() const { return mmap_faults_; }

private:
	llmcache::trace::OutputFile out_;
	std::map<llmcache::trace::FileKey, std::string> names_;
	std::set<llmcache::trace::FileKey> mapped_;
	uint32_t flags_ = 0;
	uint64_t mmap_faults_ = 0;
	bool closed_ = false;
	int unwinding_ = std::uncaught_exceptions(); // exceptions in flight when made: more at destruction is an error
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
