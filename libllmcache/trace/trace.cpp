// SPDX-License-Identifier: MIT
// What all trace formats share: format names, format detection, opening readers and writers, errors.
#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <sys/stat.h>

#include "io_internal.hpp"

namespace llmcache::trace {

using namespace detail;

TraceError::TraceError(const std::string &path, std::string_view where_kind, uint64_t where, const std::string &what)
	: std::runtime_error(path + ":" + std::string(where_kind) + " " + std::to_string(where) + ": " + what),
	  path_(path), where_(where)
{
}

Format parse_format(std::string_view name)
{
	if (name == "native")
		return Format::native;
	if (name == "strace")
		return Format::strace;
	if (name == "oracleGeneral" || name == "oracle")
		return Format::oracle_general;
	if (name == "csv")
		return Format::csv;
	throw std::invalid_argument("unknown trace format '" + std::string(name) +
				    "': expected native, strace, oracleGeneral (or oracle) or csv");
}

std::string_view format_name(Format f)
{
	switch (f) {
	case Format::native:
		return "native";
	case Format::strace:
		return "strace";
	case Format::oracle_general:
		return "oracleGeneral";
	case Format::csv:
		return "csv";
	}
	return "unknown";
}

uint64_t path_inode(std::string_view path)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (unsigned char c : path) {
		h ^= c;
		h *= 0x100000001b3ULL;
	}
	return h;
}

namespace detail {

std::string_view op_name(uint8_t op)
{
	switch (op) {
	case LLMCACHE_OP_READ:
		return "read";
	case LLMCACHE_OP_WRITE:
		return "write";
	case LLMCACHE_OP_MMAP_FAULT:
		return "mmap_fault";
	case LLMCACHE_OP_PATH:
		return "path";
	}
	return "unknown";
}

namespace {
struct FlagName {
	uint32_t flag;
	std::string_view name;
};
constexpr FlagName flag_names[] = {
	{LLMCACHE_TRACE_F_MMAP_UNSEEN, "MMAP_UNSEEN"},
	{LLMCACHE_TRACE_F_WRITES_UNSEEN, "WRITES_UNSEEN"},
};
} // namespace

uint32_t parse_flags_line(std::string_view line)
{
	uint32_t flags = 0;
	std::string_view list = line.substr(std::min(line.size(), flags_prefix.size()));
	while (!list.empty()) {
		size_t comma = list.find(',');
		std::string_view name = list.substr(0, comma);
		while (name.starts_with(' '))
			name.remove_prefix(1);
		while (name.ends_with(' ') || name.ends_with('\r'))
			name.remove_suffix(1);
		bool known = name.empty();
		for (const auto &f : flag_names)
			if (f.name == name) {
				flags |= f.flag;
				known = true;
			}
		if (!known)
			throw std::invalid_argument("unknown flag '" + std::string(name.substr(0, 40)) +
						    "': expected MMAP_UNSEEN or WRITES_UNSEEN");
		list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
	}
	return flags;
}

bool oracle_next_ok(int64_t next, uint64_t index, uint64_t records)
{
	// libCacheSim writes -1 (or INT64_MAX) for "never again"; otherwise the request index of the next
	// access, which some converters count from 1: either way after this record and at most records.
	if (next == -1 || next == INT64_MAX)
		return true;
	return next > 0 && uint64_t(next) > index && uint64_t(next) <= records;
}

std::string record_claim_error(const llmcache_access &a)
{
	if (a.op >= LLMCACHE_OP_PATH)
		return "unknown op " + std::to_string(a.op) + ": expected 0 (read), 1 (write) or 2 (mmap_fault)";
	if (a.nr_blocks == 0)
		return "access record of 0 blocks: nr_blocks must be at least 1";
	if (a.nr_blocks > max_record_blocks)
		return "access record of " + std::to_string(a.nr_blocks) + " blocks: a record covers at most " +
		       std::to_string(max_record_blocks) + " blocks (4 GiB); the trace is corrupt or not a trace";
	if (a.first_block >= max_block_end || a.nr_blocks > max_block_end - a.first_block)
		return "access record of blocks " + std::to_string(a.first_block) + " + " + std::to_string(a.nr_blocks) +
		       ": the last block must be below 2^51 (files are at most 2^63 bytes); the trace is corrupt or "
		       "not a trace";
	return {};
}

void check_writable(const llmcache_access &a)
{
	if (a.op >= LLMCACHE_OP_PATH)
		throw std::invalid_argument("cannot write a record with op " + std::to_string(a.op) +
					    ": accesses are read, write or mmap_fault; name files with name()");
	if (std::string why = record_claim_error(a); !why.empty())
		throw std::invalid_argument("cannot write an " + why);
}

static bool ends_with(std::string_view s, std::string_view suffix)
{
	return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether a line has the shape of strace output: [pid] [timestamp] name(...  or  <... name resumed>.
static bool strace_shaped(std::string_view l)
{
	size_t i = 0;
	auto skip_spaces = [&] {
		while (i < l.size() && l[i] == ' ')
			i++;
	};
	auto digits = [&] {
		size_t s = i;
		while (i < l.size() && l[i] >= '0' && l[i] <= '9')
			i++;
		return i > s;
	};
	skip_spaces();
	if (l.substr(i, 5) == "[pid ") {
		i += 5;
		skip_spaces();
		if (!digits() || i >= l.size() || l[i] != ']')
			return false;
		i++;
	} else {
		size_t s = i;
		if (digits() && i < l.size() && l[i] != ' ')
			i = s; // a timestamp, not a pid
	}
	skip_spaces();
	size_t s = i;
	if (digits() && i < l.size() && (l[i] == ':' || l[i] == '.')) {
		while (i < l.size() && ((l[i] >= '0' && l[i] <= '9') || l[i] == ':' || l[i] == '.'))
			i++;
		skip_spaces();
	} else {
		i = s;
	}
	std::string_view rest = l.substr(i);
	if (rest.starts_with("<... ") || rest.starts_with("+++ ") || rest.starts_with("--- "))
		return true;
	size_t n = 0;
	while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_'))
		n++;
	return n > 0 && n < rest.size() && rest[n] == '(';
}

// Whether the first 24-byte records look like oracleGeneral: each next_access_vtime says "never" or
// points past its own record and within the file (oracle_next_ok). Random bytes fail at once.
static bool oracle_shaped(std::string_view head, uint64_t records)
{
	size_t n = std::min<size_t>(head.size() / 24, 4096);
	for (size_t i = 0; i < n; i++) {
		int64_t next;
		std::memcpy(&next, head.data() + i * 24 + 16, 8);
		if (!oracle_next_ok(next, i, records))
			return false;
	}
	return n > 0;
}

Format detect(std::string_view head, const std::string &name, int64_t size, const std::string &display)
{
	if (head.starts_with(std::string_view(LLMCACHE_TRACE_MAGIC, 8)))
		return Format::native;
	if (ends_with(name, ".oracleGeneral") || ends_with(name, ".oracleGeneral.bin"))
		return Format::oracle_general;
	if (head.empty())
		throw TraceError(display, "byte offset", 0, "the file is empty: cannot tell its trace format");
	bool text = std::all_of(head.begin(), head.end(), [](char c) {
		auto u = static_cast<unsigned char>(c);
		return u >= 0x20 || c == '\n' || c == '\r' || c == '\t';
	});
	if (text) {
		if (head.starts_with("time_ns,pid,dev,inode,first_block,nr_blocks,op"))
			return Format::csv;
		// Judge complete lines only (the last one may be cut by the size of head).
		size_t start = 0;
		for (int lines = 0; lines < 64; lines++) {
			size_t nl = head.find('\n', start);
			if (nl == std::string_view::npos)
				break;
			if (strace_shaped(head.substr(start, nl - start)))
				return Format::strace;
			start = nl + 1;
		}
		if (head.find('\n') == std::string_view::npos && strace_shaped(head))
			return Format::strace;
	} else if (size >= 0 && size % 24 == 0 && oracle_shaped(head, uint64_t(size) / 24)) {
		return Format::oracle_general;
	}
	throw TraceError(display, "byte offset", 0,
			 "cannot tell the trace format: expected the LLMTRACE magic (native), the CSV header "
			 "'time_ns,pid,dev,inode,first_block,nr_blocks,op,path', strace output, or a binary file of "
			 "24-byte records named *.oracleGeneral; give the format explicitly");
}

// Reads the first bytes of an opened input for detection, without consuming them.
static std::string_view peek(Input &in)
{
	in.fill(in.regular_size() >= 0 ? std::min<size_t>(64 * 1024, size_t(in.regular_size())) : 64 * 1024);
	return std::string_view(in.data(), std::min<size_t>(in.avail(), 64 * 1024));
}

} // namespace detail

Format detect_format(const std::string &path)
{
	Input in(path);
	return detect(peek(in), path, in.regular_size(), in.name());
}

static std::unique_ptr<Reader> make_reader(std::unique_ptr<Input> in, Format f)
{
	switch (f) {
	case Format::native:
		return make_native_reader(std::move(in));
	case Format::strace:
		return make_strace_reader(std::move(in));
	case Format::oracle_general:
		return make_oracle_reader(std::move(in));
	case Format::csv:
		return make_csv_reader(std::move(in));
	}
	throw std::invalid_argument("unknown trace format");
}

std::unique_ptr<Reader> open_reader(const std::string &path, Format f)
{
	return make_reader(std::make_unique<Input>(path), f);
}

std::unique_ptr<Reader> open_reader(const std::string &path)
{
	auto in = std::make_unique<Input>(path);
	Format f = detect(peek(*in), path, in->regular_size(), in->name());
	return make_reader(std::move(in), f);
}

std::string flags_line(uint32_t flags)
{
	std::string line;
	for (const auto &f : flag_names)
		if (flags & f.flag)
			line += (line.empty() ? std::string(flags_prefix) + " " : ",") + std::string(f.name);
	return line;
}

void check_access(const llmcache_access &a) { check_writable(a); }

OutputFile::OutputFile(const std::string &path) : out_(std::make_unique<Output>(path)) {}
OutputFile::~OutputFile() = default;
void OutputFile::write(std::string_view s) { out_->write(s); }
void OutputFile::close() { out_->close(); }

bool same_file(const std::string &a, const std::string &b)
{
	struct stat sa, sb;
	if (a == "-" || b == "-" || ::stat(a.c_str(), &sa) < 0 || ::stat(b.c_str(), &sb) < 0)
		return false;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::unique_ptr<Writer> open_writer(const std::string &path, Format f, std::string_view producer)
{
	switch (f) {
	case Format::native:
		return make_native_writer(path, producer);
	case Format::oracle_general:
		return make_oracle_writer(path);
	case Format::csv:
		return make_csv_writer(path);
	case Format::strace:
		break;
	}
	throw std::invalid_argument("cannot write " + std::string(format_name(f)) +
				    " traces: strace is read only; write native, oracleGeneral or csv");
}

} // namespace llmcache::trace
