// SPDX-License-Identifier: MIT
// What llmcachectl's kernel-module commands share (kmod.cpp, control.cpp): sysfs reads, the device,
// and the errors they report.
#pragma once

#include <string>
#include <vector>

namespace llmcache::kmod {

// A failure to report as "llmcachectl CMD: what" with exit status 1.
struct Failure {
	std::string what;
};

extern const std::string sysfs; // LLMCACHE_SYSFS_DIR

std::string read_value(const std::string &name); // one sysfs value, newline stripped; throws Failure
void require_loaded();                            // throws Failure naming what to do
int open_device();                                // /dev/llmcache; throws Failure (not loaded, not root)
std::string json_string(const std::string &s);
std::vector<std::string> file_ids(); // registered files' ids, in order

} // namespace llmcache::kmod
