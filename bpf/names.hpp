// SPDX-License-Identifier: MIT
// Naming the files the BPF program reports: it sends the dentry names from a file up to the root of its
// file system; the mount table (/proc/self/mountinfo) says where that file system is mounted. Pure
// parsing helpers, so that unit tests can call them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmtrace {

// Userspace st_dev encoding of a device number (the kernel's new_encode_dev), as the trace stores it.
uint32_t encode_dev(uint32_t major, uint32_t minor);

// "4KiB", "16MiB": a power of two of at least 4096 bytes (a BPF ring buffer's size). Throws
// std::invalid_argument with the reason otherwise.
uint64_t parse_ring_size(const std::string &text);

struct Mount {
	uint32_t dev = 0;       // encode_dev()
	std::string root;       // the directory of the file system that is mounted ("/" for all of it)
	std::string mountpoint; // where
};

// One line of /proc/PID/mountinfo (octal escapes such as \040 decoded); false if it is malformed.
bool parse_mountinfo_line(std::string_view line, Mount &out);

class MountTable {
public:
	explicit MountTable(std::vector<Mount> mounts = {}) : mounts_(std::move(mounts)) {}
	// /proc/self/mountinfo, or an empty table if it cannot be read.
	static MountTable load(const std::string &path = "/proc/self/mountinfo");
	// The absolute path of a file of dev whose path inside its file system is fs_path ("/a/b"): under the
	// first mount of dev that shows it; fs_path itself when no mount does.
	std::string resolve(uint32_t dev, const std::string &fs_path) const;

private:
	std::vector<Mount> mounts_;
};

// path is prefix or under it, by whole components: "/m/x" is under "/m" and "/", "/mx" is not.
bool path_under(std::string_view path, std::string_view prefix);

// "/" + names joined by '/', leaf first in names (the order the BPF program walks them).
std::string join_reversed(const std::vector<std::string> &names_leaf_first, bool truncated);

} // namespace llmtrace
