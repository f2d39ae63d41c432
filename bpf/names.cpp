// SPDX-License-Identifier: MIT
#include "names.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "util/units.hpp"

namespace llmtrace {

uint64_t parse_ring_size(const std::string &text)
{
	uint64_t n = llmcache::units::parse_bytes(text);
	if (n < 4096 || n > max_ring_bytes || (n & (n - 1)))
		throw std::invalid_argument("'" + text + "' is not a power of two from 4KiB to 2GiB (e.g. 4KiB, 16MiB)");
	return n;
}

uint32_t parse_pid(const std::string &text)
{
	uint64_t v = 0;
	bool ok = !text.empty() && text.size() <= 7;
	for (char c : text)
		if (c < '0' || c > '9')
			ok = false;
		else
			v = v * 10 + uint64_t(c - '0');
	if (!ok || v < 1 || v > 4194304)
		throw std::invalid_argument("'" + text + "' is not a process id (a whole number from 1 to 4194304)");
	return uint32_t(v);
}

std::string load_failure(int err, const std::string &log, uint64_t ring_bytes)
{
	const std::string why = std::strerror(err < 0 ? -err : err);
	// libbpf names what failed: "libbpf: map 'events': failed to create: ..." or "libbpf: prog 'x': BPF
	// program load failed: ...", "libbpf: prog 'x': failed to attach: ...".
	std::string what;
	std::istringstream in(log);
	for (std::string line; what.empty() && std::getline(in, line);)
		if ((line.find("map '") != line.npos || line.find("prog '") != line.npos) && line.find("fail") != line.npos)
			what = line.rfind("libbpf: ", 0) == 0 ? line.substr(8) : line;
	while (!what.empty() && (what.back() == '\n' || what.back() == ' '))
		what.pop_back();
	if (what.find("map 'events'") != what.npos)
		return "failed to create the BPF ring buffer of " + llmcache::units::format_bytes(ring_bytes) + ": " + why +
		       ": lower --ring-size";
	const bool denied = err == -EACCES || err == -EPERM || err == EACCES || err == EPERM;
	return "failed to load the BPF program: the kernel refused it: " + why + (what.empty() ? "" : " (" + what + ")") +
	       ". BPF itself works here, so this is a bug of this llmtrace with this kernel" +
	       (denied ? " (or a kernel lockdown that forbids what the program reads)" : "") +
	       ": please report it with the verifier's log (LLMTRACE_DEBUG=1 prints it)";
}

namespace {

bool octal(char c) { return c >= '0' && c <= '7'; }

std::string unescape(const std::string &s)
{
	std::string o;
	for (size_t i = 0; i < s.size(); i++)
		if (s[i] == '\\' && i + 3 < s.size() && octal(s[i + 1]) && octal(s[i + 2]) && octal(s[i + 3])) {
			o += char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
			i += 3;
		} else
			o += s[i];
	return o;
}

} // namespace

bool parse_mountinfo_line(std::string_view line, Mount &out)
{
	// id parent major:minor root mountpoint options ... - fstype source superoptions
	std::istringstream in{std::string(line)};
	std::string id, parent, devs, root, mp;
	unsigned ma, mi;
	char colon;
	if (!(in >> id >> parent >> devs >> root >> mp))
		return false;
	std::istringstream d(devs);
	if (!(d >> ma >> colon >> mi) || colon != ':' || root.empty() || root[0] != '/' || mp.empty() || mp[0] != '/')
		return false;
	out.dev = llmcache_encode_dev(ma, mi);
	out.root = unescape(root);
	out.mountpoint = unescape(mp);
	return true;
}

MountTable MountTable::load(const std::string &path)
{
	std::ifstream in(path);
	std::vector<Mount> mounts;
	Mount m;
	for (std::string line; std::getline(in, line);)
		if (parse_mountinfo_line(line, m))
			mounts.push_back(m);
	return MountTable(std::move(mounts));
}

std::string MountTable::resolve(uint32_t dev, const std::string &fs_path) const
{
	for (const Mount &m : mounts_) {
		if (m.dev != dev)
			continue;
		std::string rest;
		if (m.root == "/")
			rest = fs_path;
		else if (fs_path == m.root || fs_path.starts_with(m.root + "/"))
			rest = fs_path.substr(m.root.size());
		else
			continue;
		if (m.mountpoint == "/")
			return rest.empty() ? "/" : rest;
		return m.mountpoint + rest;
	}
	return fs_path;
}

bool path_under(std::string_view path, std::string_view prefix)
{
	return path.starts_with(prefix) &&
	       (path.size() == prefix.size() || prefix.ends_with('/') || path[prefix.size()] == '/');
}

std::string join_reversed(const std::vector<std::string> &names, bool truncated)
{
	std::string p = truncated ? "..." : "";
	for (auto it = names.rbegin(); it != names.rend(); ++it)
		p += "/" + *it;
	return p.empty() ? "/" : p;
}

} // namespace llmtrace
