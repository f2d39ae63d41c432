// SPDX-License-Identifier: MIT
// The native binary trace (include/uapi/llmcache.h): a struct llmcache_trace_header, then 40-byte
// struct llmcache_access records until the end of the file. A record with op LLMCACHE_OP_PATH names the
// file (dev, inode) and is followed by nr_blocks bytes of path, zero-padded to a multiple of 8.
// The reader copies records straight out of a 1 MiB window of the file and holds each to
// record_claim_error(); the writer names each file once and, when the output is a regular file, patches
// the header at close() with the first record's time and the final flags.
#include <bit>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "io_internal.hpp"

namespace llmcache::trace::detail {
namespace {

static_assert(std::endian::native == std::endian::little, "the native trace is little-endian");
static_assert(sizeof(llmcache_access) == 40 && sizeof(llmcache_trace_header) == 96);

constexpr size_t max_path = 4096;
constexpr size_t rec_size = sizeof(llmcache_access);

size_t padded(size_t len) { return (len + 7) & ~size_t(7); }

class NativeReader final : public Reader {
public:
	explicit NativeReader(std::unique_ptr<Input> in) : in_(std::move(in)) { read_header(); }

	bool next(llmcache_access &out) override
	{
		for (;;) {
			if (in_->fill(rec_size) < rec_size) [[unlikely]] {
				if (in_->avail() == 0)
					return false;
				fail(in_->offset(), "truncated record: the file ends " + std::to_string(in_->avail()) +
							    " bytes into a 40-byte record (the trace was cut short)");
			}
			std::memcpy(&out, in_->data(), rec_size);
			last_ = in_->offset();
			in_->consume(rec_size);
			if (out.op < LLMCACHE_OP_PATH && out.nr_blocks != 0 && out.nr_blocks <= max_record_blocks &&
			    out.first_block <= max_block_end - out.nr_blocks) [[likely]]
				return true;
			read_special(out, last_);
		}
	}

	Position position() const override { return {"byte offset", last_}; }

	const PathMap &paths() const override { return paths_; }
	std::string producer() const override { return producer_; }
	uint32_t flags() const override { return flags_; }

	std::vector<std::string> notes() const override
	{
		std::vector<std::string> out;
		if (flags_ & LLMCACHE_TRACE_F_MMAP_UNSEEN)
			out.push_back("regular files were mmapped while this trace was recorded but their page faults were "
				      "not recorded (flag MMAP_UNSEEN): the trace misses those accesses; record with llmtrace "
				      "to capture them");
		if (flags_ & LLMCACHE_TRACE_F_WRITES_UNSEEN)
			out.push_back("writes were not recorded (flag WRITES_UNSEEN): a replay does not see the pages "
				      "that writes bring into the page cache; record with llmtrace record --writes to "
				      "capture them");
		return out;
	}

private:
	[[noreturn]] void fail(uint64_t off, const std::string &what) { throw TraceError(in_->name(), "byte offset", off, what); }

	void read_header()
	{
		llmcache_trace_header h;
		size_t got = in_->fill(sizeof h);
		if (got < 8 || std::memcmp(in_->data(), LLMCACHE_TRACE_MAGIC, 8) != 0)
			fail(0, "not a native llmcache trace: expected the magic \"LLMTRACE\" at the start");
		if (got < sizeof h)
			fail(got, "truncated header: " + std::to_string(got) + " of " + std::to_string(sizeof h) + " bytes");
		std::memcpy(&h, in_->data(), sizeof h);
		if (h.version != LLMCACHE_TRACE_VERSION)
			fail(offsetof(llmcache_trace_header, version),
			     "trace version " + std::to_string(h.version) + " is not supported: this build reads version " +
				     std::to_string(LLMCACHE_TRACE_VERSION));
		if (h.header_size < sizeof h || h.header_size > 65536)
			fail(offsetof(llmcache_trace_header, header_size),
			     "header_size " + std::to_string(h.header_size) + " is wrong: expected at least " +
				     std::to_string(sizeof h) + " (and at most 65536)");
		if (h.record_size != rec_size)
			fail(offsetof(llmcache_trace_header, record_size),
			     "record_size " + std::to_string(h.record_size) + " is wrong: expected " + std::to_string(rec_size));
		if (in_->fill(h.header_size) < h.header_size)
			fail(in_->avail(), "truncated header: header_size says " + std::to_string(h.header_size) + " bytes");
		in_->consume(h.header_size);
		flags_ = h.flags;
		producer_.assign(h.producer, strnlen(h.producer, sizeof h.producer));
	}

	// A PATH record (consumes its path bytes) or a malformed record.
	void read_special(const llmcache_access &r, uint64_t off)
	{
		if (r.op > LLMCACHE_OP_PATH)
			fail(off, "unknown op " + std::to_string(r.op) + ": expected 0 (read), 1 (write), 2 (mmap_fault) or 3 (path)");
		if (r.op != LLMCACHE_OP_PATH)
			fail(off, record_claim_error(r));
		if (r.nr_blocks == 0 || r.nr_blocks > max_path)
			fail(off, "path record of " + std::to_string(r.nr_blocks) + " bytes: expected 1 to 4096");
		size_t len = padded(r.nr_blocks);
		if (in_->fill(len) < len)
			fail(in_->offset(), "truncated path record: expected " + std::to_string(len) + " bytes of path, found " +
						    std::to_string(in_->avail()));
		paths_[{r.dev, r.inode}].assign(in_->data(), strnlen(in_->data(), r.nr_blocks));
		in_->consume(len);
	}

	std::unique_ptr<Input> in_;
	PathMap paths_;
	std::string producer_;
	uint32_t flags_ = 0;
	uint64_t last_ = 0;
};

class NativeWriter final : public Writer {
public:
	NativeWriter(const std::string &path, std::string_view producer) : out_(path)
	{
		std::memcpy(hdr_.magic, LLMCACHE_TRACE_MAGIC, 8);
		hdr_.version = LLMCACHE_TRACE_VERSION;
		hdr_.header_size = sizeof hdr_;
		hdr_.record_size = rec_size;
		std::memcpy(hdr_.producer, producer.data(), std::min(producer.size(), sizeof hdr_.producer - 1));
		written_ = hdr_;
		out_.write(&hdr_, sizeof hdr_);
	}

	~NativeWriter() override
	{
		if (std::uncaught_exceptions() > unwinding_)
			return; // out_ removes the temporary file
		try {
			close();
		} catch (const std::exception &e) {
			std::fprintf(stderr, "llmcache: %s\n", e.what());
		}
	}

	void write(const llmcache_access &a) override
	{
		check_writable(a);
		if (!started_) {
			hdr_.start_time_ns = a.time_ns;
			started_ = true;
		}
		last_time_ = a.time_ns;
		out_.write(&a, rec_size);
	}

	void name(uint32_t dev, uint64_t inode, std::string_view path) override
	{
		if (path.empty())
			return;
		if (path.size() > max_path)
			throw std::invalid_argument("cannot name a file with a path of " + std::to_string(path.size()) +
						    " bytes: the native trace stores at most 4096");
		bool added;
		named_.intern({dev, inode}, &added);
		if (!added)
			return;
		llmcache_access r{};
		r.time_ns = last_time_;
		r.inode = inode;
		r.dev = dev;
		r.nr_blocks = uint32_t(path.size());
		r.op = LLMCACHE_OP_PATH;
		static const char zeros[8] = {};
		out_.write(&r, rec_size);
		out_.write(path);
		out_.write(zeros, padded(path.size()) - path.size());
	}

	void set_flags(uint32_t flags) override { hdr_.flags = flags; }

	void close() override
	{
		if (closed_)
			return;
		closed_ = true;
		out_.flush();
		if (std::memcmp(&hdr_, &written_, sizeof hdr_) != 0 && out_.seekable())
			out_.pwrite_at(0, &hdr_, sizeof hdr_);
		out_.close();
	}

private:
	Output out_;
	llmcache_trace_header hdr_{}, written_{};
	FileIndex named_;
	uint64_t last_time_ = 0;
	bool started_ = false, closed_ = false;
	int unwinding_ = std::uncaught_exceptions(); // exceptions in flight when made: more at destruction is an error
};

} // namespace

std::unique_ptr<Reader> make_native_reader(std::unique_ptr<Input> in) { return std::make_unique<NativeReader>(std::move(in)); }

std::unique_ptr<Writer> make_native_writer(const std::string &path, std::string_view producer)
{
	return std::make_unique<NativeWriter>(path, producer);
}

} // namespace llmcache::trace::detail
