// SPDX-License-Identifier: MIT
#include "subcommands.hpp"

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

} // namespace

int dispatch(const char *tool, std::span<const Subcommand> commands, const char *examples, int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr, tool, commands, examples);
		return 2;
	}
	if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
		usage(stdout, tool, commands, examples);
		return 0;
	}
	for (const auto &c : commands)
		if (!std::strcmp(argv[1], c.name))
			return c.run(argc - 1, argv + 1);
	std::fprintf(stderr, "%s: unknown command '%s' (see %s --help)\n", tool, argv[1], tool);
	return 2;
}

} // namespace llmcache::cli
