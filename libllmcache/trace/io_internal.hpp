// SPDX-License-Identifier: MIT
// Private to libllmcache/trace: buffered streaming input and output (1 MiB buffers, plain read(2) and
// write(2)), dense indexes of files, the limits every reader holds records to, and the constructors of
// each format's reader and writer.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/flat_map.hpp"
#include "trace.hpp"

namespace llmcache::trace::detail {

constexpr size_t io_buffer_size = size_t(1) << 20;

// The longest line a text format may have: strace prints at most its -s limit of each buffer (32 bytes
// by default), so real lines stay far below this; a file without newlines (/dev/zero, a binary file read
// as text) is refused here instead of growing a buffer until memory runs out.
constexpr size_t max_line = size_t(1) << 20;

// What one access record may claim. nr_blocks: 2^20 blocks (4 GiB), the most llmtrace record joins into
// one record (--join-blocks) and more than one read(2) moves (Linux's MAX_RW_COUNT is just under 2 GiB).
// The last block: below 2^51, since no Linux file is larger than 2^63 bytes (MAX_LFS_FILESIZE); this also
// keeps first_block + nr_blocks and the byte offset first_block << 12 from wrapping.
constexpr uint32_t max_record_blocks = uint32_t(1) << 20;
constexpr uint64_t max_block_end = uint64_t(1) << (63 - LLMCACHE_BLOCK_SHIFT);

// Why an access record claims more than a trace may (limits above, op, nr_blocks 0), or "" when it is
// sound. Every reader checks every record it returns and reports the record's offset or line.
std::string record_claim_error(const llmcache_access &a);

// Whether an oracleGeneral record's next_access_vtime fits the file: "never" (-1, INT64_MAX), or after
// the record's own index and not past the number of records (unknown for a pipe: UINT64_MAX).
bool oracle_next_ok(int64_t next, uint64_t index, uint64_t records);

// The comment line that carries a text trace's flags, which have no column: "# flags: A,B" with the
// names MMAP_UNSEEN and WRITES_UNSEEN (csv, and llmtrace's strace text).
constexpr std::string_view flags_prefix = "# flags:";
// The flags a "# flags:" line names; throws std::invalid_argument for a name it does not know.
uint32_t parse_flags_line(std::string_view line);

// Thrown by Input::next_line for a line longer than max_line; the text readers turn it into a
// TraceError that names the line.
struct LineTooLong {
	uint64_t offset; // where the line starts
};

// Reads a file (or stdin for "-") through a buffer that only ever holds a window of it.
class Input {
public:
	explicit Input(const std::string &path); // throws std::system_error
	~Input();
	Input(const Input &) = delete;
	Input &operator=(const Input &) = delete;

	const std::string &name() const { return name_; } // for messages: the path, or "<stdin>"
	// Make at least n bytes available at data() unless the file ends first; returns avail().
	size_t fill(size_t n)
	{
		return avail() >= n ? avail() : refill(n);
	}
	const char *data() const { return buf_.data() + pos_; }
	size_t avail() const { return end_ - pos_; }
	void consume(size_t n) { pos_ += n; }
	uint64_t offset() const { return base_ + pos_; } // file offset of data()
	// Size of a regular file, or -1 for pipes and terminals.
	int64_t regular_size() const { return regular_size_; }
	// The next line without its '\n'; false at the end. *terminated is false when the file ended
	// before the line's newline. The view lives until the next call. Throws LineTooLong past max_line.
	bool next_line(std::string_view &line, bool &terminated);

private:
	size_t refill(size_t n);

	std::string name_;
	int fd_ = -1;
	bool owned_ = false;
	bool eof_ = false;
	int64_t regular_size_ = -1;
	std::vector<char> buf_;
	size_t pos_ = 0, end_ = 0;
	uint64_t base_ = 0;
};

// Writes a file (or stdout for "-") through a buffer. A regular file is written under a temporary name
// in its directory and renamed over the path by close(), so that nobody ever reads half a trace and a
// run that fails leaves whatever was at the path untouched: destroying an Output that was not closed
// removes the temporary file. A path that exists and is not a regular file (/dev/null, a FIFO, a
// terminal) is written in place, since renaming over it would replace the device node.
class Output {
public:
	Output() = default;
	// Throws std::system_error (a directory, no permission to create the temporary file).
	explicit Output(const std::string &path);
	// Adopts an open descriptor; name is for messages.
	Output(int fd, std::string name, bool owned);
	~Output();
	Output(const Output &) = delete;
	Output &operator=(const Output &) = delete;

	void write(const void *p, size_t n)
	{
		if (n > buf_.size() - used_)
			flush();
		if (n > buf_.size()) {
			write_all(p, n);
			return;
		}
		std::memcpy(buf_.data() + used_, p, n);
		used_ += n;
	}
	void write(std::string_view s) { write(s.data(), s.size()); }
	void flush();
	// Writes at an absolute offset without moving the stream (after flush()); throws std::system_error.
	void pwrite_at(uint64_t off, const void *p, size_t n);
	bool seekable() const;
	// Whether the output is a temporary file of this process, to be renamed into place: it can be read
	// back and patched anywhere.
	bool replacing() const { return !tmp_path_.empty(); }
	void close();   // flush, close the descriptor if owned and rename the temporary file into place
	void discard(); // close without renaming: the temporary file is removed, the path left as it was
	int fd() const { return fd_; }
	const std::string &name() const { return name_; }

private:
	void write_all(const void *p, size_t n);

	std::string name_;
	std::string tmp_path_, final_path_; // set while a temporary file waits to be renamed to final_path_
	int fd_ = -1;
	bool owned_ = false;
	std::vector<char> buf_ = std::vector<char>(io_buffer_size);
	size_t used_ = 0;
};

// Throws std::system_error for errno with "failed to <what> <name>".
[[noreturn]] void throw_errno(const std::string &what, const std::string &name);

// Maps 64-bit hashes of variable keys to dense indexes; the caller checks that an index really holds
// its key, and colliding keys move on to the next probe key. No allocation per lookup.
class DenseIndex {
public:
	static constexpr uint32_t npos = ~uint32_t(0);

	template <typename Same> uint32_t find(uint64_t hash, Same same) const
	{
		for (uint64_t k = fix(hash);; k = next(k)) {
			const uint32_t *v = map_.find(k);
			if (!v)
				return npos;
			if (same(*v))
				return *v;
		}
	}
	void insert(uint64_t hash, uint32_t index)
	{
		uint64_t k = fix(hash);
		while (map_.find(k))
			k = next(k);
		map_.put(k, index);
	}

private:
	static uint64_t fix(uint64_t k) { return k == util::FlatMap<uint32_t>::empty_key ? 0 : k; }
	static uint64_t next(uint64_t k) { return fix(k * 0x9e3779b97f4a7c15ULL + 1); }

	util::FlatMap<uint32_t> map_;
};

// Dense numbers for (dev, inode) in order of first appearance, with a one-entry cache for runs of
// accesses to the same file.
class FileIndex {
public:
	static constexpr uint32_t npos = DenseIndex::npos;

	uint32_t find(FileKey key) const
	{
		if (last_ != npos && keys_[last_] == key)
			return last_;
		uint32_t i = index_.find(hash(key), [&](uint32_t j) { return keys_[j] == key; });
		if (i != npos)
			last_ = i;
		return i;
	}
	// The key's number; *added tells whether it is new.
	uint32_t intern(FileKey key, bool *added = nullptr)
	{
		uint32_t i = find(key);
		if (added)
			*added = i == npos;
		if (i != npos)
			return i;
		i = uint32_t(keys_.size());
		keys_.push_back(key);
		index_.insert(hash(key), i);
		return last_ = i;
	}
	size_t size() const { return keys_.size(); }
	const FileKey &key(uint32_t i) const { return keys_[i]; }

private:
	static uint64_t hash(FileKey k) { return k.second * 0x9e3779b97f4a7c15ULL ^ (uint64_t(k.first) << 17); }

	DenseIndex index_;
	std::vector<FileKey> keys_;
	mutable uint32_t last_ = npos;
};

// Text of a record's op for messages and CSV ("read", "write", "mmap_fault", "path").
std::string_view op_name(uint8_t op);
// Rejects records no writer can store (op out of range, LLMCACHE_OP_PATH, nr_blocks 0).
void check_writable(const llmcache_access &a);

std::unique_ptr<Reader> make_native_reader(std::unique_ptr<Input> in);
std::unique_ptr<Reader> make_strace_reader(std::unique_ptr<Input> in);
std::unique_ptr<Reader> make_oracle_reader(std::unique_ptr<Input> in);
std::unique_ptr<Reader> make_csv_reader(std::unique_ptr<Input> in);

std::unique_ptr<Writer> make_native_writer(const std::string &path, std::string_view producer);
std::unique_ptr<Writer> make_oracle_writer(const std::string &path);
std::unique_ptr<Writer> make_csv_writer(const std::string &path);

// The format that a file's first bytes say, given its name and size (-1 when unknown); throws
// TraceError naming `display` when unsure.
Format detect(std::string_view head, const std::string &name, int64_t size, const std::string &display);

} // namespace llmcache::trace::detail
