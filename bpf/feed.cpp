// SPDX-License-Identifier: MIT
#include "feed.hpp"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "llmtrace.h"
#include "llmtrace.skel.h"
#include "names.hpp"
#include "util/flat_map.hpp"

namespace llmtrace {

namespace {

constexpr long TRACEFS_MAGIC = 0x74726163, BPF_FS_MAGIC = 0xcafe4a11, CGROUP2_MAGIC = 0x63677270;
const char *const need_root = "llmtrace needs root (CAP_BPF and CAP_PERFMON) to load its BPF program: run it with sudo";

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

bool tracepoint_exists(const char *category, const std::string &name)
{
	return access(("/sys/kernel/tracing/events/" + std::string(category) + "/" + name).c_str(), F_OK) == 0;
}

// kprobes attach through perf_event_open's kprobe PMU (libbpf's legacy path through tracefs's
// kprobe_events is not tried: kernels without the PMU, like this machine's, have no kprobe events either).
bool kprobes_on(std::initializer_list<std::string_view> functions)
{
	if (access("/sys/bus/event_source/devices/kprobe/type", F_OK))
		return false;
	std::ifstream in("/proc/kallsyms");
	size_t found = 0;
	for (std::string addr, type, name; found < functions.size() && in >> addr >> type >> name;) {
		in.ignore(256, '\n');
		if ((type == "T" || type == "t") && std::find(functions.begin(), functions.end(), name) != functions.end())
			found++;
	}
	return found == functions.size();
}

// A cgroup v2 directory's id and its depth below the root of the hierarchy (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on hybrid systems).
void cgroup_of(const std::string &option, const std::string &path, uint64_t &id, uint32_t &level)
{
	struct stat st;
	struct statfs sf;
	char real[4096];
	if (stat(path.c_str(), &st) || !S_ISDIR(st.st_mode) || statfs(path.c_str(), &sf) || sf.f_type != CGROUP2_MAGIC ||
	    !realpath(path.c_str(), real))
		throw FeedError(option + " " + path + ": not a cgroup v2 directory (e.g. /sys/fs/cgroup/NAME, "
						     "/sys/fs/cgroup/unified/NAME)", true);
	id = st.st_ino;
	level = 0;
	for (std::string dir = real; dir.size() > 1; level++) {
		dir.resize(std::max<size_t>(dir.rfind('/'), 1));
		if (statfs(dir.c_str(), &sf) || sf.f_type != CGROUP2_MAGIC)
			break;
	}
}

// BPF as such: kernel BTF (the program is CO-RE) and the bpf() system call loading the simplest program.
// Their absence is the one failure that means "BPF is not available here" (tests skip on it); any later
// failure to load llmtrace's program is the program's (load_failure()). Needs root, checked before.
void bpf_available()
{
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		throw FeedError("BPF is not available here: this kernel has no BTF (/sys/kernel/btf/vmlinux, "
				"CONFIG_DEBUG_INFO_BTF), which llmtrace's CO-RE program needs", false);
	const bpf_insn ret0[] = {
		{BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0}, // r0 = 0
		{BPF_JMP | BPF_EXIT, 0, 0, 0, 0},                  // exit
	};
	const int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, nullptr, "GPL", ret0, 2, nullptr);
	if (fd >= 0) {
		close(fd);
		return;
	}
	const int e = errno;
	if (e == EPERM || e == EACCES)
		throw FeedError(std::string(need_root) + " (or the kernel forbids BPF: kernel.unprivileged_bpf_disabled, "
							 "lockdown, a container)", false);
	throw FeedError(std::string("BPF is not available here: the kernel cannot load a BPF program (") +
				std::strerror(e) + "; CONFIG_BPF_SYSCALL)", false);
}

} // namespace

struct Feed::Impl {
	llmtrace_bpf *skel = nullptr;
	ring_buffer *rb = nullptr;
	MountTable mounts = MountTable::load();
	std::vector<std::string> prefixes;
	llmcache::util::FlatMap<uint8_t> ignored{64}; // files outside the prefixes, for records already sent
	Feed *feed = nullptr;
	int delivered = 0;

	~Impl()
	{
		ring_buffer__free(rb);
		llmtrace_bpf__destroy(skel);
	}

	void on_path(const llmtrace_path_event &e)
	{
		std::vector<std::string> names;
		for (uint32_t i = 0; i < e.depth && i < LLMTRACE_PATH_DEPTH; i++)
			names.emplace_back(e.names[i], strnlen(e.names[i], LLMTRACE_NAME_MAX));
		std::string fs_path = join_reversed(names, e.truncated);
		std::string path = e.truncated ? fs_path : mounts.resolve(e.a.dev, fs_path);
		if (!prefixes.empty() &&
		    std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string &p) { return path_under(path, p); })) {
			ignored.put(llmcache_file_key(e.a.dev, e.a.inode), 1);
			llmtrace_file_key k{e.a.inode, e.a.dev, 0};
			uint8_t state = LLMTRACE_FILE_IGNORED;
			bpf_map__update_elem(skel->maps.named, &k, sizeof(k), &state, sizeof(state), BPF_ANY);
			return;
		}
		if (feed->on_name)
			feed->on_name(e.a.dev, e.a.inode, path);
	}

	static int callback(void *ctx, void *data, size_t size)
	{
		auto *im = static_cast<Impl *>(ctx);
		const auto *a = static_cast<const llmcache_access *>(data);
		if (size >= sizeof(llmtrace_path_event) && a->op == LLMCACHE_OP_PATH)
			im->on_path(*static_cast<const llmtrace_path_event *>(data));
		else if (size >= sizeof(llmcache_access) &&
			 (im->prefixes.empty() || !im->ignored.find(llmcache_file_key(a->dev, a->inode)))) {
			im->delivered++;
			if (im->feed->on_access)
				im->feed->on_access(*a);
		}
		return 0;
	}

	uint64_t counter(uint32_t which) const
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
};

Feed::Feed(const FeedOptions &o) : impl_(std::make_unique<Impl>())
{
	impl_->feed = this;
	if (o.hooks != "auto" && o.hooks != "filemap" && o.hooks != "syscalls")
		throw FeedError("--hooks: '" + o.hooks + "' is not auto, filemap or syscalls", true);
	if (o.ring_bytes < 4096 || o.ring_bytes > max_ring_bytes || (o.ring_bytes & (o.ring_bytes - 1)))
		throw FeedError("--ring-size " + std::to_string(o.ring_bytes) + ": must be a power of two from 4KiB to 2GiB",
				true);
	if (o.join_blocks < 1 || o.join_blocks > 1U << 20)
		throw FeedError("--join-blocks must be 1 to 1048576", true);
	uint64_t cgroup_id = 0;
	uint32_t cgroup_level = 0;
	if (!o.cgroup.empty())
		cgroup_of(o.cgroup_option, o.cgroup, cgroup_id, cgroup_level);
	for (const auto &p : o.path_prefixes)
		impl_->prefixes.push_back(p.size() > 1 && p.back() == '/' ? p.substr(0, p.size() - 1) : p);
	if (geteuid() != 0)
		throw FeedError(need_root, false);
	ensure_mounted("/sys/kernel/tracing", "tracefs", TRACEFS_MAGIC);
	ensure_mounted("/sys/fs/bpf", "bpf", BPF_FS_MAGIC);

	bpf_available();
	// libbpf's warnings name the program or map that failed: kept for the message (load_failure()),
	// printed as well with LLMTRACE_DEBUG=1 (the verifier's whole log).
	static std::string libbpf_log;
	libbpf_log.clear();
	libbpf_set_print([](libbpf_print_level level, const char *f, va_list ap) {
		if (level != LIBBPF_WARN)
			return 0;
		char line[512];
		va_list copy;
		va_copy(copy, ap);
		std::vsnprintf(line, sizeof(line), f, copy);
		va_end(copy);
		if (libbpf_log.size() < 65536)
			libbpf_log += line;
		return getenv("LLMTRACE_DEBUG") ? std::vfprintf(stderr, f, ap) : 0;
	});
	llmtrace_bpf *skel = impl_->skel = llmtrace_bpf__open();
	if (!skel)
		throw FeedError(std::string("failed to open the BPF program: ") + std::strerror(errno), false);
	skel->rodata->filter_tgids = o.pid != 0;
	skel->rodata->follow_forks = true;
	skel->rodata->cgroup_id = cgroup_id;
	skel->rodata->cgroup_level = cgroup_level;
	skel->rodata->min_size = o.min_size;
	skel->rodata->self_tgid = uint32_t(getpid());
	skel->rodata->wakeup_bytes = o.ring_bytes / 4; // and poll() on a timer
	skel->rodata->join_blocks = o.join_blocks;
	bpf_map__set_max_entries(skel->maps.events, uint32_t(o.ring_bytes));

	// The filemap tracepoints where the kernel has them, else reads from the syscall tracepoints. Writes
	// come from sys_enter: with the filemap hooks only when asked for, because attaching any syscall
	// tracepoint slows down every system call. Programs whose attach point is missing are not loaded.
	filemap_ = o.hooks == "filemap" ||
		   (o.hooks == "auto" && (tracepoint_exists("filemap", "mm_filemap_get_pages") ||
					  kernel_has("btf_trace_mm_filemap_get_pages")));
	writes_ = o.writes || !filemap_;
	skel->rodata->syscall_reads = !filemap_;
	skel->rodata->record_writes = writes_;
	// mmap: the filemap tracepoints, else kprobes on the functions they sit in, else the faulting pages
	// alone (exceptions:page_fault_user).
	if (filemap_)
		mmap_hooks_ = "filemap";
	else if (kprobes_on({"filemap_map_pages", "filemap_fault"}))
		mmap_hooks_ = "kprobe";
	else if (tracepoint_exists("exceptions", "page_fault_user"))
		mmap_hooks_ = "fault";
	faults_ = !mmap_hooks_.empty();
	bpf_program *prog;
	bpf_object__for_each_program(prog, skel->obj)
	{
		std::string_view sec = bpf_program__section_name(prog);
		bool on = true;
		if (sec == "tp_btf/mm_filemap_add_to_page_cache" || sec == "tp_btf/mm_filemap_delete_from_page_cache")
			on = tracepoint_exists("filemap", std::string(sec.substr(sizeof("tp_btf/") - 1)));
		else if (sec.starts_with("tp_btf/mm_filemap_"))
			on = filemap_;
		else if (sec == "tp_btf/sys_exit") // the syscall mode's reads, and writes there
			on = !filemap_;
		else if (sec == "tp_btf/sys_enter")
			on = !filemap_ || writes_;
		else if (sec.starts_with("kprobe/"))
			on = mmap_hooks_ == "kprobe";
		else if (sec == "tp/exceptions/page_fault_user")
			on = mmap_hooks_ == "fault";
		else if (sec == "iter/task")
			bpf_program__set_autoattach(prog, false); // run by finish()
		bpf_program__set_autoload(prog, on);
	}
	int err = llmtrace_bpf__load(skel);
	if (!err)
		err = llmtrace_bpf__attach(skel);
	// Root and BPF were checked (bpf_available()): EACCES and EPERM here are the verifier's rejection or
	// a lockdown that forbids what the program does, not a missing privilege.
	if (err)
		throw FeedError(load_failure(err, libbpf_log, o.ring_bytes), false);
	if (o.pid)
		follow(o.pid);
	impl_->rb = ring_buffer__new(bpf_map__fd(skel->maps.events), Impl::callback, impl_.get(), nullptr);
	if (!impl_->rb)
		throw FeedError(std::string("failed to create the ring buffer reader: ") + std::strerror(errno), false);
}

Feed::~Feed() = default;

void Feed::follow(uint32_t tgid)
{
	uint8_t one = 1;
	bpf_map__update_elem(impl_->skel->maps.followed, &tgid, sizeof(tgid), &one, 1, BPF_ANY);
	__atomic_fetch_add(&impl_->skel->bss->followed_gen, 1, __ATOMIC_SEQ_CST); // threads look up again
	// The children it has already (sched_process_fork adds the ones it starts from now on).
	std::string task_dir = "/proc/" + std::to_string(tgid) + "/task";
	if (DIR *d = opendir(task_dir.c_str())) {
		std::vector<uint32_t> children;
		while (dirent *e = readdir(d)) {
			std::ifstream in(task_dir + "/" + e->d_name + "/children");
			for (uint32_t c; in >> c;)
				children.push_back(c);
		}
		closedir(d);
		for (uint32_t c : children)
			if (c != tgid)
				follow(c);
	}
}

int Feed::poll(int timeout_ms)
{
	impl_->delivered = 0;
	int n = ring_buffer__poll(impl_->rb, timeout_ms); // woken early only when a quarter of the ring is full
	if (n >= 0)
		n = ring_buffer__consume(impl_->rb);
	if (n < 0 && n != -EINTR)
		throw std::runtime_error(std::string("failed to read the ring buffer: ") + std::strerror(-n));
	return impl_->delivered;
}

void Feed::finish()
{
	llmtrace_bpf__detach(impl_->skel);
	// Reading the iterator's file runs flush_runs over every task.
	bpf_link *it = bpf_program__attach_iter(impl_->skel->progs.flush_runs, nullptr);
	int fd = it ? bpf_iter_create(bpf_link__fd(it)) : -1;
	if (fd < 0) {
		int e = errno;
		bpf_link__destroy(it);
		throw std::runtime_error(std::string("failed to send the joined reads: ") + std::strerror(e));
	}
	char buf[64];
	while (read(fd, buf, sizeof(buf)) > 0) {
	}
	close(fd);
	bpf_link__destroy(it);
	poll(0);
}

void Feed::wait(int timeout_ms)
{
	epoll_event ev;
	if (epoll_wait(ring_buffer__epoll_fd(impl_->rb), &ev, 1, timeout_ms) < 0 && errno != EINTR)
		throw std::runtime_error(std::string("failed to wait for the ring buffer: ") + std::strerror(errno));
}

uint64_t Feed::lost() const { return impl_->counter(LLMTRACE_CNT_LOST); }
uint64_t Feed::merged() const { return impl_->counter(LLMTRACE_CNT_MERGED); }
uint64_t Feed::joined() const { return impl_->counter(LLMTRACE_CNT_JOINED); }
uint64_t Feed::inserted() const { return impl_->counter(LLMTRACE_CNT_INSERTED); }
uint64_t Feed::evicted() const { return impl_->counter(LLMTRACE_CNT_EVICTED); }

} // namespace llmtrace
