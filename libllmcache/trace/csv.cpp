// SPDX-License-Identifier: MIT
// CSV traces, for people and spreadsheets: the header line time_ns,pid,dev,inode,first_block,nr_blocks,op,path
// then one access per line. op is read, write or mmap_fault; path is empty when unknown and quoted
// ("" for a quote) when it holds a comma, a quote or a line break. The writer repeats the path on
// every line of a named file so that each line stands alone; the reader also takes the 7-column form.
// The trace's flags, which have no column, follow the last row as a comment line
// "# flags: MMAP_UNSEEN,WRITES_UNSEEN"; the reader skips other lines that start with '#'. A path is at
// most 4096 bytes (PATH_MAX) and a line at most max_line: a quote that never closes is an error at its
// line, not a path that grows over the rest of the file.
#include <charconv>
#include <cstdio>
#include <exception>
#include <limits>

#include "io_internal.hpp"

namespace llmcache::trace::detail {
namespace {

constexpr std::string_view header7 = "time_ns,pid,dev,inode,first_block,nr_blocks,op";
constexpr std::string_view header8 = "time_ns,pid,dev,inode,first_block,nr_blocks,op,path";
constexpr const char *columns[] = {"time_ns", "pid", "dev", "inode", "first_block", "nr_blocks", "op", "path"};
constexpr size_t max_path = 4096;

class CsvReader final : public Reader {
public:
	explicit CsvReader(std::unique_ptr<Input> in) : in_(std::move(in))
	{
		std::string_view line;
		if (!next_line(line))
			fail(1, "empty file: expected the CSV header '" + std::string(header8) + "'");
		if (line.ends_with('\r'))
			line.remove_suffix(1);
		if (line != header8 && line != header7)
			fail(1, "expected the CSV header '" + std::string(header8) + "', found '" + std::string(line.substr(0, 80)) + "'");
	}

	bool next(llmcache_access &out) override
	{
		std::string_view line;
		for (;;) {
			if (!next_line(line))
				return false;
			if (line.ends_with('\r'))
				line.remove_suffix(1);
			if (line.starts_with('#'))
				read_comment(line);
			else if (!line.empty())
				break;
		}
		uint64_t row_line = line_no_;
		std::string_view f[7];
		size_t pos = 0;
		for (int c = 0; c < 7; c++) {
			size_t comma = line.find(',', pos);
			if (comma == std::string_view::npos && c < 6)
				fail(row_line, "expected 8 columns (" + std::string(header8) + "), found " + std::to_string(c + 1));
			f[c] = line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
			pos = comma == std::string_view::npos ? line.size() + 1 : comma + 1;
		}
		out = llmcache_access{};
		out.time_ns = number<uint64_t>(f[0], 0, row_line);
		out.pid = number<uint32_t>(f[1], 1, row_line);
		out.dev = number<uint32_t>(f[2], 2, row_line);
		out.inode = number<uint64_t>(f[3], 3, row_line);
		out.first_block = number<uint64_t>(f[4], 4, row_line);
		out.nr_blocks = number<uint32_t>(f[5], 5, row_line);
		if (out.nr_blocks == 0)
			fail(row_line, "column 6 (nr_blocks): expected at least 1, found 0");
		if (f[6] == "read")
			out.op = LLMCACHE_OP_READ;
		else if (f[6] == "write")
			out.op = LLMCACHE_OP_WRITE;
		else if (f[6] == "mmap_fault")
			out.op = LLMCACHE_OP_MMAP_FAULT;
		else
			fail(row_line, "column 7 (op): expected read, write or mmap_fault, found '" + std::string(f[6]) + "'");
		if (std::string why = record_claim_error(out); !why.empty())
			fail(row_line, why);
		row_line_ = row_line;
		if (pos <= line.size())
			read_path(line.substr(pos), out, row_line);
		return true;
	}

	const PathMap &paths() const override { return paths_; }
	uint32_t flags() const override { return flags_; }
	Position position() const override { return {"line", row_line_}; }

private:
	[[noreturn]] void fail(uint64_t line, const std::string &what) { throw TraceError(in_->name(), "line", line, what); }

	bool next_line(std::string_view &line)
	{
		bool terminated;
		try {
			if (!in_->next_line(line, terminated))
				return false;
		} catch (const LineTooLong &e) {
			fail(line_no_ + 1, "line longer than " + std::to_string(max_line) + " bytes (from byte offset " +
						   std::to_string(e.offset) + "): a CSV trace has short lines; is this a CSV file?");
		}
		line_no_++;
		return true;
	}

	// "# flags: A,B" sets the trace's flags; other comments are skipped.
	void read_comment(std::string_view line)
	{
		if (!line.starts_with(flags_prefix))
			return;
		try {
			flags_ |= parse_flags_line(line);
		} catch (const std::invalid_argument &e) {
			fail(line_no_, e.what());
		}
	}

	template <typename T> T number(std::string_view s, int col, uint64_t line)
	{
		T v{};
		auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
		if (s.empty() || ec != std::errc() || p != s.data() + s.size())
			fail(line, "column " + std::to_string(col + 1) + " (" + columns[col] + "): expected an unsigned " +
					   std::to_string(sizeof(T) * 8) + "-bit integer, found '" + std::string(s.substr(0, 40)) + "'");
		return v;
	}

	// The path column: plain, or quoted with "" for a quote, possibly over several lines.
	void read_path(std::string_view s, const llmcache_access &a, uint64_t row_line)
	{
		path_.clear();
		if (!s.starts_with('"')) {
			if (s.find_first_of(",\"") != std::string_view::npos)
				fail(row_line, "column 8 (path): expected a path with no comma or quote unless it is quoted "
					       "(\"a,b\"), or too many columns");
			path_.assign(s);
		} else {
			size_t i = 1;
			for (;;) {
				size_t q = s.find('"', i);
				if (q == std::string_view::npos) {
					path_.append(s.substr(i));
					path_.push_back('\n');
					if (path_.size() > max_path)
						fail(row_line, "column 8 (path): a quoted path longer than 4096 bytes: expected a "
							       "closing quote (\"\") within 4096 bytes");
					if (!next_line(s))
						fail(row_line, "column 8 (path): expected a closing quote before the end of the file");
					i = 0;
					continue;
				}
				path_.append(s.substr(i, q - i));
				if (q + 1 < s.size() && s[q + 1] == '"') {
					path_.push_back('"');
					i = q + 2;
					continue;
				}
				if (q + 1 != s.size())
					fail(row_line, "column 8 (path): expected the end of the line after the closing quote");
				break;
			}
		}
		if (path_.size() > max_path)
			fail(row_line, "column 8 (path): a path of " + std::to_string(path_.size()) +
					       " bytes; paths are at most 4096 bytes");
		if (path_.empty())
			return;
		FileKey key{a.dev, a.inode};
		if (key == last_key_ && path_ == last_path_)
			return;
		paths_[key] = path_;
		last_key_ = key;
		last_path_ = path_;
	}

	std::unique_ptr<Input> in_;
	uint64_t line_no_ = 0, row_line_ = 0;
	uint32_t flags_ = 0;
	PathMap paths_;
	std::string path_, last_path_;
	FileKey last_key_{~0u, ~0ULL};
};

class CsvWriter final : public Writer {
public:
	explicit CsvWriter(const std::string &path) : out_(path)
	{
		out_.write(header8);
		out_.write("\n", 1);
	}

	~CsvWriter() override
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
		char buf[160];
		char *p = buf, *end = buf + sizeof buf;
		auto num = [&](uint64_t v) {
			p = std::to_chars(p, end - 1, v).ptr; // 20 digits at most: never fails here
			*p++ = ',';
		};
		num(a.time_ns);
		num(a.pid);
		num(a.dev);
		num(a.inode);
		num(a.first_block);
		num(a.nr_blocks);
		std::string_view op = op_name(a.op);
		std::memcpy(p, op.data(), op.size());
		p += op.size();
		*p++ = ',';
		out_.write(buf, size_t(p - buf));
		uint32_t i = files_.find({a.dev, a.inode});
		if (i != FileIndex::npos)
			out_.write(quoted_[i]);
		out_.write("\n", 1);
	}

	void name(uint32_t dev, uint64_t inode, std::string_view path) override
	{
		bool added;
		uint32_t i = files_.intern({dev, inode}, &added);
		if (added)
			quoted_.push_back(quote(path));
		else
			quoted_[i] = quote(path);
	}

	void set_flags(uint32_t flags) override { flags_ = flags; }

	void close() override
	{
		if (closed_)
			return;
		closed_ = true;
		if (flags_)
			out_.write(flags_line(flags_) + "\n");
		out_.close();
	}

private:
	static std::string quote(std::string_view path)
	{
		if (path.find_first_of(",\"\r\n") == std::string_view::npos)
			return std::string(path);
		std::string q = "\"";
		for (char c : path) {
			if (c == '"')
				q.push_back('"');
			q.push_back(c);
		}
		q.push_back('"');
		return q;
	}

	Output out_;
	FileIndex files_;
	std::vector<std::string> quoted_;
	uint32_t flags_ = 0;
	bool closed_ = false;
	int unwinding_ = std::uncaught_exceptions(); // exceptions in flight when made: more at destruction is an error
};

} // namespace

std::unique_ptr<Reader> make_csv_reader(std::unique_ptr<Input> in) { return std::make_unique<CsvReader>(std::move(in)); }
std::unique_ptr<Writer> make_csv_writer(const std::string &path) { return std::make_unique<CsvWriter>(path); }

} // namespace llmcache::trace::detail
