// SPDX-License-Identifier: MIT
// The command line of the tools made of subcommands (llmcachectl, llmtrace): `TOOL COMMAND [options]`,
// each command in its own file, `TOOL --help` listing them with the tool's examples.
#pragma once

#include <span>

namespace llmcache::cli {

struct Subcommand {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); // argv[0] is the subcommand's name
};

// Runs the subcommand argv[1] names and returns its exit status; 0 for --help and --version ("TOOL
// VERSION"), 2 when the command is missing or unknown (with the list, or a pointer to --help, on
// stderr). Whatever was printed on stdout must have reached it: else 1, with a message (> /dev/full).
int dispatch(const char *tool, std::span<const Subcommand> commands, const char *examples, int argc, char **argv);

} // namespace llmcache::cli
