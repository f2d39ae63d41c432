// SPDX-License-Identifier: MIT
// What llmcachectl's kernel-module commands share (kmod.cpp, control.cpp, daemon_status.cpp): sysfs
// reads, the device, the errors they report; and (json.hpp) the JSON every subcommand's --json prints.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <boost/program_options/errors.hpp>

#include "json.hpp"

namespace llmcache::kmod {

// A failure to report as "llmcachectl CMD: what" with exit status 1.
struct Failure {
	std::string what;
};

extern const std::string sysfs; // LLMCACHE_SYSFS_DIR

std::string read_value(const std::string &name); // one sysfs value, newline stripped; throws Failure
void require_loaded();                            // throws Failure naming what to do
int open_device();                                // /dev/llmcache; throws Failure (not loaded, not root)
std::vector<std::string> file_ids(); // registered files' ids, in order

// Runs subcommand cmd's body: its exit status, or 2 after a usage error and 1 after a Failure, each
// reported on stderr.
template <class Body> int report_errors(const std::string &cmd, Body body)
{
	try {
		return body();
	} catch (const boost::program_options::error &e) {
		std::fprintf(stderr, "llmcachectl %s: %s (see llmcachectl %s --help)\n", cmd.c_str(), e.what(), cmd.c_str());
		return 2;
	} catch (const Failure &f) {
		std::fprintf(stderr, "llmcachectl %s: %s\n", cmd.c_str(), f.what.c_str());
		return 1;
	}
}

} // namespace llmcache::kmod
