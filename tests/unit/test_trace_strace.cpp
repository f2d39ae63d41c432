// SPDX-License-Identifier: MIT
// The strace reader on hand-written fixtures for every syscall it handles, on real `strace -f -tt -yy`
// output (tests/data/trace/python-threads.strace), and on malformed and truncated input.
//
// Also a helper for tests/integration/test_strace_workload.sh:
//   test_trace_strace --dump-csv IN FORMAT|auto OUT.csv
// converts any trace to CSV (naming files), prints the reader's notes on stderr, and exits 1 with the
// error message on malformed input.
#include "test_trace_util.hpp"

#include <cstring>
#include <iostream>
#include <set>

using namespace tt;

static constexpr uint64_t S = 1000000000ULL;

static uint64_t T(uint64_t h, uint64_t m, uint64_t s, uint64_t us) { return ((h * 60 + m) * 60 + s) * S + us * 1000; }
static uint64_t I(const char *path) { return path_inode(path); }

static std::unique_ptr<Reader> open_text(const std::string &name, const std::string &text)
{
	std::string path = scratch(name);
	write_file(path, text);
	return open_reader(path, Format::strace);
}

static void path_inode__fnv1a_64__known_values(void **)
{
	assert_int_equal(0xcbf29ce484222325ULL, path_inode(""));
	assert_int_equal(0xaf63dc4c8601ec8cULL, path_inode("a"));
	assert_int_equal(0x85944171f73967e8ULL, path_inode("foobar"));
}

static void strace_offsets__read_pread_lseek_readv_preadv__blocks_from_tracked_offset(void **)
{
	auto r = open_text("offsets.strace", R"(100  10:00:00.000001 openat(AT_FDCWD</w>, "m.bin", O_RDONLY|O_CLOEXEC) = 3</w/m.bin>
100  10:00:00.000002 read(3</w/m.bin>, "\177ELF\2\1\1"..., 5000) = 5000
100  10:00:00.000003 pread64(3</w/m.bin>, "x\"y"..., 100, 8192) = 100
100  10:00:00.000004 read(3</w/m.bin>, "y"..., 4000) = 4000
100  10:00:00.000005 lseek(3</w/m.bin>, 20480, SEEK_SET) = 20480
100  10:00:00.000006 readv(3</w/m.bin>, [{iov_base="a", iov_len=1}, {iov_base="b),"..., iov_len=8191}], 2) = 8192
100  10:00:00.000007 preadv(3</w/m.bin>, [{iov_base="c"..., iov_len=4096}], 1, 4096) = 4096
100  10:00:00.000008 preadv2(3</w/m.bin>, [{iov_base="d"..., iov_len=10}], 1, -1, RWF_NOWAIT) = 10
100  10:00:00.000009 read(3</w/m.bin>, "e"..., 5000) = 5000
100  10:00:00.000010 read(3</w/m.bin>, "", 10) = 0
100  10:00:00.000011 read(3</w/m.bin>, 0x1, 10) = -1 EFAULT (Bad address)
100  10:00:00.000012 lseek(3</w/m.bin>, -4096, SEEK_CUR) = 29586
100  10:00:00.000013 pread64(3</w/m.bin>, "f", 1, 0) = 1
100  10:00:00.000014 read(3</w/m.bin>, "g", 1) = 1
100  10:00:00.000015 close(3</w/m.bin>) = 0
)");
	uint64_t m = I("/w/m.bin");
	assert_all_same({rec(T(10, 0, 0, 2), 100, 0, m, 0, 2), rec(T(10, 0, 0, 3), 100, 0, m, 2, 1),
			 rec(T(10, 0, 0, 4), 100, 0, m, 1, 2), rec(T(10, 0, 0, 6), 100, 0, m, 5, 2),
			 rec(T(10, 0, 0, 7), 100, 0, m, 1, 1), rec(T(10, 0, 0, 8), 100, 0, m, 7, 1),
			 rec(T(10, 0, 0, 9), 100, 0, m, 7, 2), rec(T(10, 0, 0, 13), 100, 0, m, 0, 1),
			 rec(T(10, 0, 0, 14), 100, 0, m, 7, 1)},
			read_all(*r));
	assert_int_equal(1, r->paths().size());
	assert_string_equal("/w/m.bin", r->paths().at({0, m}).c_str());
	assert_true(r->notes().empty());
	assert_int_equal(0, r->flags());
}

static void strace_writes__no_pid_prefix_epoch_times__write_records_pid_from_ff_suffix(void **)
{
	auto r = open_text("writes.strace.4242", R"(1700000000.000001 creat("/w/out.bin", 0644) = 3
1700000000.000002 write(3, "x"..., 9000) = 9000
1700000000.000003 pwrite64(3, "y", 10, 100000) = 10
1700000000.000004 writev(3, [{iov_base="a", iov_len=10}, {iov_base="b", iov_len=20}], 2) = 30
1700000000.000005 pwritev(3, [{iov_base="z"..., iov_len=8192}], 1, 40960) = 8192
1700000000.000006 pwritev2(3, [{iov_base="z"..., iov_len=4096}], 1, -1, 0) = 4096
1700000000.000007 close(3) = 0
1700000000.000008 open("rel.bin", O_WRONLY|O_APPEND) = 3
1700000000.000009 write(3, "q", 1) = 1
1700000000.000010 exit_group(0) = ?
1700000000.000011 +++ exited with 0 +++
)");
	uint64_t o = I("/w/out.bin"), rel = I("rel.bin"), t = 1700000000ULL * S;
	const uint8_t W = LLMCACHE_OP_WRITE;
	assert_all_same({rec(t + 2000, 4242, 0, o, 0, 3, W), rec(t + 3000, 4242, 0, o, 24, 1, W), rec(t + 4000, 4242, 0, o, 2, 1, W),
			 rec(t + 5000, 4242, 0, o, 10, 2, W), rec(t + 6000, 4242, 0, o, 2, 2, W), rec(t + 9000, 4242, 0, rel, 0, 1, W)},
			read_all(*r));
	assert_string_equal("rel.bin", r->paths().at({0, rel}).c_str());
}

static void strace_dup__dup_dup2_dup3_fcntl_share_offset__close_and_close_range_drop(void **)
{
	auto r = open_text("dup.strace", R"([pid   200] 11:00:00.000001 open("/w/a.bin", O_RDONLY) = 3
[pid   200] 11:00:00.000002 read(3, "..."..., 4096) = 4096
[pid   200] 11:00:00.000003 dup(3) = 4
[pid   200] 11:00:00.000004 read(4, "..."..., 4096) = 4096
[pid   200] 11:00:00.000005 read(3, "..."..., 4096) = 4096
[pid   200] 11:00:00.000006 dup2(3, 10) = 10
[pid   200] 11:00:00.000007 dup3(3, 11, O_CLOEXEC) = 11
[pid   200] 11:00:00.000008 fcntl(3, F_DUPFD_CLOEXEC, 0) = 5
[pid   200] 11:00:00.000009 fcntl(3, F_GETFL) = 0x8000 (flags O_RDONLY|O_LARGEFILE)
[pid   200] 11:00:00.000010 close(3) = 0
[pid   200] 11:00:00.000011 read(3, "x", 1) = 1
[pid   200] 11:00:00.000012 pread64(10, "x", 1, 40960) = 1
[pid   200] 11:00:00.000013 _llseek(11, 8192, [8192], SEEK_SET) = 0
[pid   200] 11:00:00.000014 read(5, "x"..., 100) = 100
[pid   200] 11:00:00.000015 close_range(4, 4294967295, 0) = 0
[pid   200] 11:00:00.000016 read(5, "x", 1) = 1
[pid   200] 11:00:00.000017 close(99) = -1 EBADF (Bad file descriptor)
)");
	uint64_t a = I("/w/a.bin");
	assert_all_same({rec(T(11, 0, 0, 2), 200, 0, a, 0, 1), rec(T(11, 0, 0, 4), 200, 0, a, 1, 1),
			 rec(T(11, 0, 0, 5), 200, 0, a, 2, 1), rec(T(11, 0, 0, 12), 200, 0, a, 10, 1),
			 rec(T(11, 0, 0, 14), 200, 0, a, 2, 1)},
			read_all(*r));
}

static void strace_processes__unfinished_resumed_threads_fork__tgid_and_shared_offsets(void **)
{
	auto r = open_text("procs.strace", R"(300  12:00:00.000001 openat(AT_FDCWD, "/w/m.bin", O_RDONLY) = 3</w/m.bin>
300  12:00:00.000002 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f, parent_tid=0x7f, exit_signal=0, stack=0x7f, stack_size=0x7fff80, tls=0x7f} => {parent_tid=[301]}, 88) = 301
301  12:00:00.000003 read(3,  <unfinished ...>
300  12:00:00.000004 pread64(3</w/m.bin>,  <unfinished ...>
301  12:00:00.000005 <... read resumed>"\0\0"..., 4096) = 4096
300  12:00:00.000006 <... pread64 resumed>"\0"..., 8192, 65536) = 8192
300  12:00:00.000007 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
302  12:00:00.000008 read(3</w/m.bin>, "x"..., 4096) = 4096
300  12:00:00.000009 <... clone resumed>, child_tidptr=0x7f) = 302
300  12:00:00.000010 read(3</w/m.bin>, ""..., 4096) = 4096
302  12:00:00.000011 +++ exited with 0 +++
301  12:00:00.000012 +++ exited with 0 +++
300  12:00:00.000013 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=302, si_uid=0, si_status=0, si_utime=0, si_stime=0} ---
300  12:00:00.000014 read(3</w/m.bin>, ""..., 4096) = 4096
300  12:00:00.000015 <... read resumed>"x", 1) = 1
300  12:00:00.000016 exit_group(0) = ?
300  12:00:00.000017 +++ exited with 0 +++
)");
	uint64_t m = I("/w/m.bin");
	assert_all_same({rec(T(12, 0, 0, 5), 300, 0, m, 0, 1), rec(T(12, 0, 0, 6), 300, 0, m, 16, 2),
			 rec(T(12, 0, 0, 8), 302, 0, m, 1, 1), rec(T(12, 0, 0, 10), 300, 0, m, 2, 1),
			 rec(T(12, 0, 0, 14), 300, 0, m, 3, 1)},
			read_all(*r));
	auto notes = r->notes();
	assert_int_equal(1, notes.size());
	assert_non_null(strstr(notes[0].c_str(), "1 calls resumed without their start"));
}

// Two clones in flight; the later one's pid loses it (a resume of another call). A new pid is then
// nobody's known child: it starts a process of its own (the fuzzer found a null dereference here).
static void strace_processes__latest_clone_dropped_while_another_in_flight__new_pid_own_process(void **)
{
	auto r = open_text("clones.strace", R"(500 14:00:00.000001 openat(AT_FDCWD, "/w/m.bin", O_RDONLY) = 3</w/m.bin>
500 14:00:00.000002 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
501 14:00:00.000003 clone(child_stack=NULL, flags=CLONE_VM|CLONE_FILES|CLONE_THREAD <unfinished ...>
501 14:00:00.000004 <... read resumed>"x", 1) = 1
520 14:00:00.000005 openat(AT_FDCWD, "/w/m.bin", O_RDONLY) = 4</w/m.bin>
520 14:00:00.000006 read(4</w/m.bin>, "x"..., 4096) = 4096
)");
	assert_all_same({rec(T(14, 0, 0, 6), 520, 0, I("/w/m.bin"), 0, 1)}, read_all(*r));
}

// strace -f writing to stderr: no pid until a second process is traced, and "strace: Process N attached"
// cutting lines in two.
static void strace_stderr_capture__attach_messages_and_unprefixed_main__joined_and_pid_learned(void **)
{
	auto r = open_text("stderr.strace", R"(execve("/usr/bin/python3", ["python3"], 0x7ffc /* 37 vars */) = 0
23:00:00.000001 openat(AT_FDCWD</w>, "m.bin", O_RDONLY) = 3</w/m.bin>
23:00:00.000002 read(3</w/m.bin>, "x"..., 4096) = 4096
23:00:00.000003 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLDstrace: Process 901 attached
, child_tidptr=0x7f) = 901
23:00:00.000004 read(3</w/m.bin>, strace: Process 903 attached
 <unfinished ...>
[pid   901] 23:00:00.000005 read(3</w/m.bin>, "x"..., 4096) = 4096
[pid   900] 23:00:00.000006 <... read resumed>"x"..., 4096) = 4096
strace: Process 904 attached
[pid   900] 23:00:00.000007 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLDstrace: Process 902 attached
 <unfinished ...>
[pid   902] 23:00:00.000008 read(3</w/m.bin>, "x"..., 4096) = 4096
[pid   900] 23:00:00.000009 <... clone resumed>, child_tidptr=0x7f) = 902
[pid   901] 23:00:00.000010 +++ exited with 0 +++
[pid   902] 23:00:00.000011 +++ exited with 0 +++
23:00:00.000012 read(3</w/m.bin>, "x"..., 4096) = 4096
)");
	uint64_t m = I("/w/m.bin");
	assert_all_same({rec(T(23, 0, 0, 2), 0, 0, m, 0, 1), rec(T(23, 0, 0, 5), 901, 0, m, 1, 1),
			 rec(T(23, 0, 0, 6), 900, 0, m, 2, 1), rec(T(23, 0, 0, 8), 902, 0, m, 3, 1),
			 rec(T(23, 0, 0, 12), 900, 0, m, 4, 1)},
			read_all(*r));
	assert_true(r->notes().empty());
}

static void strace_skips__errors_sockets_pipes_devices_signals_unknown__only_regular_files(void **)
{
	auto r = open_text("skips.strace", R"(400 13:00:00.000001 openat(AT_FDCWD</w>, "missing", O_RDONLY) = -1 ENOENT (No such file or directory)
400 13:00:00.000002 read(5<pipe:[123]>, "x", 1) = 1
400 13:00:00.000003 read(6<socket:[55]>, "x", 1) = 1
400 13:00:00.000004 write(7<TCP:[127.0.0.1:80->127.0.0.1:5555]>, "x", 1) = 1
400 13:00:00.000005 read(0</dev/pts/0<char 136:0>>, "x", 1) = 1
400 13:00:00.000006 read(8<anon_inode:[eventfd]>, "\1\0\0\0\0\0\0\0", 8) = 8
400 13:00:00.000007 read(9</proc/self/status>, "Name:"..., 1024) = 1000
400 13:00:00.000008 getpid() = 400
400 13:00:00.000009 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=401, si_uid=0, si_status=0, si_utime=0, si_stime=0} ---
400 13:00:00.000010 rt_sigreturn({mask=[]}) = 0
strace: Process 401 attached
400 13:00:00.000011 ????( <unfinished ...>
400 13:00:00.000012 read(3</w/m.bin>, 0x7ffd, 4096) = -1 EAGAIN (Resource temporarily unavailable)
400 13:00:00.000013 read(3</w/m.bin>, "x", 1) = ? <unavailable>
400 13:00:00.000014 write(4</w/a,b) \"q\"\74x\76.bin>, "x", 1) = 1 <0.000012>
400 13:00:00.000015 +++ killed by SIGKILL +++
)");
	const char *odd = "/w/a,b) \"q\"<x>.bin";
	assert_all_same({rec(T(13, 0, 0, 14), 400, 0, I(odd), 0, 1, LLMCACHE_OP_WRITE)}, read_all(*r));
	assert_int_equal(1, r->paths().size());
	assert_string_equal(odd, r->paths().at({0, I(odd)}).c_str());
}

static void strace_mmap__regular_files_mapped__note_lists_them_and_flag_set(void **)
{
	auto r = open_text("mmap.strace", R"(500 14:00:00.000001 openat(AT_FDCWD, "/w/model.gguf", O_RDONLY) = 3</w/model.gguf>
500 14:00:00.000002 mmap(NULL, 590000000, PROT_READ, MAP_SHARED, 3</w/model.gguf>, 0) = 0x7f0000000000
500 14:00:00.000003 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f1000000000
500 14:00:00.000004 mmap(NULL, 41567, PROT_READ, MAP_PRIVATE, 4</etc/ld.so.cache>, 0) = 0x7f2000000000
500 14:00:00.000005 mmap(NULL, 1974096, PROT_READ, MAP_PRIVATE|MAP_DENYWRITE, 5</usr/lib/x86_64-linux-gnu/libc.so.6>, 0) = 0x7f3000000000
500 14:00:00.000006 mmap(0x7f3000026000, 1400832, PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE, 5</usr/lib/x86_64-linux-gnu/libc.so.6>, 0x26000) = 0x7f3000026000
500 14:00:00.000007 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 6</w/tok.json>, 0) = 0x7f4000000000
500 14:00:00.000008 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 6</w/tok.json>, 4096) = 0x7f4000001000
500 14:00:00.000009 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 7</w/bad>, 0) = -1 ENODEV (No such device)
500 14:00:00.000010 munmap(0x7f0000000000, 590000000) = 0
)");
	assert_true(read_all(*r).empty());
	auto notes = r->notes();
	assert_int_equal(1, notes.size());
	assert_string_equal("2 regular files were mmapped (/w/model.gguf, /w/tok.json): strace cannot see page accesses to "
			    "mmapped memory, so the trace misses them; record with llmtrace to capture them",
			    notes[0].c_str());
	assert_int_equal(LLMCACHE_TRACE_F_MMAP_UNSEEN, r->flags());
}

static void strace_time__midnight_wrap_seconds_only_and_none__times(void **)
{
	auto r = open_text("wrap.strace", R"(600 23:59:59.999000 read(3</w/m.bin>, "x", 1) = 1
600 00:00:00.001000 read(3</w/m.bin>, "x", 1) = 1
600 00:00:00.000500 read(3</w/m.bin>, "x", 1) = 1
600 00:00:01 read(3</w/m.bin>, "x", 1) = 1
)");
	const uint64_t day = 86400 * S;
	auto v = read_all(*r);
	assert_int_equal(4, v.size());
	assert_int_equal(T(23, 59, 59, 999000), v[0].time_ns);
	assert_int_equal(day + 1000000, v[1].time_ns);
	assert_int_equal(day + 500000, v[2].time_ns);
	assert_int_equal(day + S, v[3].time_ns);

	r = open_text("notime.strace", "read(3</w/m.bin>, \"x\", 4097)                 = 4097\n");
	assert_all_same({rec(0, 0, 0, I("/w/m.bin"), 0, 2)}, read_all(*r));
}

static void strace_truncated_last_line__error_names_the_line(void **)
{
	auto r = open_text("cut.strace", "700 15:00:00.000001 read(3</w/m.bin>, \"x\", 1) = 1\n"
					   "700 15:00:00.000002 read(3</w/m.bin>, \"ab");
	llmcache_access a;
	assert_true(r->next(a));
	expect_trace_error([&] { r->next(a); }, 2, {"cut.strace:line 2:", "cut short"});

	r = open_text("cut2.strace", "700 15:00:00.000001 getpid() = 700\n700 15:00:00.000002 +++ exited with 0 ++");
	expect_trace_error([&] { read_all(*r); }, 2, {"line 2:"});
}

static void expect_line_error(const std::string &line, std::initializer_list<const char *> parts)
{
	auto r = open_text("bad.strace", "800 16:00:00.000001 getpid() = 800\n" + line + "\n800 16:00:00.000003 getpid() = 800\n");
	expect_trace_error([&] { read_all(*r); }, 2, parts);
}

static void strace_malformed_line__error_with_line_and_what_was_expected(void **)
{
	expect_line_error("800 16:00:00.000002 read(3</w/m.bin>, \"abc\", 10", {"bad.strace:line 2:", "read()", "expected ')'"});
	expect_line_error("800 16:00:00.000002 read(3</w/m.bin>, \"abc", {"closing '\"'"});
	expect_line_error("800 16:00:00.000002 pread64(3</w/m.bin>, \"x\", 1, zzz) = 1", {"a number as argument 4", "'zzz'"});
	expect_line_error("800 16:00:00.000002 read(3</w/m.bin>, \"x\", 1) = abc", {"a number as the result"});
	expect_line_error("800 16:00:00.000002 read(3</w/m.bin>, \"x\", 1)", {"' = <result>'"});
	expect_line_error("800 16:00:00.000002 read(x</w/m.bin>, \"x\", 1) = 1", {"a file descriptor as argument 1"});
	expect_line_error("800 16:00:00.000002 lseek(3</w/m.bin>, 5) = 5", {"3 arguments (fd, offset, whence), found 2"});
	expect_line_error("800 16:00:00.000002 read(3</w/m.bin, \"x\", 1) = 1", {"closing '>'"});
}

static std::string data_file(const char *name)
{
	std::string here = __FILE__;
	return here.substr(0, here.rfind('/')) + "/../data/trace/" + name;
}

// Real output of a Python script (pid 9040) that reads f.bin at known offsets, writes out.bin, starts
// two threads (9081, 9082) that pread 4 blocks each, and forks a child (9083) that reads the shared fd.
static void strace_real_output__python_threads_fork__expected_accesses(void **)
{
	auto r = open_reader(data_file("python-threads.strace"));
	uint64_t f = I("/tmp/llmfix/f.bin"), o = I("/tmp/llmfix/out.bin");
	const uint8_t W = LLMCACHE_OP_WRITE;
	struct E {
		uint32_t pid;
		uint64_t inode, first;
		uint32_t nr;
		uint8_t op;
	} want[] = {
		{9040, f, 0, 2, 0}, {9040, f, 2, 1, 0}, {9040, f, 1, 2, 0}, {9040, f, 5, 2, 0}, {9040, f, 7, 1, 0},
		{9040, o, 0, 3, W}, {9040, o, 24, 1, W}, {9040, o, 2, 1, W},
		{9040, f, 0, 1, 0}, {9040, f, 1, 1, 0}, {9040, f, 2, 1, 0}, {9040, f, 3, 1, 0},
		{9040, f, 4, 1, 0}, {9040, f, 5, 1, 0}, {9040, f, 6, 1, 0}, {9040, f, 7, 1, 0},
		{9083, f, 8, 1, 0}, {9040, f, 8, 1, 0},
	};
	auto got = read_all(*r);
	assert_int_equal(sizeof want / sizeof want[0], got.size());
	for (size_t i = 0; i < got.size(); i++) {
		assert_int_equal(want[i].pid, got[i].pid);
		assert_int_equal(want[i].inode, got[i].inode);
		assert_int_equal(want[i].first, got[i].first_block);
		assert_int_equal(want[i].nr, got[i].nr_blocks);
		assert_int_equal(want[i].op, got[i].op);
	}
	assert_int_equal(T(23, 31, 59, 100416), got[0].time_ns);
	assert_int_equal(T(23, 31, 59, 103265), got[8].time_ns); // the resumed line's time
	auto notes = r->notes();
	assert_int_equal(2, notes.size());
	assert_non_null(strstr(notes[0].c_str(), "1 regular file was mmapped (/tmp/llmfix/f.bin)"));
	assert_non_null(strstr(notes[1].c_str(), "2 calls resumed without their start"));
}

// Converts IN to CSV: the integration test's way to compare traces of any format.
static int dump_csv(const char *in, const char *format, const char *out)
{
	try {
		auto r = std::strcmp(format, "auto") == 0 ? open_reader(in) : open_reader(in, parse_format(format));
		auto w = open_writer(out, Format::csv, "test_trace_strace --dump-csv");
		std::set<FileKey> named;
		llmcache_access a;
		while (r->next(a)) {
			FileKey k{a.dev, a.inode};
			if (!named.count(k)) {
				if (auto it = r->paths().find(k); it != r->paths().end()) {
					w->name(k.first, k.second, it->second);
					named.insert(k);
				}
			}
			w->write(a);
		}
		w->close();
		for (const auto &n : r->notes())
			std::cerr << "note: " << n << "\n";
		return 0;
	} catch (const std::exception &e) {
		std::cerr << "error: " << e.what() << "\n";
		return 1;
	}
}

// Bounds: a read that claims more than one call moves, an offset that ends past 2^63 bytes, a successful
// pread at a negative offset (dropped silently before), and a file without newlines (/dev/zero).
static void strace_bounds__huge_counts_negative_offsets_endless_lines__errors_name_the_line(void **)
{
	const std::string ok = "700 15:00:00.000001 read(3</w/m.bin>, \"x\", 1) = 1\n";
	auto r = open_text("huge.strace", ok + "700 15:00:00.000002 read(3</w/m.bin>, \"x\", 1099511627776) = 1099511627776\n");
	expect_trace_error([&] { read_all(*r); }, 2, {"huge.strace:line 2:", "1099511627776 bytes"});
	r = open_text("end.strace", ok + "700 15:00:00.000002 pread64(3</w/m.bin>, \"x\", 4096, 9223372036854771712) = 4096\n");
	expect_trace_error([&] { read_all(*r); }, 2, {"end.strace:line 2:", "past 2^63"});
	r = open_text("neg.strace", ok + "700 15:00:00.000002 pread64(3</w/m.bin>, \"x\", 4096, -8192) = 4096\n");
	expect_trace_error([&] { read_all(*r); }, 2, {"neg.strace:line 2:", "offset -8192"});
	r = open_text("long.strace", ok + std::string(3 << 20, 'x') + "\n");
	expect_trace_error([&] { read_all(*r); }, 2, {"long.strace:line 2:", "longer than 1048576"});
	expect_trace_error([&] { read_all(*open_reader("/dev/zero", Format::strace)); }, 1, {"line 1:", "longer than"});
}

// Every process may hold an fd table of up to 2^20 entries; their sum is bounded, so that a few
// thousand short lines cannot claim gigabytes.
static void strace_fd_tables__many_processes_with_high_fds__bounded_error(void **)
{
	std::string text;
	for (int pid = 1; pid <= 20; pid++)
		text += std::to_string(pid) + " 15:00:00.000001 openat(AT_FDCWD, \"/w/m.bin\", O_RDONLY) = 1000000\n";
	auto r = open_text("fds.strace", text);
	expect_trace_error([&] { read_all(*r); }, 17, {"fds.strace:line 17:", "fd tables"});
}

int main(int argc, char **argv)
{
	if (argc == 5 && std::strcmp(argv[1], "--dump-csv") == 0)
		return dump_csv(argv[2], argv[3], argv[4]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(path_inode__fnv1a_64__known_values),
		cmocka_unit_test(strace_offsets__read_pread_lseek_readv_preadv__blocks_from_tracked_offset),
		cmocka_unit_test(strace_writes__no_pid_prefix_epoch_times__write_records_pid_from_ff_suffix),
		cmocka_unit_test(strace_dup__dup_dup2_dup3_fcntl_share_offset__close_and_close_range_drop),
		cmocka_unit_test(strace_processes__unfinished_resumed_threads_fork__tgid_and_shared_offsets),
		cmocka_unit_test(strace_processes__latest_clone_dropped_while_another_in_flight__new_pid_own_process),
		cmocka_unit_test(strace_stderr_capture__attach_messages_and_unprefixed_main__joined_and_pid_learned),
		cmocka_unit_test(strace_skips__errors_sockets_pipes_devices_signals_unknown__only_regular_files),
		cmocka_unit_test(strace_mmap__regular_files_mapped__note_lists_them_and_flag_set),
		cmocka_unit_test(strace_time__midnight_wrap_seconds_only_and_none__times),
		cmocka_unit_test(strace_truncated_last_line__error_names_the_line),
		cmocka_unit_test(strace_malformed_line__error_with_line_and_what_was_expected),
		cmocka_unit_test(strace_real_output__python_threads_fork__expected_accesses),
		cmocka_unit_test(strace_bounds__huge_counts_negative_offsets_endless_lines__errors_name_the_line),
		cmocka_unit_test(strace_fd_tables__many_processes_with_high_fds__bounded_error),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
