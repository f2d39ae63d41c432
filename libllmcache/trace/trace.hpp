// SPDX-License-Identifier: MIT
// Trace formats: every reader streams (a trace of 100 million records is never loaded whole) and
// reports malformed input with its line or byte offset; every writer streams too. Readers hold every
// record to the limits of the format and of Linux (at most 2^20 blocks, the last block below 2^51) and
// never let a line, a path or a table grow past a bound, so that hostile or random input is an error
// that names where it is, not an exhausted memory. Writers write a temporary file and rename it into
// place when closed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

extern "C" {
#include "../../include/uapi/llmcache.h"
}

namespace llmcache::trace {

enum class Format {
	native,         // LLMTRACE header + struct llmcache_access records (include/uapi/llmcache.h)
	strace,         // text of `strace -f -tt -yy` (read only)
	oracle_general, // libCacheSim oracleGeneral: 24-byte records, one per 4 KiB block
	csv,            // time_ns,pid,dev,inode,first_block,nr_blocks,op[,path]
};

// "native", "strace", "oracleGeneral" (also "oracle"), "csv"; throws std::invalid_argument otherwise.
Format parse_format(std::string_view name);
std::string_view format_name(Format f);
// Guess from the file's first bytes (magic, text shape) and its name; throws TraceError if unsure.
Format detect_format(const std::string &path);

// Malformed input: where (line for text formats, byte offset for binary ones) and what was expected.
class TraceError : public std::runtime_error {
public:
	TraceError(const std::string &path, std::string_view where_kind, uint64_t where, const std::string &what);
	const std::string &path() const { return path_; }
	uint64_t where() const { return where_; }

private:
	std::string path_;
	uint64_t where_;
};

// (dev, inode) -> path, when the trace names its files.
using FileKey = std::pair<uint32_t, uint64_t>;
using PathMap = std::map<FileKey, std::string>;

class Reader {
public:
	virtual ~Reader() = default;
	// The next access record (never an LLMCACHE_OP_PATH record: those fill paths()). false at the end.
	// Throws TraceError on malformed input.
	virtual bool next(llmcache_access &out) = 0;
	// Files named so far.
	virtual const PathMap &paths() const = 0;
	// Notes for the user that are not errors, e.g. that mmapped files were seen whose page accesses the
	// trace cannot contain (strace). Complete once next() has returned false.
	virtual std::vector<std::string> notes() const { return {}; }
	// What produced the trace, when the format says.
	virtual std::string producer() const { return {}; }
	// LLMCACHE_TRACE_F_* that apply to the trace (e.g. MMAP_UNSEEN). Complete once next() has returned false.
	virtual uint32_t flags() const { return 0; }
	// About how many block accesses the whole trace holds, for a caller that sizes its memory once, when
	// the format says so without reading it (an oracleGeneral file: its records, one block each unless an
	// object is larger); 0 when it does not.
	virtual uint64_t block_accesses_hint() const { return 0; }
	// Where the record that next() returned last starts, for a caller that refuses it (e.g. because
	// the trace no longer fits in memory): {"byte offset", N} or {"line", N}; kind is empty for a
	// reader that cannot say (one made by a test from a vector).
	struct Position {
		std::string_view kind;
		uint64_t where = 0;
	};
	virtual Position position() const { return {}; }
};

class Writer {
public:
	virtual ~Writer() = default;
	virtual void write(const llmcache_access &a) = 0;
	// Name a file; formats without names ignore it.
	virtual void name(uint32_t dev, uint64_t inode, std::string_view path) = 0;
	// Set LLMCACHE_TRACE_F_* (any time before close()); formats without flags ignore them.
	virtual void set_flags(uint32_t flags) {}
	// Flush, close and rename the output into place; throws std::system_error on I/O failure. The
	// destructor calls it unless an exception is unwinding the stack: a writer dropped by an error
	// removes its temporary file and leaves the path as it was.
	virtual void close() = 0;
};

// "-" is stdin / stdout. Throws std::system_error when the file cannot be opened, TraceError when the
// header is wrong.
std::unique_ptr<Reader> open_reader(const std::string &path, Format f);
std::unique_ptr<Reader> open_reader(const std::string &path); // detect_format()
std::unique_ptr<Writer> open_writer(const std::string &path, Format f, std::string_view producer);

// A reader that passes on inner's records until their blocks add up to more than max_blocks, then throws
// TraceError at the record that passed the bound, naming `name` and ending with `why` (what fills memory,
// and what to do). For tools that keep data per block access (limit.cpp).
std::unique_ptr<Reader> limit_blocks(std::unique_ptr<Reader> inner, const std::string &name, uint64_t max_blocks,
				     std::string why);
// The memory a tool may fill: MemAvailable from /proc/meminfo, or RLIMIT_AS when lower; 0 if unknown.
uint64_t available_memory();

// Throws std::invalid_argument when no writer can store a: an op other than read, write and mmap_fault,
// 0 blocks, or more than a reader accepts (2^20 blocks, the last below 2^51).
void check_access(const llmcache_access &a);
// The comment line "# flags: MMAP_UNSEEN,WRITES_UNSEEN" (without '\n') that carries LLMCACHE_TRACE_F_*
// in text formats, which have no header for them; "" for no flags.
std::string flags_line(uint32_t flags);

namespace detail {
class Output;
}

// A text output written the way the writers write theirs: "-" is stdout; a regular file is written under
// a temporary name that close() renames into place, and is removed if the OutputFile is destroyed
// unclosed; a device or FIFO is written in place. For formats built outside the library (llmtrace's
// strace text). Throws std::system_error.
class OutputFile {
public:
	explicit OutputFile(const std::string &path);
	~OutputFile();
	void write(std::string_view s);
	void close();

private:
	std::unique_ptr<detail::Output> out_;
};

// Whether two paths name the same existing file (same device and inode), e.g. a conversion's input and
// output; "-" is never the same as a file.
bool same_file(const std::string &a, const std::string &b);

// Stable 64-bit hash of a path (FNV-1a), used as the inode of files known only by name.
uint64_t path_inode(std::string_view path);

} // namespace llmcache::trace
