// SPDX-License-Identifier: MIT
// llmtrace record: follow a process (-p), a cgroup (-c) or a command it starts (-- CMD) through the BPF
// feed (bpf/feed.hpp) and write what it reports into a trace, files named before their first access.
// Stops on SIGINT/SIGTERM, when CMD exits or when PID is gone.
//
// CMD is recorded from its first instruction and not before: the forked child is a copy of llmtrace,
// and between fork and exec it faults in llmtrace's own pages (its binary, libc, libstdc++), which are
// no part of CMD. So the child asks to be traced (PTRACE_TRACEME) and execs at once; the kernel stops it
// after the exec, the feed starts following it there, and PTRACE_DETACH lets it run. Where ptrace is
// not allowed (a seccomp filter), the child waits on a pipe before its exec instead and the trace starts
// with those pages; the child says which way it went over a status pipe.
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "feed.hpp"
#include "names.hpp"
#include "strace_text.hpp"
#include "trace/trace.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
using namespace llmcache;

namespace {

volatile sig_atomic_t stop_requested = 0;
void on_signal(int) { stop_requested = 1; }

// The process exists and has not exited (a zombie waiting for its parent has).
bool alive(uint32_t pid)
{
	std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
	std::string line;
	if (!std::getline(stat, line))
		return false;
	size_t paren = line.rfind(')');
	return paren != line.npos && paren + 2 < line.size() && line[paren + 2] != 'Z' && line[paren + 2] != 'X';
}

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

int print_usage(const po::options_description &opts, FILE *out)
{
	std::fprintf(out,
		     "Usage: llmtrace record [-p PID | -c CGROUP | -- CMD ARGS...] -o FILE [options]\n"
		     "Record the file blocks that processes read and write (read(), pread(), write(), mmap faults) with BPF.\n"
		     "Needs root. A summary on stderr once a second; Ctrl-C stops.\n\n");
	std::ostringstream s;
	s << opts;
	std::fputs(s.str().c_str(), out);
	std::fputs("\nEXAMPLES\n"
		   "  sudo llmtrace record -o llama.trace -- ./llama-cli -m model.gguf -p hello\n"
		   "  sudo llmtrace record -p 4242 -o engine.trace --format csv\n"
		   "  sudo llmtrace record -c /sys/fs/cgroup/llm.slice -o llm.trace --min-size 1MiB\n"
		   "  sudo llmtrace record --path-prefix /models -o models.trace   # every process, files under /models\n"
		   "  sudo llmtrace record --writes -o app.trace -- ./app        # writes too\n",
		   out);
	return out == stdout ? 0 : 2;
}

} // namespace

int cmd_record(int argc, char **argv)
{
	// Everything after "--" is the command to run.
	std::vector<std::string> cmd;
	int own = argc;
	for (int i = 1; i < argc; i++)
		if (!std::strcmp(argv[i], "--")) {
			own = i;
			cmd.assign(argv + i + 1, argv + argc);
			break;
		}

	uint32_t pid = 0, join_blocks = llmtrace::FeedOptions().join_blocks;
	std::vector<std::string> prefixes;
	std::string pid_text, cgroup, out, format = "native", min_size = "0", ring_size = "16MiB", hooks = "auto";
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("pid,p", po::value(&pid_text), "follow this process and its children (those it has and those it starts)")
		("cgroup,c", po::value(&cgroup), "follow the processes in this cgroup v2 directory and its children")
		("output,o", po::value(&out), "write the trace here (\"-\": stdout)")
		("format", po::value(&format)->default_value(format), "native, csv, oracleGeneral or strace (text)")
		("min-size", po::value(&min_size)->default_value(min_size), "ignore files smaller than this")
		("path-prefix", po::value(&prefixes)->value_name("DIR"),
		 "record only files under DIR (repeatable; whole path components: /m matches /m/x, not /mx)")
		("ring-size", po::value(&ring_size)->default_value(ring_size), "BPF ring buffer size (power of two)")
		("join-blocks", po::value(&join_blocks)->default_value(join_blocks)->value_name("N"),
		 "join a thread's consecutive reads of a file into one record of up to N blocks, with the first "
		 "read's time (1: a record per read)")
		("hooks", po::value(&hooks)->default_value(hooks),
		 "auto, filemap (filemap tracepoints, where the kernel has them) or syscalls (read syscalls and user "
		 "page faults)")
		("writes", "record writes with the filemap hooks too (the syscall hooks always do): they come from a "
			   "syscall tracepoint, which slows down every system call")
		("quiet,q", "no live summary once a second");
	po::variables_map vm;
	try {
		po::positional_options_description none; // unknown positionals are errors
		po::store(po::command_line_parser(own, argv).options(opts).positional(none).run(), vm);
		po::notify(vm);
	} catch (const po::error &e) {
		std::fprintf(stderr, "llmtrace record: %s (see llmtrace record --help)\n", e.what());
		return 2;
	}
	if (vm.count("help"))
		return print_usage(opts, stdout);
	auto usage_error = [](const std::string &msg) {
		std::fprintf(stderr, "llmtrace record: %s (see llmtrace record --help)\n", msg.c_str());
		return 2;
	};
	if (out.empty())
		return usage_error("say where the trace goes: -o FILE");
	if (int(vm.count("pid")) + int(vm.count("cgroup")) + int(!cmd.empty()) > 1)
		return usage_error("choose one of -p PID, -c CGROUP and -- CMD");
	if (own < argc && cmd.empty())
		return usage_error("nothing after '--': give the command to run");
	if (hooks != "auto" && hooks != "filemap" && hooks != "syscalls")
		return usage_error("--hooks: '" + hooks + "' is not auto, filemap or syscalls");
	trace::Format fmt;
	llmtrace::FeedOptions fo;
	fo.cgroup = cgroup;
	for (int i = 1; i < own; i++) // name the cgroup as the user did in messages
		if (!std::strncmp(argv[i], "--cgroup", 8) || !std::strncmp(argv[i], "-c", 2))
			fo.cgroup_option = argv[i][1] == '-' ? "--cgroup" : "-c";
	fo.path_prefixes = prefixes;
	fo.hooks = hooks;
	fo.writes = vm.count("writes");
	fo.join_blocks = join_blocks;
	// Each value with the option it came from.
	auto option = [&](const char *name, auto parse) {
		try {
			parse();
			return true;
		} catch (const std::exception &e) {
			usage_error(std::string(name) + ": " + e.what());
			return false;
		}
	};
	if (!option("--format", [&] { fmt = trace::parse_format(format); }) ||
	    !option("--min-size", [&] { fo.min_size = units::parse_bytes(min_size); }) ||
	    !option("--ring-size", [&] { fo.ring_bytes = llmtrace::parse_ring_size(ring_size); }) ||
	    (vm.count("pid") && !option("-p", [&] { pid = llmtrace::parse_pid(pid_text); })))
		return 2;
	if (vm.count("pid") && !alive(pid))
		return usage_error("-p " + pid_text + ": no such process");
	fo.pid = pid;

	// Start CMD stopped right after its exec (or, without ptrace, before it on a pipe).
	int go[2] = {-1, -1}, status_pipe[2] = {-1, -1};
	pid_t child = 0;
	bool traced = false;
	if (!cmd.empty()) {
		if (pipe2(go, O_CLOEXEC) || pipe2(status_pipe, O_CLOEXEC))
			return std::perror("llmtrace: pipe"), 1;
		child = fork();
		if (child < 0)
			return std::perror("llmtrace: fork"), 1;
		if (child == 0) {
			close(go[1]);
			close(status_pipe[0]);
			std::vector<char *> args;
			for (auto &a : cmd)
				args.push_back(a.data());
			args.push_back(nullptr);
			char c = ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == 0 ? 't' : 'p';
			if (write(status_pipe[1], &c, 1) != 1)
				_exit(127);
			if (c == 'p' && read(go[0], &c, 1) != 1)
				_exit(127);
			execvp(args[0], args.data());
			std::fprintf(stderr, "llmtrace: failed to run %s: %s\n", args[0], std::strerror(errno));
			_exit(127);
		}
		close(go[0]);
		close(status_pipe[1]);
		char c = 0;
		if (read(status_pipe[0], &c, 1) != 1)
			c = 0;
		close(status_pipe[0]);
		if (c == 't') {
			int st = 0;
			if (waitpid(child, &st, 0) != child || !WIFSTOPPED(st)) {
				close(go[1]);
				return WIFEXITED(st) ? WEXITSTATUS(st) : 127; // the exec failed and the child said why
			}
			traced = true;
		}
		fo.pid = uint32_t(child);
	}

	int rc = 0;
	try {
		llmtrace::Feed feed(fo);
		auto w = llmtrace::open_writer(out, fmt, "llmtrace 0.1 record");
		w->set_flags((feed.faults() ? 0 : LLMCACHE_TRACE_F_MMAP_UNSEEN) |
			     (feed.writes() ? 0 : LLMCACHE_TRACE_F_WRITES_UNSEEN));
		uint64_t events = 0, files = 0;
		feed.on_name = [&](uint32_t dev, uint64_t inode, const std::string &path) {
			w->name(dev, inode, path);
			files++;
		};
		feed.on_access = [&](const llmcache_access &a) {
			w->write(a);
			events++;
		};
		struct sigaction sa {};
		sa.sa_handler = on_signal;
		sigaction(SIGINT, &sa, nullptr);
		sigaction(SIGTERM, &sa, nullptr);
		if (child) {
			if (traced ? ptrace(PTRACE_DETACH, child, nullptr, nullptr) != 0 : write(go[1], "g", 1) != 1)
				throw std::runtime_error(std::string("failed to start the command: ") + std::strerror(errno));
			close(go[1]);
			go[1] = -1;
		}
		bool quiet = vm.count("quiet");
		if (!quiet)
			std::fprintf(stderr, "llmtrace: recording with the %s hooks%s%s; Ctrl-C stops\n",
				     feed.filemap() ? "filemap" : "syscall",
				     feed.mmap_hooks() == "kprobe"  ? ", mmap from kprobes"
				     : feed.mmap_hooks() == "fault" ? ", mmap faulting pages only"
				     : feed.faults()                ? ""
								    : " (mmap faults unseen)",
				     feed.writes() ? "" : ", writes not recorded (--writes)");
		uint64_t last_print = now_ns(), last_events = 0;
		int status = 0;
		for (bool done = false; !done;) {
			feed.poll(50);
			if (stop_requested)
				done = true;
			if (child && waitpid(child, &status, WNOHANG) == child) {
				child = 0;
				done = true;
			} else if (cmd.empty() && pid && !alive(pid))
				done = true;
			uint64_t t = now_ns();
			if (!quiet && t - last_print >= 1000000000ULL) {
				std::fprintf(stderr, "llmtrace: %.0f events/s, %llu events, %llu files, %llu lost\n",
					     double(events - last_events) * 1e9 / double(t - last_print), (unsigned long long)events,
					     (unsigned long long)files, (unsigned long long)feed.lost());
				last_print = t;
				last_events = events;
			}
		}
		feed.finish();
		w->close();
		uint64_t lost = feed.lost();
		std::fprintf(stderr,
			     "llmtrace: %llu events, %llu files, %llu lost events%s, %llu reads merged, %llu joined, "
			     "%llu pages read into the page cache, %llu evicted -> %s\n",
			     (unsigned long long)events, (unsigned long long)files, (unsigned long long)lost,
			     lost ? " (the ring buffer was full: raise --ring-size)" : "", (unsigned long long)feed.merged(),
			     (unsigned long long)feed.joined(),
			     (unsigned long long)feed.inserted(), (unsigned long long)feed.evicted(), out.c_str());
		if (!cmd.empty() && !stop_requested)
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	} catch (const llmtrace::FeedError &e) {
		std::fprintf(stderr, e.usage() ? "llmtrace record: %s (see llmtrace record --help)\n" : "%s\n", e.what());
		rc = e.usage() ? 2 : 1;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmtrace: %s\n", e.what());
		rc = 1;
	}
	if (child > 0) {
		kill(child, rc ? SIGKILL : SIGTERM);
		waitpid(child, nullptr, 0);
	}
	return rc;
}
