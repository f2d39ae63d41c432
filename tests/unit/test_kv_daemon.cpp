// SPDX-License-Identifier: MIT
// llmcached as a process: started with a config file, served through the C API, stopped by SIGTERM
// (exit 0, socket removed), killed with SIGKILL in the middle of spilling (held under ptrace at the
// entry of the system call that writes a spill batch, so the spill is certainly in flight) and
// restarted (the client gets an error, the new daemon replaces the stale socket and serves exactly what
// it is given), and refused with a clear message on a bad option or a missing device.
#include "cmocka_cpp.hpp"

#include "kv/kv_store.hpp"
#include "kv/llmcache_kv.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace {

std::string g_bin, g_dir;
std::vector<pid_t> g_pids; // daemons started, killed at teardown if a failed test left one running

std::string daemon_path()
{
	char self[4096];
	const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	std::string p(self, n > 0 ? (size_t)n : 0);
	return p.substr(0, p.rfind('/')) + "/../bin/llmcached";
}

// Starts llmcached with args; stderr goes to g_dir/log. Returns the pid.
pid_t start(const std::vector<std::string> &args)
{
	const pid_t pid = fork();
	if (pid == 0) {
		const int fd = open((g_dir + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 2);
		std::vector<char *> argv{const_cast<char *>(g_bin.c_str())};
		for (const auto &a : args)
			argv.push_back(const_cast<char *>(a.c_str()));
		argv.push_back(nullptr);
		execv(g_bin.c_str(), argv.data());
		_exit(127);
	}
	g_pids.push_back(pid);
	return pid;
}

bool wait_for(const std::string &path, bool present)
{
	for (int i = 0; i < 500; i++) {
		struct stat st;
		if ((stat(path.c_str(), &st) == 0) == present)
			return true;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	return false;
}

int wait_exit(pid_t pid)
{
	int st = 0;
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

std::string read_log()
{
	std::ifstream in(g_dir + "/log");
	return std::string(std::istreambuf_iterator<char>(in), {});
}

int setup(void **)
{
	g_bin = daemon_path();
	char tmpl[] = "/var/tmp/llmcached-test-XXXXXX";
	g_dir = mkdtemp(tmpl);
	const int fd = open((g_dir + "/kv.img").c_str(), O_CREAT | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, 16 << 20) < 0)
		return -1;
	close(fd);
	std::ofstream(g_dir + "/llmcached.conf") << "# test\nkv-cpu-budget = 24KiB\nkv-session-device-bytes = 4MiB\n"
						    "kv-page-tokens = 16\nkv-recent-tokens = 32\nkv-backend = emulated\n";
	return access(g_bin.c_str(), X_OK) == 0 ? 0 : -1;
}

int teardown(void **)
{
	for (pid_t p : g_pids)
		if (kill(p, SIGKILL) == 0)
			waitpid(p, nullptr, 0);
	std::system(("rm -rf " + g_dir).c_str());
	return 0;
}

std::vector<std::string> args()
{
	return {"--config", g_dir + "/llmcached.conf", "--socket", g_dir + "/sock", "--kv-device", g_dir + "/kv.img"};
}

const llmcache_kv_shape shape{1, 8, 2, 16, LLMCACHE_KV_FP16, 2048, 64, 16};

void daemon__config_serve_sigterm__clean_exit(void **)
{
	const pid_t pid = start(args());
	assert_true(wait_for(g_dir + "/sock", true));
	llmcache_kv *kv;
	assert_int_equal(llmcache_kv_open((g_dir + "/sock").c_str(), &shape, &kv), 0);
	std::mt19937 rng(1);
	std::vector<uint8_t> k(400 * 64), v(400 * 64);
	for (size_t i = 0; i < k.size(); i++) // finite fp16 keys: a zero query scores them all 0
		k[i] = (uint8_t)(i & 1 ? rng() & 0x3b : rng());
	for (auto &b : v)
		b = (uint8_t)rng();
	for (uint32_t t = 0; t < 400; t += 16)
		assert_int_equal(llmcache_kv_append(kv, 0, &k[t * 64], &v[t * 64], 16), 0);
	std::vector<float> q(8 * 16, 0.0f); // all scores 0: the top-k is the lowest positions after the sinks
	llmcache_kv_selection sel;
	assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 64, &sel), 0);
	assert_int_equal(sel.n, 64);
	for (uint32_t i = 0; i < sel.n; i++) {
		assert_int_equal(sel.positions[i], i < 32 ? i : 400 - 64 + i);
		assert_memory_equal((const uint8_t *)sel.k + i * 64, &k[sel.positions[i] * 64], 64);
		assert_memory_equal((const uint8_t *)sel.v + i * 64, &v[sel.positions[i] * 64], 64);
	}
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
	assert_true(wait_for(g_dir + "/sock", false));
	const std::string log = read_log();
	assert_non_null(std::strstr(log.c_str(), "backend emulated"));
	assert_non_null(std::strstr(log.c_str(), "stopped; closed 1 sessions"));
	assert_int_not_equal(llmcache_kv_append(kv, 0, &k[0], &v[0], 1), 0); // the daemon is gone
	llmcache_kv_close(kv);
}

// Runs the daemon under ptrace until one of its threads (the session's worker, which does the
// session's I/O: server.hpp) enters the system call that writes a spill batch to the device
// (io_uring_enter submitting, or pwrite in the synchronous fallback), then kills it there: a spill is
// then certainly in flight, not merely likely after some sleep. True if it got there; status is the
// daemon's wait status (every traced thread is reaped, or the group leader's end is never reported).
bool kill_in_spill_write(pid_t pid, int &status)
{
	const long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE;
	bool seized = false;
	if (DIR *d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
		while (const dirent *e = readdir(d)) {
			const pid_t tid = (pid_t)std::atoi(e->d_name);
			if (tid > 0 && ptrace(PTRACE_SEIZE, tid, nullptr, (void *)opts) == 0 &&
			    ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) == 0)
				seized = true;
		}
		closedir(d);
	}
	if (!seized)
		std::fprintf(stderr, "cannot trace llmcached: %s\n", strerror(errno));
	bool in_spill = false;
	for (int stops = 0; seized && stops < 200000 && !in_spill; stops++) {
		int st = 0;
		const pid_t t = waitpid(-1, &st, __WALL);
		if (t < 0 || (t == pid && !WIFSTOPPED(st)))
			break;
		if (!WIFSTOPPED(st))
			continue; // a thread ended
		int deliver = 0;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80)) {
			__ptrace_syscall_info info{};
			if (ptrace(PTRACE_GET_SYSCALL_INFO, t, (void *)sizeof(info), &info) > 0 &&
			    info.op == PTRACE_SYSCALL_INFO_ENTRY) {
				const uint64_t nr = info.entry.nr;
				in_spill = (nr == SYS_io_uring_enter && info.entry.args[1] > 0) || nr == SYS_pwrite64 ||
					   nr == SYS_pwritev || nr == SYS_pwritev2;
			}
		} else if (WSTOPSIG(st) != SIGTRAP && (st >> 16) != PTRACE_EVENT_STOP) {
			deliver = WSTOPSIG(st); // a real signal: pass it on
		}
		if (!in_spill)
			ptrace(PTRACE_SYSCALL, t, nullptr, (void *)(long)deliver);
	}
	kill(pid, SIGKILL);
	for (;;) {
		int st = 0;
		const pid_t t = waitpid(-1, &st, __WALL);
		if (t < 0)
			break;
		if (t == pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
			status = st;
			break;
		}
	}
	return in_spill;
}

void daemon__killed_mid_spill_restarted__serves_only_new_data(void **)
{
	pid_t pid = start(args());
	assert_true(wait_for(g_dir + "/sock", true));
	llmcache_kv *kv;
	assert_int_equal(llmcache_kv_open((g_dir + "/sock").c_str(), &shape, &kv), 0);
	std::vector<uint8_t> old(16 * 64, 0xaa);
	// Appends past the 24 KiB budget spill; they run until the daemon dies under them.
	std::thread appender([&] {
		for (int t = 0; t < 4000; t++)
			if (llmcache_kv_append(kv, 0, old.data(), old.data(), 16) != 0)
				break;
	});
	int st = 0;
	const bool in_spill = kill_in_spill_write(pid, st);
	appender.join();
	assert_true(in_spill);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_not_equal(llmcache_kv_append(kv, 0, old.data(), old.data(), 16), 0);
	llmcache_kv_close(kv);
	pid = start(args()); // the stale socket file is replaced
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	llmcache_kv *kv2 = nullptr;
	int r = -1;
	for (int i = 0; i < 200 && r; i++) {
		if (kv2)
			llmcache_kv_close(kv2);
		r = llmcache_kv_open((g_dir + "/sock").c_str(), &shape, &kv2);
		if (r)
			std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	assert_int_equal(r, 0);
	std::vector<uint8_t> k(640 * 64), v(640 * 64);
	std::mt19937 rng(2);
	for (auto &b : k)
		b = (uint8_t)rng();
	for (auto &b : v)
		b = (uint8_t)rng();
	for (uint32_t t = 0; t < 640; t += 16)
		assert_int_equal(llmcache_kv_append(kv2, 0, &k[t * 64], &v[t * 64], 16), 0);
	std::vector<float> q(8 * 16, 0.0f);
	llmcache_kv_selection sel;
	assert_int_equal(llmcache_kv_select(kv2, 0, q.data(), 64, &sel), 0);
	for (uint32_t i = 0; i < sel.n; i++)
		assert_memory_equal((const uint8_t *)sel.v + i * 64, &v[sel.positions[i] * 64], 64);
	llmcache_kv_close(kv2);
	kill(pid, SIGTERM);
	assert_int_equal(wait_exit(pid), 0);
}

void daemon__bad_option_or_missing_device__clear_refusal(void **)
{
	auto a = args();
	a.push_back("--kv-backend");
	a.push_back("fpga");
	assert_int_equal(wait_exit(start(a)), 2);
	assert_non_null(std::strstr(read_log().c_str(), "--kv-backend fpga: use none, emulated or xrt"));
	a = args();
	a[5] = g_dir + "/missing.img";
	assert_int_equal(wait_exit(start(a)), 1);
	assert_non_null(std::strstr(read_log().c_str(), "failed to start: cannot open the KV device"));
}

// --kv-planes: a bad fraction is refused; with 0 every session reads its spilled top-k V rows as their
// high byte plane alone (Documentation/kv.md, "Two-plane precision"): K rows and the always-kept
// tokens' V rows whole, the others' whole or with their low bytes zeroed, and some of them zeroed.
void daemon__kv_planes__refused_out_of_range_and_truncates_low_rows(void **)
{
	auto a = args();
	a.insert(a.end(), {"--kv-planes", "1.5"});
	assert_int_equal(wait_exit(start(a)), 2);
	assert_non_null(std::strstr(read_log().c_str(), "--kv-planes 1.5: use off or a fraction from 0 to 1"));
	a = args();
	a.insert(a.end(), {"--kv-planes", "0"});
	const pid_t pid = start(a);
	assert_true(wait_for(g_dir + "/sock", true));
	llmcache_kv *kv;
	assert_int_equal(llmcache_kv_open((g_dir + "/sock").c_str(), &shape, &kv), 0);
	std::mt19937 rng(5);
	std::vector<uint8_t> k(400 * 64), v(400 * 64);
	for (size_t i = 0; i < k.size(); i++)
		k[i] = (uint8_t)(i & 1 ? rng() & 0x3b : rng());
	for (auto &b : v)
		b = (uint8_t)(rng() | 1); // no low byte is zero: a truncated row is told from a whole one
	for (uint32_t t = 0; t < 400; t += 16)
		assert_int_equal(llmcache_kv_append(kv, 0, &k[t * 64], &v[t * 64], 16), 0);
	std::vector<float> q(8 * 16);
	std::normal_distribution<float> nd;
	uint32_t truncated = 0;
	for (int step = 0; step < 3; step++) {
		for (float &x : q) // the top-k spread over the spilled pages
			x = nd(rng);
		llmcache_kv_selection sel;
		assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 64, &sel), 0);
		for (uint32_t i = 0; i < sel.n; i++) {
			const uint32_t p = sel.positions[i];
			const uint8_t *sv = (const uint8_t *)sel.v + i * 64, *want = &v[p * 64];
			assert_memory_equal((const uint8_t *)sel.k + i * 64, &k[p * 64], 64);
			if (std::memcmp(sv, want, 64) == 0)
				continue;
			assert_true(p >= 16 && p < 400 - 32); // neither sink nor recent
			for (int b = 0; b < 64; b++)
				assert_int_equal(sv[b], b & 1 ? want[b] : 0);
			truncated++;
		}
	}
	assert_true(truncated > 0);
	llmcache_kv_close(kv);
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
}

// --kv-device-select: a bad value is refused; with bounds, a client's selections through the daemon
// equal a local KvStore's with the same options (bounds-first on the emulated backend, whose choices
// test_csd_bounds_first checks against the pure functions), and differ from the exact scan's on these
// random keys (the option took effect).
void daemon__kv_device_select_bounds__same_selection_as_local_store(void **)
{
	auto a = args();
	a.insert(a.end(), {"--kv-device-select", "some"});
	assert_int_equal(wait_exit(start(a)), 2);
	assert_non_null(std::strstr(read_log().c_str(), "--kv-device-select some: use exact or bounds"));
	a = args();
	a.insert(a.end(), {"--kv-device-select", "bounds"});
	const pid_t pid = start(a);
	assert_true(wait_for(g_dir + "/sock", true));
	llmcache_kv *kv;
	assert_int_equal(llmcache_kv_open((g_dir + "/sock").c_str(), &shape, &kv), 0);
	std::unique_ptr<llmcache::kv::KvStore> local[2]; // bounds-first, exact
	for (int i = 0; i < 2; i++) {
		const std::string dev = g_dir + "/local" + std::to_string(i) + ".img";
		const int fd = open(dev.c_str(), O_CREAT | O_RDWR, 0600);
		assert_true(fd >= 0 && ftruncate(fd, 4 << 20) == 0);
		close(fd);
		llmcache::kv::KvOptions o;
		o.cpu_budget = 24 << 10;
		o.page_tokens = 16;
		o.recent_tokens = 32;
		o.backend = "emulated";
		o.device = dev;
		o.device_select = i ? llmcache::csd::DeviceSelect::Exact : llmcache::csd::DeviceSelect::BoundsFirst;
		std::string err;
		assert_int_equal(llmcache::kv::KvStore::open({1, 8, 2, 16, CSD_FP16, 2048}, o, local[i], err), 0);
	}
	std::mt19937 rng(9);
	std::vector<uint8_t> k(400 * 64), v(400 * 64);
	for (size_t i = 0; i < k.size(); i++)
		k[i] = (uint8_t)(i & 1 ? rng() & 0x3b : rng());
	for (auto &b : v)
		b = (uint8_t)rng();
	for (uint32_t t = 0; t < 400; t += 16)
		assert_int_equal(llmcache_kv_append(kv, 0, &k[t * 64], &v[t * 64], 16), 0);
	for (auto &s : local)
		for (uint32_t t = 0; t < 400; t++)
			assert_true(s->append(0, &k[t * 64], &v[t * 64]) >= 0);
	std::vector<float> q(8 * 16);
	std::normal_distribution<float> nd;
	size_t differ = 0;
	for (int step = 0; step < 4; step++) {
		for (float &x : q)
			x = nd(rng);
		llmcache_kv_selection sel;
		assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 64, &sel), 0);
		llmcache::kv::KvSelection want, exact;
		assert_int_equal(local[0]->select(0, q.data(), 64, want), 0);
		assert_int_equal(local[1]->select(0, q.data(), 64, exact), 0);
		assert_int_equal(sel.n, want.positions.size());
		assert_memory_equal(sel.positions, want.positions.data(), sel.n * sizeof(uint32_t));
		assert_memory_equal(sel.k, want.k.data(), want.k.size());
		differ += want.positions != exact.positions;
	}
	assert_true(differ > 0);
	assert_true(local[0]->stats().device.bound_pages > 0);
	llmcache_kv_close(kv);
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
}


// One session's counter in the daemon's session listing (llmcache_kv_status, what `llmcachectl kv
// status` prints): the number after name, or -1 when the line does not carry it.
int64_t status_field(const std::string &status, const std::string &name)
{
	const size_t at = (" " + status).find(" " + name + " ");
	return at == std::string::npos ? -1 : std::strtoll(status.c_str() + at + name.size() + 1, nullptr, 10);
}

// Starts llmcached with args, serves one session the appends and selects of a local KvStore with the
// options of setup's config file and write_through as given, asserts that every selection (positions,
// K and V rows) equals the local store's, and returns the daemon's session listing taken after them.
// Local is left open for the caller to read its counters.
std::string serve_like_local_store(const std::vector<std::string> &args, bool write_through,
				   std::unique_ptr<llmcache::kv::KvStore> &local)
{
	const pid_t pid = start(args);
	assert_true(wait_for(g_dir + "/sock", true));
	llmcache_kv *kv;
	assert_int_equal(llmcache_kv_open((g_dir + "/sock").c_str(), &shape, &kv), 0);
	const std::string dev = g_dir + "/local.img";
	const int fd = open(dev.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0 && ftruncate(fd, 4 << 20) == 0);
	close(fd);
	llmcache::kv::KvOptions o;
	o.cpu_budget = 24 << 10;
	o.page_tokens = 16;
	o.recent_tokens = 32;
	o.backend = "emulated";
	o.device = dev;
	o.write_through = write_through;
	std::string err;
	assert_int_equal(llmcache::kv::KvStore::open({1, 8, 2, 16, CSD_FP16, 2048}, o, local, err), 0);
	std::mt19937 rng(11);
	std::vector<uint8_t> k(400 * 64), v(400 * 64); // 25 pages of 2 KiB: 12 fit in the 24 KiB budget
	for (size_t i = 0; i < k.size(); i++)
		k[i] = (uint8_t)(i & 1 ? rng() & 0x3b : rng());
	for (auto &b : v)
		b = (uint8_t)rng();
	for (uint32_t t = 0; t < 400; t += 16)
		assert_int_equal(llmcache_kv_append(kv, 0, &k[t * 64], &v[t * 64], 16), 0);
	for (uint32_t t = 0; t < 400; t++)
		assert_true(local->append(0, &k[t * 64], &v[t * 64]) >= 0);
	std::vector<float> q(8 * 16);
	std::normal_distribution<float> nd;
	for (int step = 0; step < 4; step++) {
		for (float &x : q) // the top-k spread over the spilled pages: the pool update swaps some in
			x = nd(rng);
		llmcache_kv_selection sel;
		assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 64, &sel), 0);
		llmcache::kv::KvSelection want;
		assert_int_equal(local->select(0, q.data(), 64, want), 0);
		assert_int_equal(sel.n, want.positions.size());
		assert_memory_equal(sel.positions, want.positions.data(), sel.n * sizeof(uint32_t));
		assert_memory_equal(sel.k, want.k.data(), want.k.size());
		assert_memory_equal(sel.v, want.v.data(), want.v.size());
	}
	char buf[4096];
	assert_true(llmcache_kv_status((g_dir + "/sock").c_str(), buf, sizeof(buf)) > 0);
	llmcache_kv_close(kv);
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
	assert_true(wait_for(g_dir + "/sock", false));
	return buf;
}

// --kv-write-through, and kv-write-through = true in the config file: the daemon's session writes each
// page as it fills (Documentation/kv.md, "Writing full pages through"), so that the spills of the
// appends and of the selects' pool updates are clean, and it counts and selects as a local KvStore with
// write_through; without the option it writes nothing through and its spills write.
void daemon__kv_write_through__pages_written_at_append_and_demoted_clean(void **)
{
	std::unique_ptr<llmcache::kv::KvStore> local;
	auto flag = args();
	flag.push_back("--kv-write-through");
	std::ifstream base(g_dir + "/llmcached.conf");
	std::ofstream(g_dir + "/write-through.conf")
		<< std::string(std::istreambuf_iterator<char>(base), {}) << "kv-write-through = true\n";
	auto config = args();
	config[1] = g_dir + "/write-through.conf";
	for (const auto &a : {flag, config}) {
		const std::string status = serve_like_local_store(a, true, local);
		const llmcache::kv::KvStats st = local->stats();
		assert_int_equal(st.written_through, 400 / 16); // every page, as it filled
		assert_true(st.clean_spills > 0);
		assert_int_equal(st.write_through_failures, 0);
		assert_int_equal(status_field(status, "written_through"), st.written_through);
		assert_int_equal(status_field(status, "write_through_failures"), 0);
		assert_int_equal(status_field(status, "clean_spills"), st.clean_spills);
		assert_int_equal(status_field(status, "spilled_pages"), st.spilled_pages);
		assert_int_equal(status_field(status, "bytes_written"), st.storage.bytes_written);
		local.reset();
	}
	const std::string status = serve_like_local_store(args(), false, local);
	assert_int_equal(local->stats().written_through, 0);
	assert_int_equal(status_field(status, "written_through"), -1); // printed for sessions with the option only
	assert_true(status_field(status, "spilled_pages") > 0);
	assert_int_equal(status_field(status, "clean_spills"), local->stats().clean_spills);
	assert_int_equal(status_field(status, "bytes_written"), local->stats().storage.bytes_written);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(daemon__config_serve_sigterm__clean_exit),
		cmocka_unit_test(daemon__killed_mid_spill_restarted__serves_only_new_data),
		cmocka_unit_test(daemon__bad_option_or_missing_device__clear_refusal),
		cmocka_unit_test(daemon__kv_planes__refused_out_of_range_and_truncates_low_rows),
		cmocka_unit_test(daemon__kv_device_select_bounds__same_selection_as_local_store),
		cmocka_unit_test(daemon__kv_write_through__pages_written_at_append_and_demoted_clean),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
