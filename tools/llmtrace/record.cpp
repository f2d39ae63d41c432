// SPDX-License-Identifier: MIT
// llmtrace record: load bpf/llmtrace.bpf.c, follow a process (-p), a cgroup (-c) or a command it starts
// (-- CMD), and write what the BPF program reports into a trace, naming each file from the dentry names
// the BPF program sends at its first sight and the mount table. Stops on SIGINT/SIGTERM, when CMD exits
// or when PID is gone.
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sstream>
#include <string>
#include <vector>

#include "llmtrace.h"
#include "llmtrace.skel.h"
#include "procfs.hpp"
#include "sim/flat_map.hpp"
#include "trace/trace.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
using namespace llmcache;

namespace {

volatile sig_atomic_t stop_requested = 0;
void on_signal(int) { stop_requested = 1; }

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

constexpr long TRACEFS_MAGIC = 0x74726163, BPF_FS_MAGIC = 0xcafe4a11;

// Mount a pseudo file system where the tools expect it, unless it is there already.
void ensure_mounted(const char *dir, const char *type, long magic)
{
	struct statfs s;
	if (!statfs(dir, &s) && s.f_type == magic)
		return;
	if (mount(type, dir, type, 0, nullptr))
		std::fprintf(stderr, "llmtrace: warning: failed to mount %s on %s: %s\n", type, dir, std::strerror(errno));
}

bool kernel_has(const char *btf_name)
{
	btf *vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux)
		return false;
	bool found = btf__find_by_name_kind(vmlinux, btf_name, BTF_KIND_TYPEDEF) > 0;
	btf__free(vmlinux);
	return found;
}

bool tracepoint_exists(const char *category, const char *name)
{
	std::string p = std::string("/sys/kernel/tracing/events/") + category + "/" + name;
	return access(p.c_str(), F_OK) == 0;
}

struct Recorder {
	trace::Writer *w = nullptr;
	llmtrace::MountTable mounts = llmtrace::MountTable::load();
	std::vector<std::string> prefixes; // --path-prefix: record only files under these
	bpf_map *named = nullptr;          // where files outside them are marked IGNORED
	sim::FlatMap<uint8_t> ignored{64};  // and here, for their records already in the ring
	uint64_t events = 0, files = 0;

	static uint64_t file_key(uint32_t dev, uint64_t inode) { return (uint64_t(dev) << 44) ^ inode; }

	void on_path(const llmtrace_path_event &e)
	{
		std::vector<std::string> names;
		for (uint32_t i = 0; i < e.depth && i < LLMTRACE_PATH_DEPTH; i++)
			names.emplace_back(e.names[i], strnlen(e.names[i], LLMTRACE_NAME_MAX));
		std::string fs_path = llmtrace::join_reversed(names, e.truncated);
		std::string path = e.truncated ? fs_path : mounts.resolve(e.a.dev, fs_path);
		if (!prefixes.empty() && std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string &p) {
			    return llmtrace::path_under(path, p);
		    })) {
			ignored.put(file_key(e.a.dev, e.a.inode), 1);
			llmtrace_file_key k{e.a.inode, e.a.dev, 0};
			uint8_t state = LLMTRACE_FILE_IGNORED;
			bpf_map__update_elem(named, &k, sizeof(k), &state, sizeof(state), BPF_ANY);
			return;
		}
		w->name(e.a.dev, e.a.inode, path);
		files++;
	}

	static int callback(void *ctx, void *data, size_t size)
	{
		auto *r = static_cast<Recorder *>(ctx);
		const auto *a = static_cast<const llmcache_access *>(data);
		if (size >= sizeof(llmtrace_path_event) && a->op == LLMCACHE_OP_PATH)
			r->on_path(*static_cast<const llmtrace_path_event *>(data));
		else if (size >= sizeof(llmcache_access) &&
			 (r->prefixes.empty() || !r->ignored.find(file_key(a->dev, a->inode)))) {
			r->w->write(*a);
			r->events++;
		}
		return 0;
	}
};

uint64_t counter(llmtrace_bpf *skel, uint32_t which)
{
	int ncpu = libbpf_num_possible_cpus();
	std::vector<uint64_t> v(size_t(ncpu > 0 ? ncpu : 1));
	if (bpf_map__lookup_elem(skel->maps.counters, &which, sizeof(which), v.data(), v.size() * sizeof(uint64_t), 0))
		return 0;
	uint64_t sum = 0;
	for (uint64_t x : v)
		sum += x;
	return sum;
}

int print_usage(const po::options_description &opts, FILE *out)
{
	std::fprintf(out,
		     "Usage: llmtrace record [-p PID | -c CGROUP | -- CMD ARGS...] -o FILE [options]\n"
		     "Record the file blocks that processes read (read(), pread(), mmap faults) with BPF.\n\n");
	std::ostringstream s;
	s << opts;
	std::fputs(s.str().c_str(), out);
	std::fputs("\nEXAMPLES\n"
		   "  sudo llmtrace record -o llama.trace -- ./llama-cli -m model.gguf -p hello\n"
		   "  sudo llmtrace record -p 4242 -o engine.trace --format csv\n"
		   "  sudo llmtrace record -c /sys/fs/cgroup/llm.slice -o llm.trace --min-size 1MiB\n"
		   "  sudo llmtrace record --path-prefix /models -o models.trace   # every process, files under /models\n",
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

	uint32_t pid = 0;
	std::vector<std::string> prefixes;
	std::string cgroup, out, format = "native", min_size = "0", ring_size = "16MiB", hooks = "auto";
	po::options_description opts("Options");
	opts.add_options()
		("help,h", "show this help")
		("pid,p", po::value(&pid), "follow this process (and the children it starts)")
		("cgroup,c", po::value(&cgroup), "follow the processes in this cgroup v2 directory and its children")
		("output,o", po::value(&out), "write the trace here (\"-\": stdout)")
		("format", po::value(&format)->default_value(format), "native, csv or oracleGeneral")
		("min-size", po::value(&min_size)->default_value(min_size), "ignore files smaller than this")
		("path-prefix", po::value(&prefixes)->value_name("DIR"),
		 "record only files under DIR (repeatable; whole path components: /m matches /m/x, not /mx)")
		("ring-size", po::value(&ring_size)->default_value(ring_size), "BPF ring buffer size (power of two)")
		("hooks", po::value(&hooks)->default_value(hooks),
		 "auto, filemap (filemap tracepoints, where the kernel has them) or syscalls (read/pread tracepoints and user page faults)")
		("quiet,q", "no live summary once a second");
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(own, argv).options(opts).run(), vm);
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
	uint64_t min_bytes, ring_bytes;
	try {
		fmt = trace::parse_format(format);
		if (fmt == trace::Format::strace)
			throw std::invalid_argument("the strace format cannot be written: use native, csv or oracleGeneral");
		min_bytes = units::parse_bytes(min_size);
		ring_bytes = llmtrace::parse_ring_size(ring_size);
	} catch (const std::exception &e) {
		return usage_error(e.what());
	}
	if (pid && kill(pid_t(pid), 0) && errno == ESRCH)
		return usage_error("-p " + std::to_string(pid) + ": no such process");
	uint64_t cgroup_id = 0;
	uint32_t cgroup_level = 0;
	if (!cgroup.empty()) {
		struct stat st;
		struct statfs sf;
		char real[4096];
		if (stat(cgroup.c_str(), &st) || !S_ISDIR(st.st_mode) || statfs(cgroup.c_str(), &sf) ||
		    sf.f_type != 0x63677270 /* CGROUP2_SUPER_MAGIC */ || !realpath(cgroup.c_str(), real))
			return usage_error("-c " + cgroup + ": not a cgroup v2 directory (e.g. /sys/fs/cgroup/NAME, /sys/fs/cgroup/unified/NAME)");
		cgroup_id = st.st_ino;
		// Its depth below the root of the cgroup2 hierarchy (/sys/fs/cgroup, or .../unified on hybrid systems).
		for (std::string dir = real; dir.size() > 1;) {
			dir.resize(dir.rfind('/') ? dir.rfind('/') : 1);
			if (statfs(dir.c_str(), &sf) || sf.f_type != 0x63677270)
				break;
			cgroup_level++;
		}
	}

	if (geteuid() != 0) {
		std::fprintf(stderr, "llmtrace needs root (CAP_BPF and CAP_PERFMON) to load its BPF program: run it with sudo\n");
		return 1;
	}
	ensure_mounted("/sys/kernel/tracing", "tracefs", TRACEFS_MAGIC);
	ensure_mounted("/sys/fs/bpf", "bpf", BPF_FS_MAGIC);

	// Start CMD stopped on a pipe, so that it is followed from its first instruction.
	int go[2] = {-1, -1};
	pid_t child = 0;
	if (!cmd.empty()) {
		if (pipe2(go, O_CLOEXEC))
			return std::perror("llmtrace: pipe"), 1;
		child = fork();
		if (child < 0)
			return std::perror("llmtrace: fork"), 1;
		if (child == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 1)
				_exit(127);
			std::vector<char *> args;
			for (auto &a : cmd)
				args.push_back(a.data());
			args.push_back(nullptr);
			execvp(args[0], args.data());
			std::fprintf(stderr, "llmtrace: failed to run %s: %s\n", args[0], std::strerror(errno));
			_exit(127);
		}
		close(go[0]);
		pid = uint32_t(child);
	}
	auto abandon_child = [&]() {
		if (child > 0) {
			kill(child, SIGKILL);
			waitpid(child, nullptr, 0);
		}
	};

	libbpf_set_print([](libbpf_print_level level, const char *f, va_list ap) {
		return level == LIBBPF_WARN && getenv("LLMTRACE_DEBUG") ? std::vfprintf(stderr, f, ap) : 0;
	});
	llmtrace_bpf *skel = llmtrace_bpf__open();
	if (!skel) {
		std::fprintf(stderr, "llmtrace: failed to open the BPF program: %s\n", std::strerror(errno));
		return abandon_child(), 1;
	}
	skel->rodata->filter_tgids = pid != 0;
	skel->rodata->follow_forks = true;
	skel->rodata->cgroup_id = cgroup_id;
	skel->rodata->cgroup_level = cgroup_level;
	skel->rodata->min_size = min_bytes;
	skel->rodata->self_tgid = uint32_t(getpid());
	skel->rodata->wakeup_bytes = ring_bytes / 4; // and a poll every 50 ms
	bpf_map__set_max_entries(skel->maps.events, uint32_t(ring_bytes));

	// Hooks: the filemap tracepoints where the kernel has them, else the syscall tracepoints.
	bool filemap = hooks == "filemap" || (hooks == "auto" && kernel_has("btf_trace_mm_filemap_get_pages"));
	bool faults = true;
	bpf_program *prog;
	bpf_object__for_each_program(prog, skel->obj)
	{
		std::string_view sec = bpf_program__section_name(prog);
		bool on;
		if (sec.starts_with("tp_btf/mm_filemap_"))
			on = filemap;
		else if (sec == "tp/exceptions/page_fault_user") {
			faults = filemap || tracepoint_exists("exceptions", "page_fault_user");
			on = !filemap && faults;
		}
		else if (sec.starts_with("tp/syscalls/"))
			on = (!filemap || sec.find("write") != sec.npos) &&
			     tracepoint_exists("syscalls", std::string(sec.substr(12)).c_str());
		else
			on = true;
		bpf_program__set_autoload(prog, on);
	}
	int err = llmtrace_bpf__load(skel);
	if (!err)
		err = llmtrace_bpf__attach(skel);
	if (err) {
		if (err == -EPERM || err == -EACCES)
			std::fprintf(stderr, "llmtrace needs root (CAP_BPF and CAP_PERFMON) to load its BPF program: run it with sudo\n");
		else
			std::fprintf(stderr, "llmtrace: failed to load the BPF program: %s (is BPF enabled in this kernel, with BTF "
					     "at /sys/kernel/btf/vmlinux? LLMTRACE_DEBUG=1 shows the loader's log)\n",
				     std::strerror(-err));
		llmtrace_bpf__destroy(skel);
		return abandon_child(), 1;
	}
	if (pid) {
		uint8_t one = 1;
		bpf_map__update_elem(skel->maps.followed, &pid, sizeof(pid), &one, 1, BPF_ANY);
	}

	int rc = 0;
	try {
		auto w = trace::open_writer(out, fmt, "llmtrace 0.1 record");
		if (!faults)
			w->set_flags(LLMCACHE_TRACE_F_MMAP_UNSEEN);
		Recorder rec;
		rec.w = w.get();
		rec.named = skel->maps.named;
		for (auto &p : prefixes)
			rec.prefixes.push_back(p.size() > 1 && p.back() == '/' ? p.substr(0, p.size() - 1) : p);
		ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.events), Recorder::callback, &rec, nullptr);
		if (!rb)
			throw std::runtime_error(std::string("failed to create the ring buffer reader: ") + std::strerror(errno));
		struct sigaction sa {};
		sa.sa_handler = on_signal;
		sigaction(SIGINT, &sa, nullptr);
		sigaction(SIGTERM, &sa, nullptr);
		if (child) {
			if (write(go[1], "g", 1) != 1)
				throw std::runtime_error("failed to start the command");
			close(go[1]);
		}
		bool quiet = vm.count("quiet");
		if (!quiet)
			std::fprintf(stderr, "llmtrace: recording with the %s hooks%s; Ctrl-C stops\n",
				     filemap ? "filemap" : "syscall", faults ? "" : " (mmap faults unseen)");
		uint64_t last_print = now_ns(), last_events = 0;
		int status = 0;
		bool done = false;
		while (!done) {
			int n = ring_buffer__poll(rb, 50);
			if (n >= 0)
				n = ring_buffer__consume(rb);
			if (n < 0 && n != -EINTR)
				throw std::runtime_error(std::string("failed to read the ring buffer: ") + std::strerror(-n));
			if (stop_requested)
				done = true;
			if (child && waitpid(child, &status, WNOHANG) == child) {
				child = 0;
				done = true;
			} else if (cmd.empty() && pid && kill(pid_t(pid), 0) && errno == ESRCH)
				done = true;
			uint64_t t = now_ns();
			if (!quiet && t - last_print >= 1000000000ULL) {
				std::fprintf(stderr, "llmtrace: %.0f events/s, %llu events, %llu files, %llu lost\n",
					     double(rec.events - last_events) * 1e9 / double(t - last_print),
					     (unsigned long long)rec.events, (unsigned long long)rec.files,
					     (unsigned long long)counter(skel, LLMTRACE_CNT_LOST));
				last_print = t;
				last_events = rec.events;
			}
		}
		ring_buffer__consume(rb);
		ring_buffer__free(rb);
		w->close();
		uint64_t lost = counter(skel, LLMTRACE_CNT_LOST);
		std::fprintf(stderr, "llmtrace: %llu events, %llu files, %llu lost events%s, %llu reads merged -> %s\n",
			     (unsigned long long)rec.events, (unsigned long long)rec.files, (unsigned long long)lost,
			     lost ? " (the ring buffer was full: raise --ring-size)" : "",
			     (unsigned long long)counter(skel, LLMTRACE_CNT_MERGED), out.c_str());
		if (!cmd.empty() && !stop_requested)
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmtrace: %s\n", e.what());
		rc = 1;
	}
	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, nullptr, 0);
	}
	llmtrace_bpf__destroy(skel);
	return rc;
}
