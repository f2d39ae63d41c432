// SPDX-License-Identifier: MIT
// libCacheSim's oracleGeneral trace: packed little-endian 24-byte records
//   u32 clock_time (s), u64 obj_id, u32 obj_size, i64 next_access_vtime (-1: never again)
// one request per 4 KiB block. obj_id = (file_number << 40) | block, where file_number numbers the
// (dev, inode) pairs densely in order of first appearance; the reader returns inode = file_number, dev 0.
// next_access_vtime is the index of the next request for the same obj_id. The reader holds each record to
// what the file can hold: next_access_vtime "never" or a later record of the file, the blocks within
// record_claim_error(). The writer streams records into the output's temporary file (or, for stdout and
// devices, a scratch file in $TMPDIR), then at close() walks it backwards in 1 MiB chunks with a map
// obj_id -> next index (memory grows with distinct blocks only), patches each chunk in place, and renames
// the file into place (or copies the scratch file to the output).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdexcept>
#include <unistd.h>

#include "io_internal.hpp"

namespace llmcache::trace::detail {
namespace {

#pragma pack(push, 1)
struct OracleRecord {
	uint32_t clock_time;
	uint64_t obj_id;
	uint32_t obj_size;
	int64_t next_access_vtime;
};
#pragma pack(pop)
static_assert(sizeof(OracleRecord) == 24);

constexpr unsigned block_bits = 40;
constexpr uint64_t block_mask = (uint64_t(1) << block_bits) - 1;
constexpr uint64_t max_files = uint64_t(1) << (64 - block_bits - 1); // keeps obj_id below 2^63

class OracleReader final : public Reader {
public:
	explicit OracleReader(std::unique_ptr<Input> in) : in_(std::move(in))
	{
		int64_t size = in_->regular_size();
		if (size >= 0 && size % 24 != 0)
			fail(uint64_t(size - size % 24), "truncated record: the file is " + std::to_string(size) +
								 " bytes, not a multiple of the 24-byte oracleGeneral record");
		records_ = size >= 0 ? uint64_t(size) / 24 : UINT64_MAX;
	}

	uint64_t block_accesses_hint() const override { return records_ == UINT64_MAX ? 0 : records_; }

	bool next(llmcache_access &out) override
	{
		if (in_->fill(sizeof(OracleRecord)) < sizeof(OracleRecord)) [[unlikely]] {
			if (in_->avail() == 0)
				return false;
			fail(in_->offset(), "truncated record: the file ends " + std::to_string(in_->avail()) +
						    " bytes into a 24-byte oracleGeneral record");
		}
		OracleRecord r;
		std::memcpy(&r, in_->data(), sizeof r);
		last_ = in_->offset();
		in_->consume(sizeof r);
		uint64_t index = last_ / sizeof r;
		if (!oracle_next_ok(r.next_access_vtime, index, records_))
			fail(last_, "record " + std::to_string(index) + " says its object is next requested by record " +
					    std::to_string(r.next_access_vtime) + ", but that is not a later record of the " +
					    std::to_string(records_) + " in the file (expected -1 for never): the file is corrupt or "
					    "not an oracleGeneral trace");
		out = llmcache_access{};
		out.time_ns = uint64_t(r.clock_time) * 1000000000ULL;
		out.inode = r.obj_id >> block_bits;
		out.first_block = r.obj_id & block_mask;
		out.nr_blocks = r.obj_size <= LLMCACHE_BLOCK_SIZE ? 1 : uint32_t((uint64_t(r.obj_size) + LLMCACHE_BLOCK_SIZE - 1) >> LLMCACHE_BLOCK_SHIFT);
		out.op = LLMCACHE_OP_READ;
		if (std::string why = record_claim_error(out); !why.empty())
			fail(last_, why);
		return true;
	}

	const PathMap &paths() const override { return paths_; }
	Position position() const override { return {"byte offset", last_}; }

private:
	[[noreturn]] void fail(uint64_t off, const std::string &what) { throw TraceError(in_->name(), "byte offset", off, what); }

	std::unique_ptr<Input> in_;
	PathMap paths_;
	uint64_t records_ = 0, last_ = 0;
};

class OracleWriter final : public Writer {
public:
	explicit OracleWriter(const std::string &path) : out_(path)
	{
		if (out_.replacing())
			return; // records go into the output's own temporary file
		const char *dir = std::getenv("TMPDIR");
		std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/llmcache-oracleGeneral-XXXXXX";
		int fd = mkostemp(tmpl.data(), O_CLOEXEC);
		if (fd < 0)
			throw_errno("create a scratch file in", tmpl.substr(0, tmpl.rfind('/')));
		unlink(tmpl.c_str()); // lives until closed
		scratch_ = std::make_unique<Output>(fd, tmpl, true);
	}

	~OracleWriter() override
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
		uint32_t file = files_.intern({a.dev, a.inode});
		if (file >= max_files)
			throw std::invalid_argument("oracleGeneral obj_id holds at most 2^23 files");
		if (a.first_block + a.nr_blocks - 1 > block_mask)
			throw std::invalid_argument("block " + std::to_string(a.first_block + a.nr_blocks - 1) +
						    " does not fit the 40 bits of block number in an oracleGeneral obj_id");
		OracleRecord r{uint32_t(a.time_ns / 1000000000ULL), (uint64_t(file) << block_bits) | a.first_block,
			       LLMCACHE_BLOCK_SIZE, -1};
		for (uint32_t i = 0; i < a.nr_blocks; i++, r.obj_id++)
			records().write(&r, sizeof r);
		count_ += a.nr_blocks;
	}

	void name(uint32_t, uint64_t, std::string_view) override {}

	void close() override
	{
		if (closed_)
			return;
		closed_ = true;
		records().flush();
		link_next_accesses();
		if (scratch_)
			copy_scratch();
		out_.close();
	}

private:
	Output &records() { return scratch_ ? *scratch_ : out_; }

	// Backward pass: the next request of each obj_id is the last one seen walking from the end.
	void link_next_accesses()
	{
		constexpr uint64_t chunk = io_buffer_size / sizeof(OracleRecord);
		std::vector<OracleRecord> buf(chunk);
		util::FlatMap<int64_t> next_of(1024);
		for (uint64_t end = count_; end > 0;) {
			uint64_t start = end > chunk ? end - chunk : 0, n = end - start;
			read_at(start * sizeof(OracleRecord), buf.data(), n * sizeof(OracleRecord));
			for (uint64_t i = n; i-- > 0;) {
				int64_t *next = next_of.find(buf[i].obj_id);
				buf[i].next_access_vtime = next ? *next : -1;
				next_of.put(buf[i].obj_id, int64_t(start + i));
			}
			records().pwrite_at(start * sizeof(OracleRecord), buf.data(), n * sizeof(OracleRecord));
			end = start;
		}
	}

	void read_at(uint64_t off, void *p, size_t n)
	{
		char *c = static_cast<char *>(p);
		while (n > 0) {
			ssize_t r = pread(records().fd(), c, n, off_t(off));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				if (r == 0)
					errno = EIO;
				throw_errno("read back", records().name());
			}
			c += r;
			off += uint64_t(r);
			n -= size_t(r);
		}
	}

	void copy_scratch()
	{
		std::vector<char> buf(io_buffer_size);
		uint64_t total = count_ * sizeof(OracleRecord);
		for (uint64_t off = 0; off < total;) {
			size_t n = size_t(std::min<uint64_t>(buf.size(), total - off));
			read_at(off, buf.data(), n);
			out_.write(buf.data(), n);
			off += n;
		}
		scratch_->close();
	}

	Output out_;
	std::unique_ptr<Output> scratch_; // when out_ cannot be read back and patched
	FileIndex files_;
	uint64_t count_ = 0;
	bool closed_ = false;
	int unwinding_ = std::uncaught_exceptions(); // exceptions in flight when made: more at destruction is an error
};

} // namespace

std::unique_ptr<Reader> make_oracle_reader(std::unique_ptr<Input> in) { return std::make_unique<OracleReader>(std::move(in)); }
std::unique_ptr<Writer> make_oracle_writer(const std::string &path) { return std::make_unique<OracleWriter>(path); }

} // namespace llmcache::trace::detail
