// SPDX-License-Identifier: MIT
// llmtrace: record the file blocks an application reads with BPF, summarise and convert traces.
// Each subcommand lives in its own file and is dispatched from here.
#include <cstdio>
#include <cstring>

int cmd_record(int argc, char **argv);  // record.cpp
int cmd_stat(int argc, char **argv);    // stat.cpp
int cmd_convert(int argc, char **argv); // convert.cpp

namespace {

struct Command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); // argv[0] is the subcommand's name
};

const Command commands[] = {
	{"record", "record the blocks that a process, a cgroup or a command reads (needs root)", cmd_record},
	{"stat", "summarise a trace: files, footprint, the classes the policy core finds, loops", cmd_stat},
	{"convert", "convert a trace between native, csv, oracleGeneral and strace text", cmd_convert},
};

void usage(FILE *out)
{
	std::fputs("Usage: llmtrace COMMAND [options]\n\nCommands:\n", out);
	for (const auto &c : commands)
		std::fprintf(out, "  %-8s %s\n", c.name, c.summary);
	std::fputs("\nRun `llmtrace COMMAND --help` for a command's options.\n\n"
		   "EXAMPLES\n"
		   "  sudo llmtrace record -o app.trace -- ./app --model model.gguf\n"
		   "  llmtrace stat app.trace\n"
		   "  llmtrace convert app.trace app.csv --to csv\n"
		   "  llmreplay app.trace --policy llm,lru --cache 50%\n",
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
	std::fprintf(stderr, "llmtrace: unknown command '%s' (see llmtrace --help)\n", argv[1]);
	return 2;
}
