// SPDX-License-Identifier: MIT
// llmtrace: record the file blocks an application reads with BPF, summarise and convert traces.
// Each subcommand lives in its own file; llmcache::cli::dispatch answers --help and --version and
// checks that stdout took what was printed.
#include "util/subcommands.hpp"

int cmd_record(int argc, char **argv);  // record.cpp
int cmd_stat(int argc, char **argv);    // stat.cpp
int cmd_convert(int argc, char **argv); // convert.cpp

int main(int argc, char **argv)
{
	static const llmcache::cli::Subcommand commands[] = {
		{"record", "record the blocks that a process, a cgroup or a command reads (needs root)", cmd_record},
		{"stat", "summarise a trace: files, footprint, the classes the policy core finds, loops", cmd_stat},
		{"convert", "convert a trace between native, csv, oracleGeneral and strace text", cmd_convert},
	};
	return llmcache::cli::dispatch("llmtrace", commands,
				       "  sudo llmtrace record -o app.trace -- ./app --model model.gguf\n"
				       "  llmtrace stat app.trace\n"
				       "  llmtrace convert app.trace app.csv --to csv\n"
				       "  llmreplay app.trace --policies llm,lru --sizes 50%\n",
				       argc, argv);
}
