// SPDX-License-Identifier: MIT
// Reader of `strace -f -tt -yy` text: turns the file I/O system calls of every traced process into block
// accesses, streaming line by line.
//
// A line is [pid prefix] [timestamp] call. The pid prefix is "[pid  N] " (strace -f to a terminal) or
// "N " (-f -o FILE); without -f the pid comes from a "-ff" file name suffix ".N", else it is 0. The
// timestamp is HH:MM:SS[.frac] (-t, -tt; a step back of more than 12 h is midnight and adds a day),
// SECONDS.frac (-ttt), or absent (time 0). A call is "name(args) = result", or "name(args <unfinished ...>"
// whose arguments and result come later on "<... name resumed>args) = result" of the same pid.
//
// The reader keeps, per process, an fd table: fd -> (file, offset). read/readv/write/writev use and
// advance the offset by the byte count returned; pread64/pwrite64/preadv/pwritev (and preadv2/pwritev2
// unless their offset is -1) use their own offset and leave it; lseek/_llseek set it; open, openat,
// openat2 and creat start at 0; dup, dup2, dup3 and fcntl(F_DUPFD*) copy the entry (the kernel shares the
// offset between the copies; copying it is the approximation); close and close_range drop entries.
// clone/clone3/fork/vfork give the child the parent's table (CLONE_FILES) or a copy, and the parent's
// thread group id (CLONE_THREAD) or its own: records carry the thread group id. With -yy every fd
// argument names its file ("3</path>"), which is authoritative; without it the path comes from open.
//
// An access of n > 0 bytes at offset off covers blocks off>>12 .. (off+n-1)>>12 of the file, whose inode
// is path_inode(path) and dev 0. Failed calls, fds that are not regular files (sockets, pipes,
// anon_inode, /dev, /proc, /sys, memfd) and calls that are not file I/O are skipped. mmap of a regular
// file is remembered for notes(): strace cannot see the page accesses of a mapping. A line that names a
// call of interest but cannot be parsed, and a last line cut before its newline, are TraceErrors. A
// line "# flags: A,B" (written by llmtrace convert --to strace) adds LLMCACHE_TRACE_F_* flags.
//
// Bounds: a line is at most max_line bytes (also a line joined from halves split by "strace: Process N
// attached"); an access is held to record_claim_error() and its end to 2^63 bytes, and a successful
// call at a negative offset is an error, not a record dropped; the fd tables of all processes hold at
// most max_fd_entries entries, since every process may copy a table of up to max_fd entries.
#include <charconv>

#include "io_internal.hpp"

namespace llmcache::trace::detail {
namespace {

enum class Call : uint8_t {
	open, openat, openat2, creat, close, close_range, read, pread, readv, preadv, preadv2, write,
	pwrite, writev, pwritev, pwritev2, lseek, llseek, dup, dup2, dup3, fcntl, mmap, munmap, clone, clone3,
	fork,
};

struct CallName {
	std::string_view name;
	Call call;
	int min_args;
	const char *args; // what the arguments are, for messages
};

constexpr CallName call_names[] = {
	{"read", Call::read, 3, "fd, buffer, count"},
	{"pread64", Call::pread, 4, "fd, buffer, count, offset"},
	{"write", Call::write, 3, "fd, buffer, count"},
	{"pwrite64", Call::pwrite, 4, "fd, buffer, count, offset"},
	{"lseek", Call::lseek, 3, "fd, offset, whence"},
	{"openat", Call::openat, 3, "dirfd, path, flags"},
	{"close", Call::close, 1, "fd"},
	{"readv", Call::readv, 3, "fd, iov, iovcnt"},
	{"writev", Call::writev, 3, "fd, iov, iovcnt"},
	{"preadv", Call::preadv, 4, "fd, iov, iovcnt, offset"},
	{"pwritev", Call::pwritev, 4, "fd, iov, iovcnt, offset"},
	{"preadv2", Call::preadv2, 5, "fd, iov, iovcnt, offset, flags"},
	{"pwritev2", Call::pwritev2, 5, "fd, iov, iovcnt, offset, flags"},
	{"mmap", Call::mmap, 6, "addr, length, prot, flags, fd, offset"},
	{"mmap2", Call::mmap, 6, "addr, length, prot, flags, fd, offset"},
	{"munmap", Call::munmap, 2, "addr, length"},
	{"open", Call::open, 2, "path, flags"},
	{"openat2", Call::openat2, 3, "dirfd, path, how"},
	{"creat", Call::creat, 2, "path, mode"},
	{"close_range", Call::close_range, 3, "first, last, flags"},
	{"_llseek", Call::llseek, 4, "fd, offset, [result], whence"},
	{"dup", Call::dup, 1, "oldfd"},
	{"dup2", Call::dup2, 2, "oldfd, newfd"},
	{"dup3", Call::dup3, 3, "oldfd, newfd, flags"},
	{"fcntl", Call::fcntl, 2, "fd, cmd"},
	{"fcntl64", Call::fcntl, 2, "fd, cmd"},
	{"clone", Call::clone, 0, "flags"},
	{"clone3", Call::clone3, 1, "args, size"},
	{"fork", Call::fork, 0, ""},
	{"vfork", Call::fork, 0, ""},
};

const CallName *lookup(std::string_view name)
{
	for (const auto &c : call_names)
		if (c.name == name)
			return &c;
	return nullptr;
}

constexpr uint64_t ns_per_s = 1000000000ULL;
constexpr uint64_t ns_per_day = 86400 * ns_per_s;
constexpr int64_t max_fd = 1 << 20;
constexpr uint64_t max_fd_entries = uint64_t(1) << 24; // 64 MiB of fd tables
constexpr uint32_t npos = DenseIndex::npos;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s)
{
	while (!s.empty() && s.front() == ' ')
		s.remove_prefix(1);
	while (!s.empty() && s.back() == ' ')
		s.remove_suffix(1);
	return s;
}

bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_'; }
bool is_xdigit(char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

// Characters the scanners stop at; the rest of a line (most of it: buffers, paths) is skipped fast.
struct CharSet {
	bool in[256] = {};
	constexpr CharSet(std::string_view chars)
	{
		for (char c : chars)
			in[static_cast<unsigned char>(c)] = true;
	}
	bool operator()(char c) const { return in[static_cast<unsigned char>(c)]; }
};
constexpr CharSet arg_special("\"<([{)]},"), angle_special("\\\"[]<>");

// From the '"' at s[i], the index of the closing '"' (one not escaped by an odd run of '\\'), or npos.
size_t skip_string(std::string_view s, size_t i)
{
	for (size_t from = i + 1;;) {
		size_t q = s.find('"', from);
		if (q == std::string_view::npos)
			return q;
		size_t b = q;
		while (b > i + 1 && s[b - 1] == '\\')
			b--;
		if ((q - b) % 2 == 0)
			return q;
		from = q + 1;
	}
}

// From the '<' at s[i], the index of the matching '>', or npos. Paths escape '<' and '>'; socket
// descriptions like "TCP:[1.2.3.4:5->6.7.8.9:10]" hold "->" inside brackets.
size_t skip_angle(std::string_view s, size_t i)
{
	int angle = 0, bracket = 0;
	for (; i < s.size(); i++) {
		while (i < s.size() && !angle_special(s[i]))
			i++;
		if (i == s.size())
			break;
		char c = s[i];
		if (c == '\\') {
			i++;
		} else if (c == '"') {
			i = skip_string(s, i);
			if (i == std::string_view::npos)
				return i;
		} else if (c == '[') {
			bracket++;
		} else if (c == ']') {
			bracket--;
		} else if (c == '<' && bracket == 0) {
			angle++;
		} else if (c == '>' && bracket == 0 && --angle == 0) {
			return i;
		}
	}
	return std::string_view::npos;
}

// Undo strace's C-style escapes (\\ \" \n \t ... \ooo \xHH).
void unescape(std::string_view s, std::string &out)
{
	out.clear();
	for (size_t i = 0; i < s.size(); i++) {
		if (s[i] != '\\' || i + 1 == s.size()) {
			out.push_back(s[i]);
			continue;
		}
		char c = s[++i];
		if (c >= '0' && c <= '7') {
			int v = 0;
			for (int n = 0; n < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7'; n++, i++)
				v = v * 8 + (s[i] - '0');
			i--;
			out.push_back(char(v));
		} else if (c == 'x' && i + 1 < s.size() && is_xdigit(s[i + 1])) {
			int v = 0;
			for (int n = 0; n < 2 && i + 1 < s.size() && is_xdigit(s[i + 1]); n++) {
				char h = s[++i];
				v = v * 16 + (is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
			}
			out.push_back(char(v));
		} else {
			static constexpr std::string_view from = "ntrvfabe", to = "\n\t\r\v\f\a\b\x1b";
			size_t k = from.find(c);
			out.push_back(k == std::string_view::npos ? c : to[k]);
		}
	}
}

// A signed decimal or 0x-hex integer filling s.
bool parse_int(std::string_view s, int64_t &v)
{
	bool neg = !s.empty() && s[0] == '-';
	if (neg)
		s.remove_prefix(1);
	int base = 10;
	if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s.remove_prefix(2);
		base = 16;
	}
	uint64_t u;
	auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), u, base);
	if (s.empty() || ec != std::errc() || p != s.data() + s.size())
		return false;
	v = neg ? -int64_t(u) : int64_t(u);
	return true;
}

// "N" or "N<path...>" (also "AT_FDCWD<dir>"): the number and the raw text of the path, if any.
bool parse_fd(std::string_view s, int64_t &fd, std::string_view &path)
{
	size_t lt = s.find('<');
	path = {};
	if (lt != std::string_view::npos) {
		if (s.back() != '>')
			return false;
		std::string_view inner = s.substr(lt + 1, s.size() - lt - 2);
		path = inner.substr(0, inner.find('<')); // "/dev/null<char 1:3>": the device suffix is not path
		s = s.substr(0, lt);
	}
	if (s == "AT_FDCWD") {
		fd = -100;
		return true;
	}
	return parse_int(s, fd);
}

// Whether a path names a file on storage. -yy prints "socket:[N]", "pipe:[N]", "anon_inode:[...]" or
// "TCP:[...]" for other fds; a relative path comes from an open argument without -y.
bool regular_path(std::string_view p)
{
	if (p.starts_with('/'))
		return !p.starts_with("/dev/") && !p.starts_with("/proc/") && !p.starts_with("/sys/") && !p.starts_with("/memfd:");
	return !p.empty() && p.find(":[") == std::string_view::npos && !p.starts_with("anon_inode:");
}

// Mappings that the dynamic loader and libc make for themselves on every program start.
bool loader_mapping(std::string_view prot, std::string_view flags, std::string_view path)
{
	return prot.find("PROT_EXEC") != std::string_view::npos || flags.find("MAP_DENYWRITE") != std::string_view::npos ||
	       path == "/etc/ld.so.cache" || path.starts_with("/usr/lib/locale/") || path.ends_with("/gconv-modules.cache");
}

class StraceReader final : public Reader {
public:
	explicit StraceReader(std::unique_ptr<Input> in) : in_(std::move(in))
	{
		// "strace -ff -o out" writes out.PID: take the pid from the name when lines have none.
		const std::string &n = in_->name();
		size_t dot = n.rfind('.');
		int64_t pid;
		if (dot != std::string::npos && n.find('/', dot) == std::string::npos && parse_int(n.substr(dot + 1), pid) &&
		    pid > 0 && pid < (int64_t(1) << 32))
			default_pid_ = uint32_t(pid);
	}

	bool next(llmcache_access &out) override
	{
		std::string_view line;
		while (next_line(line)) {
			// strace writing to a terminal or stderr puts "strace: Process N attached" in the middle of a
			// line and continues the line on the next one: join the two halves.
			if (size_t m = attach_message(line); m != std::string_view::npos) {
				joined_.assign(line.substr(0, m));
				while (next_line(line)) {
					m = attach_message(line);
					joined_.append(line.substr(0, m));
					if (joined_.size() > max_line)
						fail("a line joined from halves split by \"strace: Process N attached\" is longer than " +
						     std::to_string(max_line) + " bytes: expected strace output");
					if (m == std::string_view::npos)
						break;
				}
				line = joined_;
			}
			if (process(line, out))
				return true;
		}
		return false;
	}

	const PathMap &paths() const override { return paths_; }
	uint32_t flags() const override { return (mmapped_.empty() ? 0 : LLMCACHE_TRACE_F_MMAP_UNSEEN) | flags_; }
	Position position() const override { return {"line", line_no_}; }

	std::vector<std::string> notes() const override
	{
		std::vector<std::string> notes;
		if (!mmapped_.empty()) {
			std::string list;
			for (size_t i = 0; i < mmapped_.size() && i < 5; i++)
				list += (i ? ", " : "") + files_[mmapped_[i]].path;
			if (mmapped_.size() > 5)
				list += " and " + std::to_string(mmapped_.size() - 5) + " more";
			notes.push_back(std::to_string(mmapped_.size()) +
					(mmapped_.size() == 1 ? " regular file was" : " regular files were") + " mmapped (" + list +
					"): strace cannot see page accesses to mmapped memory, so the trace misses them; "
					"record with llmtrace to capture them");
		}
		if (orphans_)
			notes.push_back(std::to_string(orphans_) + " calls resumed without their start (\"<... NAME resumed>\" "
					"with no earlier \"<unfinished ...>\" of that pid) were skipped");
		return notes;
	}

private:
	// An open file description: what open() creates and dup() and fork() share, offset included.
	struct Ofd {
		uint32_t file = npos;
		uint32_t refs = 0;
		uint64_t offset = 0;
	};
	struct Table {
		std::vector<uint32_t> fds; // fd -> index in ofds_, npos when closed
		uint32_t users = 0;
	};
	struct File {
		std::string path;
		uint64_t inode;
		bool regular, named = false, mmapped = false;
	};
	struct Proc {
		uint32_t table, tgid;
	};
	struct Pending {
		const CallName *call;
		std::string text;
	};
	struct Parsed {
		static constexpr int max_args = 8;
		std::string_view args[max_args];
		int nargs = 0;
		int64_t result = 0;
		std::string_view result_path;
	};

	[[noreturn]] void fail(const std::string &what) { throw TraceError(in_->name(), "line", line_no_, what); }

	bool next_line(std::string_view &line)
	{
		bool terminated;
		try {
			if (!in_->next_line(line, terminated))
				return false;
		} catch (const LineTooLong &e) {
			line_no_++;
			fail("line longer than " + std::to_string(max_line) + " bytes (from byte offset " + std::to_string(e.offset) +
			     "): strace prints short lines; is this strace output?");
		}
		line_no_++;
		if (!terminated && !trim(line).empty())
			fail("the file ends in the middle of this line (no newline after it): the strace output was "
			     "cut short; expected a complete line");
		return true;
	}

	// Where "strace: Process N attached|detached" ends a line after other text, or npos.
	static size_t attach_message(std::string_view l)
	{
		if (!l.ends_with(" attached") && !l.ends_with(" detached"))
			return std::string_view::npos;
		size_t m = l.rfind("strace: Process ");
		if (m == std::string_view::npos || m == 0)
			return std::string_view::npos;
		std::string_view pid = l.substr(m + 16, l.size() - 9 - (m + 16));
		int64_t v;
		return parse_int(pid, v) ? m : std::string_view::npos;
	}

	// One line; true when it produced an access in out.
	bool process(std::string_view l, llmcache_access &out)
	{
		if (l.starts_with(flags_prefix)) { // llmtrace's strace text carries the flags of its source
			try {
				flags_ |= parse_flags_line(l);
			} catch (const std::invalid_argument &e) {
				fail(e.what());
			}
			return false;
		}
		size_t i = 0;
		auto skip_spaces = [&] {
			while (i < l.size() && l[i] == ' ')
				i++;
		};
		auto number = [&](uint64_t &v) {
			size_t s = i;
			for (v = 0; i < l.size() && is_digit(l[i]); i++)
				v = v * 10 + uint64_t(l[i] - '0');
			return i > s;
		};
		skip_spaces();
		uint32_t tid = default_pid_ ? default_pid_ : main_pid_;
		uint64_t v;
		if (l.substr(i, 5) == "[pid ") {
			i += 5;
			skip_spaces();
			if (!number(v) || i >= l.size() || l[i] != ']')
				return false;
			tid = uint32_t(v);
			i++;
		} else {
			size_t s = i;
			if (number(v) && i < l.size() && l[i] == ' ')
				tid = uint32_t(v);
			else
				i = s;
		}
		skip_spaces();
		uint64_t time = 0;
		if (i < l.size() && is_digit(l[i]) && !parse_time(l, i, time))
			return false;
		skip_spaces();
		std::string_view body = l.substr(i);
		if (body.starts_with("strace: "))
			return false;
		proc(tid); // learn the pid (a clone's child, the first process) before its pending call is looked up
		if (body.starts_with("<... "))
			return resumed(body.substr(5), tid, time, out);
		if (body.starts_with("+++ ")) {
			exited(tid);
			return false;
		}
		size_t n = 0;
		while (n < body.size() && is_word(body[n]))
			n++;
		if (n == 0 || n == body.size() || body[n] != '(')
			return false; // signals, strace's own messages, anything that is not a call
		const CallName *call = lookup(body.substr(0, n));
		if (!call)
			return false;
		std::string_view rest = body.substr(n + 1);
		if (unfinished(rest)) {
			pend(tid, call, rest);
			return false;
		}
		return handle(*call, rest, tid, time, out);
	}

	static bool unfinished(std::string_view &rest)
	{
		constexpr std::string_view tag = "<unfinished ...>";
		if (!rest.ends_with(tag))
			return false;
		rest.remove_suffix(tag.size());
		if (rest.ends_with(' '))
			rest.remove_suffix(1);
		return true;
	}

	bool resumed(std::string_view s, uint32_t tid, uint64_t time, llmcache_access &out)
	{
		size_t end = s.find(" resumed>");
		if (end == std::string_view::npos)
			return false;
		const CallName *call = lookup(s.substr(0, end));
		uint32_t *slot = pending_of_.find(tid);
		if (!call) {
			if (slot)
				drop_pending(tid, *slot);
			return false;
		}
		if (!slot || pending_[*slot].call != call) {
			if (slot)
				drop_pending(tid, *slot);
			orphans_++;
			return false;
		}
		std::string_view rest = s.substr(end + 9);
		std::string &text = pending_[*slot].text;
		if (unfinished(rest)) {
			text.append(rest);
			return false;
		}
		scratch_text_.swap(text);
		scratch_text_.append(rest);
		drop_pending(tid, *slot);
		return handle(*call, scratch_text_, tid, time, out);
	}

	void pend(uint32_t tid, const CallName *call, std::string_view text)
	{
		uint32_t *slot = pending_of_.find(tid);
		uint32_t s;
		if (slot) {
			s = *slot;
		} else if (!free_pending_.empty()) {
			s = free_pending_.back();
			free_pending_.pop_back();
			pending_of_.put(tid, s);
		} else {
			s = uint32_t(pending_.size());
			pending_.push_back({});
			pending_of_.put(tid, s);
		}
		if (slot && is_clone(pending_[s].call))
			clones_pending_--;
		pending_[s].call = call;
		pending_[s].text.assign(text);
		if (is_clone(call)) {
			clones_pending_++;
			clone_parent_ = tid;
		}
	}

	static bool is_clone(const CallName *c) { return c->call == Call::clone || c->call == Call::clone3 || c->call == Call::fork; }

	void drop_pending(uint32_t tid, uint32_t slot)
	{
		if (is_clone(pending_[slot].call))
			clones_pending_--;
		pending_of_.erase(tid);
		free_pending_.push_back(slot);
	}

	bool parse_time(std::string_view l, size_t &i, uint64_t &time)
	{
		uint64_t a = 0;
		for (; i < l.size() && is_digit(l[i]); i++)
			a = a * 10 + uint64_t(l[i] - '0');
		bool clock = i < l.size() && l[i] == ':';
		uint64_t secs = a;
		if (clock) {
			uint64_t parts[2] = {0, 0};
			for (auto &p : parts) {
				if (i >= l.size() || l[i] != ':' || i + 1 >= l.size() || !is_digit(l[i + 1]))
					return false;
				for (i++; i < l.size() && is_digit(l[i]); i++)
					p = p * 10 + uint64_t(l[i] - '0');
			}
			secs = (a * 60 + parts[0]) * 60 + parts[1];
		}
		uint64_t frac = 0;
		if (i < l.size() && l[i] == '.') {
			uint64_t scale = ns_per_s;
			for (i++; i < l.size() && is_digit(l[i]); i++)
				if (scale > 1)
					frac += uint64_t(l[i] - '0') * (scale /= 10);
		}
		if (i < l.size() && l[i] != ' ')
			return false;
		time = secs * ns_per_s + frac;
		if (clock) {
			if (time + ns_per_day / 2 < last_clock_)
				day_++;
			last_clock_ = time;
			time += day_ * ns_per_day;
		}
		return true;
	}

	// Splits "args) = result ..." (the text after "name(") at top-level commas.
	void split(const CallName &call, std::string_view s, Parsed &p)
	{
		auto bad = [&](const std::string &what) {
			fail("cannot parse this " + std::string(call.name) + "() call: expected " + what);
		};
		size_t i = 0, start = 0;
		int depth = 0;
		auto push = [&](size_t end) {
			if (p.nargs < Parsed::max_args)
				p.args[p.nargs] = trim(s.substr(start, end - start));
			p.nargs++;
		};
		for (; i < s.size(); i++) {
			while (i < s.size() && !arg_special(s[i]))
				i++;
			if (i == s.size())
				break;
			char c = s[i];
			if (c == '"') {
				if ((i = skip_string(s, i)) == std::string_view::npos)
					bad("a closing '\"' of a string argument");
			} else if (c == '<') {
				if ((i = skip_angle(s, i)) == std::string_view::npos)
					bad("a closing '>' after a file descriptor's path");
			} else if (c == '(' || c == '[' || c == '{') {
				depth++;
			} else if (c == ']' || c == '}') {
				depth--;
			} else if (c == ')') {
				if (depth == 0)
					break;
				depth--;
			} else if (c == ',' && depth == 0) {
				push(i);
				start = i + 1;
			}
		}
		if (i >= s.size())
			bad("')' closing the arguments (" + std::string(call.args) + ")");
		if (p.nargs > 0 || !trim(s.substr(start, i - start)).empty())
			push(i);
		if (p.nargs < call.min_args)
			bad(std::to_string(call.min_args) + " arguments (" + call.args + "), found " + std::to_string(p.nargs));
		for (i++; i < s.size() && s[i] == ' '; i++)
			;
		if (i >= s.size() || s[i] != '=')
			bad("' = <result>' after the arguments");
		for (i++; i < s.size() && s[i] == ' '; i++)
			;
		std::string_view r = s.substr(i);
		if (r.starts_with('?')) {
			p.result = -1; // no result: the process exited inside the call
			return;
		}
		size_t e = 0;
		while (e < r.size() && r[e] != ' ' && r[e] != '<')
			e++;
		if (!parse_int(r.substr(0, e), p.result))
			bad("a number as the result, found '" + std::string(r.substr(0, 40)) + "'");
		if (e < r.size() && r[e] == '<') {
			size_t close = skip_angle(r, e);
			if (close == std::string_view::npos)
				bad("a closing '>' after the path of the result");
			std::string_view inner = r.substr(e + 1, close - e - 1);
			p.result_path = inner.substr(0, inner.find('<'));
		}
	}

	int64_t arg_int(const CallName &call, const Parsed &p, int k, bool brackets = false)
	{
		std::string_view s = p.args[k];
		if (brackets && s.size() >= 2 && s.front() == '[' && s.back() == ']')
			s = s.substr(1, s.size() - 2);
		int64_t v;
		if (!parse_int(s, v))
			fail("cannot parse this " + std::string(call.name) + "() call: expected a number as argument " +
			     std::to_string(k + 1) + " (" + call.args + "), found '" + std::string(s.substr(0, 40)) + "'");
		return v;
	}

	int64_t arg_fd(const CallName &call, const Parsed &p, int k, std::string_view &path)
	{
		int64_t fd;
		if (!parse_fd(p.args[k], fd, path))
			fail("cannot parse this " + std::string(call.name) + "() call: expected a file descriptor as argument " +
			     std::to_string(k + 1) + " (" + call.args + "), found '" + std::string(p.args[k].substr(0, 60)) + "'");
		return fd;
	}

	Proc proc(uint32_t tid)
	{
		if (uint64_t *v = procs_.find(tid))
			return unpack(*v);
		// A new pid while exactly one clone is in flight: its child, running before the clone returned.
		// clone_parent_ is the tid of the latest clone to start; if that one was dropped while an older
		// one is still in flight, the parent is not known and the pid starts a process of its own.
		if (clones_pending_ == 1 && clone_parent_ != tid) {
			Proc parent = proc(clone_parent_);
			const uint32_t *clone = pending_of_.find(clone_parent_);
			if (clone && is_clone(pending_[*clone].call)) {
				cloned(parent, tid, pending_[*clone].text);
				return unpack(*procs_.find(tid));
			}
		}
		// strace -f without -o prints no pid while it traces one process. The first pid it prints that
		// is not a child seen being cloned is that process; lines without a pid are its lines from then on.
		if (uint64_t *v = procs_.find(0); v && tid != 0 && main_pid_ == 0 && default_pid_ == 0) {
			Proc first = unpack(*v);
			tables_[first.table].users++;
			main_pid_ = tid;
			if (uint32_t *slot = pending_of_.find(0)) {
				pending_of_.put(tid, *slot);
				pending_of_.erase(0);
				if (clone_parent_ == 0)
					clone_parent_ = tid;
			}
			return unpack(procs_.put(tid, pack({first.table, tid})));
		}
		return unpack(procs_.put(tid, pack({new_table(), tid})));
	}
	static uint64_t pack(Proc p) { return uint64_t(p.table) << 32 | p.tgid; }
	static Proc unpack(uint64_t v) { return {uint32_t(v >> 32), uint32_t(v)}; }

	uint32_t new_table()
	{
		uint32_t t;
		if (!free_tables_.empty()) {
			t = free_tables_.back();
			free_tables_.pop_back();
		} else {
			t = uint32_t(tables_.size());
			tables_.emplace_back();
		}
		tables_[t].users = 1;
		return t;
	}

	void release_table(uint32_t t)
	{
		if (--tables_[t].users > 0)
			return;
		for (uint32_t o : tables_[t].fds)
			unref(o);
		fd_entries_ -= tables_[t].fds.size();
		std::vector<uint32_t>().swap(tables_[t].fds);
		free_tables_.push_back(t);
	}

	void unref(uint32_t o)
	{
		if (o != npos && --ofds_[o].refs == 0)
			free_ofds_.push_back(o);
	}

	void exited(uint32_t tid)
	{
		if (uint32_t *slot = pending_of_.find(tid))
			drop_pending(tid, *slot);
		if (uint64_t *v = procs_.find(tid)) {
			release_table(unpack(*v).table);
			procs_.erase(tid);
		}
	}

	// The open file description of fd, or nullptr.
	Ofd *ofd(uint32_t table, int64_t fd)
	{
		auto &fds = tables_[table].fds;
		if (fd < 0 || size_t(fd) >= fds.size() || fds[size_t(fd)] == npos)
			return nullptr;
		return &ofds_[fds[size_t(fd)]];
	}

	// Points fd at description o (npos closes it); returns it.
	Ofd *install(uint32_t table, int64_t fd, uint32_t o)
	{
		if (fd < 0 || fd >= max_fd)
			return nullptr;
		auto &fds = tables_[table].fds;
		if (size_t(fd) >= fds.size()) {
			fd_entries_ += size_t(fd) + 1 - fds.size();
			if (fd_entries_ > max_fd_entries)
				fail("the fd tables of the traced processes would hold more than " + std::to_string(max_fd_entries) +
				     " entries (fd " + std::to_string(fd) + " here): is this strace output?");
			fds.resize(size_t(fd) + 1, npos);
		}
		if (o != npos)
			ofds_[o].refs++;
		unref(fds[size_t(fd)]);
		fds[size_t(fd)] = o;
		return o == npos ? nullptr : &ofds_[o];
	}

	uint32_t new_ofd(uint32_t file)
	{
		uint32_t o;
		if (!free_ofds_.empty()) {
			o = free_ofds_.back();
			free_ofds_.pop_back();
		} else {
			o = uint32_t(ofds_.size());
			ofds_.emplace_back();
		}
		ofds_[o] = {file, 0, 0};
		return o;
	}

	// The file of a path as strace escaped it.
	uint32_t file_of(std::string_view raw)
	{
		if (raw.find('\\') == std::string_view::npos)
			return intern(raw);
		unescape(raw, scratch_path_);
		return intern(scratch_path_);
	}

	uint32_t intern(std::string_view path)
	{
		uint64_t h = path_inode(path);
		uint32_t f = files_index_.find(h, [&](uint32_t j) { return files_[j].path == path; });
		if (f != npos)
			return f;
		f = uint32_t(files_.size());
		files_.push_back({std::string(path), h, regular_path(path)});
		files_index_.insert(h, f);
		return f;
	}

	// The fd's description, made or corrected with the path that -yy printed next to it (a different
	// file means the trace missed its open: start again at offset 0).
	Ofd *fd_with_path(uint32_t table, int64_t fd, std::string_view raw)
	{
		Ofd *o = ofd(table, fd);
		if (raw.empty())
			return o;
		if (o && o->file != npos && files_[o->file].path == raw && raw.find('\\') == std::string_view::npos)
			return o; // the usual case: the same file as before
		uint32_t f = file_of(raw);
		if (o && o->file == f)
			return o;
		return install(table, fd, new_ofd(f));
	}

	bool emit(llmcache_access &out, uint32_t file, uint64_t off, int64_t len, uint8_t op, uint64_t time, uint32_t tgid)
	{
		if (file == npos || len <= 0 || !files_[file].regular)
			return false;
		File &f = files_[file];
		if (off > uint64_t(INT64_MAX) - uint64_t(len))
			fail("an access of " + std::to_string(len) + " bytes at offset " + std::to_string(off) +
			     " ends past 2^63 bytes, the largest file Linux allows: the strace output is corrupt");
		out = llmcache_access{};
		out.time_ns = time;
		out.inode = f.inode;
		out.first_block = off >> LLMCACHE_BLOCK_SHIFT;
		out.pid = tgid;
		uint64_t blocks = ((off + uint64_t(len) - 1) >> LLMCACHE_BLOCK_SHIFT) - out.first_block + 1;
		if (blocks > max_record_blocks)
			fail("an access of " + std::to_string(len) + " bytes: one call moves at most " +
			     std::to_string(uint64_t(max_record_blocks) * LLMCACHE_BLOCK_SIZE) +
			     " bytes (Linux: under 2 GiB); the strace output is corrupt");
		out.nr_blocks = uint32_t(blocks);
		out.op = op;
		if (!f.named) {
			f.named = true;
			paths_[{0, f.inode}] = f.path;
		}
		return true;
	}

	// The path argument of an open call, made absolute with the directory fd's path when -y gave it.
	std::string open_path(const Parsed &p, int path_arg, std::string_view dir_raw)
	{
		std::string_view q = p.args[path_arg];
		if (q.size() < 2 || q.front() != '"')
			return {};
		size_t close = skip_string(q, 0);
		std::string path;
		unescape(q.substr(1, (close == std::string_view::npos ? q.size() : close) - 1), path);
		if (path.starts_with('/') || dir_raw.empty())
			return path;
		std::string dir;
		unescape(dir_raw, dir);
		return dir + "/" + path;
	}

	bool handle(const CallName &call, std::string_view text, uint32_t tid, uint64_t time, llmcache_access &out)
	{
		Parsed p;
		split(call, text, p);
		Proc pr = proc(tid);
		std::string_view path;
		Ofd *st;
		int64_t r = p.result;
		switch (call.call) {
		case Call::read:
		case Call::readv:
		case Call::write:
		case Call::writev:
			st = fd_with_path(pr.table, arg_fd(call, p, 0, path), path);
			if (!st || r <= 0)
				return false;
			st->offset += uint64_t(r);
			return emit(out, st->file, st->offset - uint64_t(r), r, op_of(call.call), time, pr.tgid);
		case Call::pread:
		case Call::pwrite:
		case Call::preadv:
		case Call::pwritev:
		case Call::preadv2:
		case Call::pwritev2: {
			st = fd_with_path(pr.table, arg_fd(call, p, 0, path), path);
			int64_t off = arg_int(call, p, 3);
			if (!st || r <= 0)
				return false;
			if (off == -1 && (call.call == Call::preadv2 || call.call == Call::pwritev2)) {
				st->offset += uint64_t(r);
				off = int64_t(st->offset) - r;
			}
			if (off < 0 && st->file != npos && files_[st->file].regular) // devices with unsigned offsets aside
				fail("cannot parse this " + std::string(call.name) + "() call: it succeeded at offset " +
				     std::to_string(off) + ", but a file offset is never negative");
			return emit(out, st->file, uint64_t(off), r, op_of(call.call), time, pr.tgid);
		}
		case Call::lseek:
			st = fd_with_path(pr.table, arg_fd(call, p, 0, path), path);
			arg_int(call, p, 1);
			if (st && r >= 0)
				st->offset = uint64_t(r);
			return false;
		case Call::llseek: {
			st = fd_with_path(pr.table, arg_fd(call, p, 0, path), path);
			int64_t pos = r == 0 ? arg_int(call, p, 2, true) : -1;
			if (st && pos >= 0)
				st->offset = uint64_t(pos);
			return false;
		}
		case Call::open:
		case Call::creat:
		case Call::openat:
		case Call::openat2: {
			bool at = call.call == Call::openat || call.call == Call::openat2;
			std::string_view dir;
			if (at)
				arg_fd(call, p, 0, dir);
			if (r < 0)
				return false;
			uint32_t file = npos;
			if (!p.result_path.empty())
				file = file_of(p.result_path);
			else if (std::string resolved = open_path(p, at ? 1 : 0, dir); !resolved.empty())
				file = intern(resolved);
			install(pr.table, r, new_ofd(file));
			return false;
		}
		case Call::close:
			install(pr.table, arg_fd(call, p, 0, path), npos);
			return false;
		case Call::close_range: {
			int64_t first = arg_int(call, p, 0), last = arg_int(call, p, 1);
			if (r == 0 && p.args[2].find("CLOSE_RANGE_CLOEXEC") == std::string_view::npos)
				for (int64_t fd = std::max<int64_t>(first, 0); fd <= last && size_t(fd) < tables_[pr.table].fds.size(); fd++)
					install(pr.table, fd, npos);
			return false;
		}
		case Call::dup:
		case Call::dup2:
		case Call::dup3:
		case Call::fcntl: {
			int64_t fd = arg_fd(call, p, 0, path);
			if (call.call == Call::fcntl && !p.args[1].starts_with("F_DUPFD"))
				return false;
			if (r < 0 || !fd_with_path(pr.table, fd, path))
				return false;
			install(pr.table, r, tables_[pr.table].fds[size_t(fd)]);
			fd_with_path(pr.table, r, p.result_path);
			return false;
		}
		case Call::mmap: {
			int64_t fd = arg_fd(call, p, 4, path);
			if (fd < 0 || r == -1 || p.args[3].find("MAP_ANONYMOUS") != std::string_view::npos)
				return false;
			st = fd_with_path(pr.table, fd, path);
			if (st && st->file != npos) {
				File &f = files_[st->file];
				if (f.regular && !f.mmapped && !loader_mapping(p.args[2], p.args[3], f.path)) {
					f.mmapped = true;
					mmapped_.push_back(st->file);
				}
			}
			return false;
		}
		case Call::munmap:
			return false;
		case Call::clone:
		case Call::clone3:
		case Call::fork:
			if (r > 0)
				cloned(pr, uint32_t(r), text);
			return false;
		}
		return false;
	}

	static uint8_t op_of(Call c)
	{
		switch (c) {
		case Call::write:
		case Call::writev:
		case Call::pwrite:
		case Call::pwritev:
		case Call::pwritev2:
			return LLMCACHE_OP_WRITE;
		default:
			return LLMCACHE_OP_READ;
		}
	}

	void cloned(Proc parent, uint32_t child, std::string_view text)
	{
		bool files = text.find("CLONE_FILES") != std::string_view::npos;
		bool thread = text.find("CLONE_THREAD") != std::string_view::npos;
		uint32_t table;
		if (files) {
			table = parent.table;
			tables_[table].users++;
		} else {
			table = new_table();
			fd_entries_ += tables_[parent.table].fds.size();
			if (fd_entries_ > max_fd_entries)
				fail("the fd tables of the traced processes would hold more than " + std::to_string(max_fd_entries) +
				     " entries (a clone copies " + std::to_string(tables_[parent.table].fds.size()) +
				     "): is this strace output?");
			tables_[table].fds = tables_[parent.table].fds;
			for (uint32_t o : tables_[table].fds)
				if (o != npos)
					ofds_[o].refs++;
		}
		// The child may have run (and opened files) before its parent's clone returned.
		if (uint64_t *v = procs_.find(child)) {
			uint32_t old = unpack(*v).table;
			for (size_t fd = 0; fd < tables_[old].fds.size(); fd++)
				if (uint32_t o = tables_[old].fds[fd]; o != npos)
					install(table, int64_t(fd), o);
			release_table(old);
		}
		procs_.put(child, pack({table, thread ? parent.tgid : child}));
	}

	std::unique_ptr<Input> in_;
	uint64_t line_no_ = 0;
	uint64_t fd_entries_ = 0; // entries of all fd tables, bounded by max_fd_entries
	uint32_t flags_ = 0;      // from a "# flags:" line
	uint32_t default_pid_ = 0;
	uint64_t day_ = 0, last_clock_ = 0;
	PathMap paths_;
	std::vector<File> files_;
	DenseIndex files_index_;
	std::vector<Table> tables_;
	std::vector<uint32_t> free_tables_;
	std::vector<Ofd> ofds_;
	std::vector<uint32_t> free_ofds_;
	util::FlatMap<uint64_t> procs_; // tid -> table << 32 | tgid
	std::vector<Pending> pending_;
	std::vector<uint32_t> free_pending_;
	util::FlatMap<uint32_t> pending_of_; // tid -> index in pending_
	uint32_t clones_pending_ = 0, clone_parent_ = 0;
	uint32_t main_pid_ = 0; // the pid of lines without one, once known
	std::string joined_;
	std::vector<uint32_t> mmapped_;
	uint64_t orphans_ = 0;
	std::string scratch_path_, scratch_text_;
};

} // namespace

std::unique_ptr<Reader> make_strace_reader(std::unique_ptr<Input> in) { return std::make_unique<StraceReader>(std::move(in)); }

} // namespace llmcache::trace::detail
