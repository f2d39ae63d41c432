// SPDX-License-Identifier: MIT
// llmcachectl: llmcache's control tool. Each subcommand lives in its own file and is dispatched from here.
#include <cstdio>
#include <cstring>

int cmd_size(int argc, char **argv);       // size.cpp
int cmd_status(int argc, char **argv);     // kmod.cpp
int cmd_register(int argc, char **argv);   // kmod.cpp
int cmd_unregister(int argc, char **argv); // kmod.cpp
int cmd_set(int argc, char **argv);        // kmod.cpp
int cmd_kv(int argc, char **argv);         // kv.cpp

namespace {

struct Command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); // argv[0] is the subcommand's name
};

const Command commands[] = {
	{"size", "the sizing rule: the loop a cache sustains, or the cache a loop needs", cmd_size},
	{"status", "llmcache.ko: settings, statistics, registered files (--json)", cmd_status},
	{"register", "register files with llmcache.ko (root)", cmd_register},
	{"unregister", "unregister files from llmcache.ko (root)", cmd_unregister},
	{"set", "set llmcache.ko's tunables: pin_budget=512MiB bw=1GB/s t=100ms (root)", cmd_set},
	{"kv", "the KV service: `kv status` lists llmcached's sessions and pool statistics", cmd_kv},
};

void usage(FILE *out)
{
	std::fputs("Usage: llmcachectl COMMAND [options]\n\nCommands:\n", out);
	for (const auto &c : commands)
		std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
	std::fputs("\nRun `llmcachectl COMMAND --help` for a command's options.\n\n"
		   "EXAMPLES\n"
		   "  llmcachectl size --device watch\n"
		   "  llmcachectl size --loop 600MB --bw 1GB/s --cache 512MiB --json\n"
		   "  llmcachectl kv status --json\n",
		   out);
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (const auto &c : commands)
		if (!std::strcmp(argv[1], c.name))
			return c.run(argc - 1, argv + 1);
	std::fprintf(stderr, "llmcachectl: unknown command '%s' (see llmcachectl --help)\n", argv[1]);
	return 2;
}
