// SPDX-License-Identifier: MIT
#include "subcommands.hpp"

#ifndef LLMCACHE_VERSION
#error "LLMCACHE_VERSION is not set: build with the top-level CMakeLists.txt"
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace llmcache::cli {
namespace {

void usage(FILE *out, const char *tool, std::span<const Subcommand> commands, const char *examples)
{
	std::fprintf(out, "Usage: %s COMMAND [options]\n\nCommands:\n", tool);
	for (const auto &c : commands)
		std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
	std::fprintf(out, "\nRun `%s COMMAND --help` for a command's options.\n\nEXAMPLES\n%s", tool, examples);
}

// rc, or 1 with a message when what was printed on stdout did not all reach it (a command that failed
// has said why already).
int written(const char *tool, int rc)
{
	errno = 0;
	if (std::fflush(stdout) == 0 && !std::ferror(stdout))
		return rc;
	if (rc == 0)
		std::fprintf(stderr, "%s: cannot write the output: %s\n", tool, errno ? std::strerror(errno) : "write error");
	return rc ? rc : 1;
}

} // namespace

int dispatch(const char *tool, std::span<const Subcommand> commands, const char *examples, int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr, tool, commands, examples);
		return 2;
	}
	if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
		usage(stdout, tool, commands, examples);
		return written(tool, 0);
	}
	if (!std::strcmp(argv[1], "--version")) {
		std::printf("%s %s\n", tool, LLMCACHE_VERSION);
		return written(tool, 0);
	}
	for (const auto &c : commands)
		if (!std::strcmp(argv[1], c.name))
			return written(tool, c.run(argc - 1, argv + 1));
	std::fprintf(stderr, "%s: unknown command '%s' (see %s --help)\n", tool, argv[1], tool);
	return 2;
}

} // namespace llmcache::cli
