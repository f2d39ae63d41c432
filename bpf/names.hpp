// SPDX-License-Identifier: MIT
// Naming the files the BPF program reports: it sends the dentry names from a file up to the root of its
// file system; the mount table (/proc/self/mountinfo) says where that file system is mounted. Also the
// feed's options (ring size, process ids) and what to say when the kernel refuses the program. Pure
// helpers, so that unit tests can call them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../include/uapi/llmcache.h"

namespace llmtrace {

// The largest BPF ring buffer: its map's max_entries is 32 bits, so 2 GiB is the largest power of two.
constexpr uint64_t max_ring_bytes = uint64_t(1) << 31;

// "4KiB", "16MiB": a power of two from 4096 bytes to max_ring_bytes (a BPF ring buffer's size). Throws
// std::invalid_argument with the reason otherwise.
uint64_t parse_ring_size(const std::string &text);

// A process id as the user wrote it: decimal digits only, 1 to 4194304 (PID_MAX_LIMIT). Throws
// std::invalid_argument otherwise ("-5" is not read as 4294967291).
uint32_t parse_pid(const std::string &text);

// What to tell the user when libbpf could not load or attach the feed's object, whose hooks this kernel
// has: err is libbpf's -errno, log what libbpf warned meanwhile. The ring buffer map that could not be
// created is named with --ring-size; anything else is the kernel refusing a program (the verifier), a
// bug to report, never "BPF is missing" (which Feed says before it loads: see feed.cpp).
std::string load_failure(int err, const std::string &log, uint64_t ring_bytes);

struct Mount {
	uint32_t dev = 0;       // llmcache_encode_dev()
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
