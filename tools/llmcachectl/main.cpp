// SPDX-License-Identifier: MIT
// llmcachectl: llmcache's control tool. Each subcommand lives in its own file. Whatever a subcommand
// printed must have reached stdout: a write error (a full disk, > /dev/full) fails the command
// (llmcache::cli::dispatch checks it, and answers --version).
#include "util/subcommands.hpp"


int cmd_size(int argc, char **argv);       // size.cpp
int cmd_register(int argc, char **argv);   // kmod.cpp
int cmd_unregister(int argc, char **argv); // kmod.cpp
int cmd_set(int argc, char **argv);        // kmod.cpp
int cmd_set_file(int argc, char **argv);   // kmod.cpp
int cmd_auto(int argc, char **argv);       // control.cpp
int cmd_kv(int argc, char **argv);         // kv.cpp
int cmd_status_routed(int argc, char **argv); // daemon_status.cpp: the module's status, else llmcached's
int cmd_loops_routed(int argc, char **argv);   // daemon_status.cpp: the module's loops, else llmcached's

int main(int argc, char **argv)
{
	static const llmcache::cli::Subcommand commands[] = {
		{"size", "the sizing rule: the loop a cache sustains, or the cache a loop needs", cmd_size},
		{"status", "llmcache.ko or llmcached --mode=bpf: settings, statistics, files (--json)", cmd_status_routed},
		{"register", "register files with llmcache.ko (root)", cmd_register},
		{"unregister", "unregister files from llmcache.ko (root)", cmd_unregister},
		{"set", "set llmcache.ko's tunables: pin_budget=512MiB bw=1GB/s t=100ms (root)", cmd_set},
		{"set-file", "set registered files' options: --no-pin --no-drop --no-protect --no-read-ahead --pin-limit (root)", cmd_set_file},
		{"loops", "llmcache.ko or llmcached --mode=bpf: per-loop N, period, S_min, pinned, deficit, stall (--json)", cmd_loops_routed},
		{"auto", "register the large files of a process or cgroup automatically (root)", cmd_auto},
		{"kv", "the KV service: `kv status` lists llmcached's sessions and pool statistics", cmd_kv},
	};
	const int r = llmcache::cli::dispatch("llmcachectl", commands,
				       "  llmcachectl size --device watch\n"
				       "  llmcachectl size --loop 600MB --bw 1GB/s --cache 512MiB --json\n"
				       "  llmcachectl status --json\n"
				       "  llmcachectl kv status --json\n",
				       argc, argv);
	return r; // dispatch() has checked that stdout took what was printed
}
