// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Random ioctls and sysfs writes against a loaded llmcache.ko for a bounded time, from a privileged
 * and an unprivileged process, while other processes read the files the fuzz registers (so the access
 * hooks, the pin, HOT and SEQ workers and the shrinker run under it). Run as root inside the VM
 * (tests/vm/fuzz-check.sh, which checks that the kernel log stays clean through tests/vm/run.sh):
 *
 *   llmcache_fuzz [--seed N] [--seconds S] [--dir DIR]
 *
 * Processes, each with its own generator derived from the seed (the interleaving is the scheduler's,
 * so a seed replays each process's choices, not their timing):
 * - ioctl (root, two of them): every command of include/uapi/llmcache.h with structured random
 *   payloads (descriptors of regular files, directories, pipes, sockets, memfds, sysfs and 9p files,
 *   the device itself, closed and out-of-range numbers; random flags, limits, targets, sizes) and
 *   random command numbers; arguments NULL, unmapped, in kernel space, or ending where a page becomes
 *   inaccessible. Unknown commands must fail with ENOTTY, a NULL argument with EFAULT, a nonzero
 *   flags word with EINVAL, and every failure must carry an errno the command can return.
 * - sysfs (root): random text (numbers in every base, signs, overflow, spaces, garbage, empty, NUL
 *   bytes, 4 KiB and more) written to every writable file under /sys/kernel/llmcache. A write that
 *   kstrtou64 (kstrtouint for enable) accepts must succeed and read back as written; any other must
 *   fail with EINVAL and change nothing.
 * - churn (root): reads, mmaps, truncates and rewrites the files the ioctl processes register, and
 *   reads every file under /sys/kernel/llmcache while per-file directories come and go.
 * - pressure (root): takes all but 32 MiB of MemAvailable for a moment every second or so, so that
 *   global reclaim runs the module's shrinker amid the rest.
 * - unprivileged (uid/gid nobody, no supplementary groups): opening /dev/llmcache must fail with
 *   EACCES, opening any sysfs file for writing with EACCES; reading every sysfs file works.
 * - no CAP_SYS_ADMIN (uid 0 with that capability dropped): opening /dev/llmcache must fail with EPERM.
 * Then, with everything stopped, the module must still work: register a fresh file, read it, see its
 * accesses in FILE_STATS and the registration in STATS, unregister it.
 *
 * Exits 0 when every check held, 1 otherwise (each failure printed with the operation that caused it).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include "../../include/uapi/llmcache.h"
#include "meminfo.h"

#define DEV "/dev/" LLMCACHE_DEV_NAME
#define SYSFS LLMCACHE_SYSFS_DIR
#define NR_FILES 6
#define MAX_SYSFS 512
#define NOBODY 65534

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static int one_in(uint64_t n)
{
	return below(n) == 0;
}

static void seed_rng(uint64_t seed, int worker)
{
	rng_state = (seed + 1) * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)worker << 32 | 0x5bd1e995);
	if (!rng_state)
		rng_state = 1;
	for (int i = 0; i < 16; i++)
		rnd();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *who = "main";
static unsigned long failures;

#define FAIL(...)								\
	do {									\
		fprintf(stderr, "FAIL [%s]: ", who);				\
		fprintf(stderr, __VA_ARGS__);					\
		fputc('\n', stderr);						\
		failures++;							\
	} while (0)

/* ---- the descriptors the ioctl payloads name ---------------------------------------------------- */

static char file_paths[NR_FILES][256];
static int file_fds[NR_FILES];
static int misc_fds[16], nr_misc;
static int dev_fd = -1;

/* A file of blocks 4 KiB blocks of varied content at dir/name; its O_RDWR descriptor. */
static int make_file(const char *dir, const char *name, int blocks, char *path, size_t size)
{
	char block[4096];
	int fd, i;

	snprintf(path, size, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	for (i = 0; i < blocks; i++) {
		memset(block, 'a' + i % 26, sizeof(block));
		if (write(fd, block, sizeof(block)) != sizeof(block)) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

static void add_misc(int fd)
{
	if (fd >= 0 && nr_misc < (int)(sizeof(misc_fds) / sizeof(misc_fds[0])))
		misc_fds[nr_misc++] = fd;
}

static int setup_fds(const char *dir)
{
	static const int blocks[NR_FILES] = { 16, 256, 1024, 2048, 4096, 64 };
	int pipefd[2], sv[2], i;
	char name[32];

	for (i = 0; i < NR_FILES; i++) {
		snprintf(name, sizeof(name), "fuzz-%d.bin", i);
		file_fds[i] = make_file(dir, name, blocks[i], file_paths[i], sizeof(file_paths[i]));
		if (file_fds[i] < 0) {
			FAIL("cannot create %s: %s", file_paths[i], strerror(errno));
			return -1;
		}
	}
	add_misc(open(dir, O_RDONLY | O_DIRECTORY));
	add_misc(open("/dev/null", O_RDWR));
	if (!pipe(pipefd)) {
		add_misc(pipefd[0]);
		add_misc(pipefd[1]);
	}
	if (!socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		add_misc(sv[0]);
	i = memfd_create("llmcache-fuzz", 0);
	if (i >= 0 && ftruncate(i, 1 << 20) == 0)
		add_misc(i);
	add_misc(open(SYSFS "/pin_budget", O_RDONLY));
	add_misc(open("/proc/self/status", O_RDONLY));
	add_misc(open("/etc/hostname", O_RDONLY)); /* the host's root over 9p */
	add_misc(open(file_paths[0], O_PATH));
	add_misc(open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY));
	add_misc(eventfd(0, 0));
	add_misc(open(file_paths[1], O_RDONLY)); /* a second open of a registered file */
	return 0;
}

/* A descriptor for a payload: mostly the scratch files, else anything. */
static int pick_fd(void)
{
	static const int odd[] = { -1, -2, INT_MIN, INT_MAX, 0, 1, 2, 1023, 4096, 1 << 20 };

	switch (below(8)) {
	case 0: case 1: case 2: case 3:
		return file_fds[below(NR_FILES)];
	case 4: case 5:
		return nr_misc ? misc_fds[below(nr_misc)] : -1;
	case 6:
		return dev_fd;
	default:
		return odd[below(sizeof(odd) / sizeof(odd[0]))];
	}
}

static uint64_t pick_u64(void)
{
	static const uint64_t odd[] = { 0, 1, 4095, 4096, 4097, 1 << 20, 1ULL << 31, 1ULL << 32, 1ULL << 40,
					(1ULL << 63) - 1, 1ULL << 63, UINT64_MAX, UINT64_MAX - 4095 };

	switch (below(4)) {
	case 0:
		return odd[below(sizeof(odd) / sizeof(odd[0]))];
	case 1:
		return below(64) << 12;
	case 2:
		return rnd() >> below(64);
	default:
		return rnd();
	}
}

/* Mostly 0 (the only valid value), sometimes one bit, sometimes anything. */
static uint32_t pick_flags(void)
{
	if (!one_in(4))
		return 0;
	return one_in(2) ? 1u << below(32) : (uint32_t)rnd();
}

/* ---- ioctls --------------------------------------------------------------------------------------- */

struct cmd_desc {
	const char *name;
	unsigned long cmd;
	size_t size;
	int errs[10]; /* what a failure may say, 0-terminated */
};

static const struct cmd_desc cmds[] = {
	{ "REGISTER", LLMCACHE_IOC_REGISTER, sizeof(struct llmcache_ioc_file),
	  { EFAULT, EINVAL, EBADF, EEXIST, ENOMEM } },
	{ "UNREGISTER", LLMCACHE_IOC_UNREGISTER, sizeof(struct llmcache_ioc_file),
	  { EFAULT, EINVAL, EBADF, ENOENT } },
	{ "STATS", LLMCACHE_IOC_STATS, sizeof(struct llmcache_ioc_stats), { EFAULT } },
	{ "FILE_STATS", LLMCACHE_IOC_FILE_STATS, sizeof(struct llmcache_ioc_file_stats),
	  { EFAULT, EINVAL, EBADF, ENOENT } },
	{ "SET_FILE_OPTS", LLMCACHE_IOC_SET_FILE_OPTS, sizeof(struct llmcache_ioc_file_opts),
	  { EFAULT, EINVAL, EBADF, ENOENT } },
	{ "GET_FILE_OPTS", LLMCACHE_IOC_GET_FILE_OPTS, sizeof(struct llmcache_ioc_file_opts),
	  { EFAULT, EINVAL, EBADF, ENOENT } },
	{ "SET_AUTO", LLMCACHE_IOC_SET_AUTO, sizeof(struct llmcache_ioc_auto),
	  { EFAULT, EINVAL, EBADF, ESRCH, ENOTDIR, ENOENT, EOPNOTSUPP } },
	{ "LOOPS", LLMCACHE_IOC_LOOPS, sizeof(struct llmcache_ioc_loops), { EFAULT, EINVAL, ENOMEM } },
	{ "KV_STATS", LLMCACHE_IOC_KV_STATS, sizeof(struct llmcache_ioc_kv_stats), { EFAULT, EINVAL } },
};
#define NR_CMDS (sizeof(cmds) / sizeof(cmds[0]))

static unsigned long calls[NR_CMDS + 1], successes[NR_CMDS + 1];

/* Two pages: the first read-write, the second inaccessible; payloads can end at the boundary. */
static unsigned char *guard_area;
static long page_size;

static int errno_allowed(const struct cmd_desc *c, int e)
{
	for (int i = 0; c->errs[i]; i++)
		if (c->errs[i] == e)
			return 1;
	return 0;
}

/* Fill a payload for command c in buf (size bytes); *flags_set says whether a must-be-0 word is not 0. */
static void fill_payload(const struct cmd_desc *c, void *buf, int *flags_set, unsigned char *loops_buf,
			 size_t loops_room)
{
	*flags_set = 0;
	if (one_in(16)) { /* plain noise */
		for (size_t i = 0; i < c->size; i++)
			((unsigned char *)buf)[i] = rnd();
		return;
	}
	memset(buf, 0, c->size);
	switch (c->cmd) {
	case LLMCACHE_IOC_REGISTER:
	case LLMCACHE_IOC_UNREGISTER: {
		struct llmcache_ioc_file *r = buf;

		r->fd = pick_fd();
		r->flags = pick_flags();
		r->id = one_in(2) ? 0 : rnd();
		*flags_set = r->flags != 0;
		break;
	}
	case LLMCACHE_IOC_STATS:
		break;
	case LLMCACHE_IOC_FILE_STATS: {
		struct llmcache_ioc_file_stats *r = buf;

		r->fd = pick_fd();
		r->flags = pick_flags();
		*flags_set = r->flags != 0;
		break;
	}
	case LLMCACHE_IOC_SET_FILE_OPTS:
	case LLMCACHE_IOC_GET_FILE_OPTS: {
		struct llmcache_ioc_file_opts *r = buf;

		r->fd = pick_fd();
		r->flags = one_in(4) ? pick_flags() : one_in(2) ? 0 : (uint32_t)below(LLMCACHE_FILE_FLAGS_ALL + 1);
		r->pin_limit = !one_in(4) ? 0 : pick_u64();
		break;
	}
	case LLMCACHE_IOC_SET_AUTO: {
		struct llmcache_ioc_auto r = { 0 };

		r.mode = one_in(8) ? (uint32_t)rnd() : (uint32_t)below(LLMCACHE_AUTO_CGROUP + 1);
		switch (below(6)) {
		case 0: r.target = getpid(); break;
		case 1: r.target = getppid(); break;
		case 2: r.target = 1; break;
		case 3: r.target = pick_fd(); break;
		case 4: r.target = (int32_t)rnd(); break;
		default: r.target = -(int32_t)below(3); break;
		}
		r.min_size = one_in(3) ? pick_u64() : (1 + below(64)) << 16;
		r.flags = pick_flags();
		r.pad = one_in(8) ? (uint32_t)rnd() : 0;
		*flags_set = r.flags || r.pad;
		memcpy(buf, &r, sizeof(r));
		break;
	}
	case LLMCACHE_IOC_LOOPS: {
		struct llmcache_ioc_loops *r = buf;

		switch (below(6)) {
		case 0: r->loops = 0; break;
		case 1: r->loops = (uintptr_t)(guard_area + page_size - sizeof(struct llmcache_loop)); break;
		case 2: r->loops = rnd(); break;
		case 3: r->loops = 0xffff888000000000ULL; break;
		default: r->loops = (uintptr_t)loops_buf; break;
		}
		r->max = one_in(3) ? (uint32_t)pick_u64() : (uint32_t)below(loops_room / sizeof(struct llmcache_loop) + 1);
		r->flags = pick_flags();
		*flags_set = r->flags != 0;
		if (!r->max && r->loops != (uintptr_t)loops_buf)
			r->max = one_in(2);
		break;
	}
	case LLMCACHE_IOC_KV_STATS: {
		struct llmcache_ioc_kv_stats *r = buf;
		int i;

		r->size = one_in(4) ? (uint32_t)pick_u64() : sizeof(*r);
		r->flags = pick_flags();
		r->sessions = rnd();
		r->beta_milli = below(2000);
		r->selects = pick_u64();
		for (i = 0; i < 3; i++)
			r->reserved[i] = one_in(8) ? rnd() : 0;
		for (i = 0; i < LLMCACHE_KV_NR_POOLS; i++) {
			r->pool[i].bytes = pick_u64();
			r->pool[i].tokens = pick_u64();
			r->pool[i].spills = pick_u64();
			r->pool[i].score_latency_ns = pick_u64();
		}
		*flags_set = r->flags || r->reserved[0] || r->reserved[1] || r->reserved[2];
		break;
	}
	}
}

static int known_cmd(unsigned long cmd)
{
	for (size_t i = 0; i < NR_CMDS; i++)
		if (cmds[i].cmd == cmd)
			return 1;
	return 0;
}

/*
 * Commands the VFS answers itself for any descriptor (FIOCLEX, FIONBIO, FIGETBSZ, FIFREEZE, FICLONE,
 * FS_IOC_*: types 'T', 'X', 'f', 0x94 and 0): they never reach the module.
 */
static int vfs_cmd(unsigned long cmd)
{
	unsigned type = _IOC_TYPE(cmd);

	return type == 'T' || type == 'X' || type == 'f' || type == 0x94 || type == 0;
}

/* A command number the module does not know: its magic with other numbers, sizes or directions, or another magic. */
static unsigned long random_cmd(void)
{
	unsigned long cmd;

	do {
		switch (below(4)) {
		case 0: /* a known number with the wrong size or direction */
			cmd = _IOC(below(4), LLMCACHE_IOC_MAGIC, 1 + below(9), below(1 << 14));
			break;
		case 1:
			cmd = _IOC(below(4), LLMCACHE_IOC_MAGIC, below(256), below(512));
			break;
		case 2:
			cmd = (unsigned long)(uint32_t)rnd();
			break;
		default: /* neighbours' ioctls: block devices, tun, sockets */
			cmd = (unsigned long[]){ 0x1260 /* BLKGETSIZE */, 0x80081272 /* BLKGETSIZE64 */,
						 0x400454ca /* TUNSETIFF */, 0x8915 /* SIOCGIFADDR */ }[below(4)];
			break;
		}
	} while (known_cmd(cmd) || vfs_cmd(cmd));
	return cmd;
}

static double last_unregister;

static void ioctl_one(void)
{
	static unsigned char payload[4096] __attribute__((aligned(8)));
	static unsigned char loops_buf[64 * sizeof(struct llmcache_loop)] __attribute__((aligned(8)));
	unsigned long cmd;
	const struct cmd_desc *c = NULL;
	int flags_set = 0, arg_kind, e;
	void *arg;
	long rc;
	size_t ci;

	if (one_in(6)) {
		cmd = random_cmd();
		ci = NR_CMDS;
	} else {
		ci = below(NR_CMDS);
		/* Files stay registered for a while (an unregistration per 0.2 s), so that loops, pins and drops happen. */
		if (cmds[ci].cmd == LLMCACHE_IOC_UNREGISTER) {
			if (now_s() < last_unregister + 0.2)
				ci = 0;
			else
				last_unregister = now_s();
		}
		c = &cmds[ci];
		cmd = c->cmd;
		fill_payload(c, payload, &flags_set, loops_buf, sizeof(loops_buf));
	}
	/* 0: the payload; 1: NULL; 2: ends inside the inaccessible page; 3: kernel space; 4: unmapped; 5: noise */
	arg_kind = below(20);
	arg_kind = arg_kind < 14 ? 0 : arg_kind - 13;
	switch (arg_kind) {
	case 0: arg = payload; break;
	case 1: arg = NULL; break;
	case 2:
		arg = guard_area + page_size - (c ? 1 + below(c->size - 1) : 8); /* part of it, never all */
		if (c)
			memcpy(arg, payload, guard_area + page_size - (unsigned char *)arg);
		break;
	case 3: arg = (void *)0xffffffff81000000UL; break;
	case 4: arg = (void *)(uintptr_t)(guard_area + page_size); break;
	default: arg = (void *)(uintptr_t)rnd(); break;
	}
	calls[ci]++;
	rc = ioctl(dev_fd, cmd, arg);
	e = errno;
	if (!rc) {
		successes[ci]++;
		if (!c)
			FAIL("unknown ioctl %#lx succeeded", cmd);
		else if (arg_kind)
			FAIL("%s with argument kind %d (%p) succeeded", c->name, arg_kind, arg);
		else if (flags_set)
			FAIL("%s with a nonzero flags/reserved word succeeded", c->name);
		return;
	}
	if (!c) {
		if (e != ENOTTY)
			FAIL("unknown ioctl %#lx: %s, not ENOTTY", cmd, strerror(e));
		return;
	}
	if (!errno_allowed(c, e))
		FAIL("%s (argument kind %d): unexpected %s (%d)", c->name, arg_kind, strerror(e), e);
	else if ((arg_kind == 1 || arg_kind == 3) && e != EFAULT)
		FAIL("%s with argument %p: %s, not EFAULT", c->name, arg, strerror(e));
	else if (arg_kind == 0 && flags_set && e != EINVAL && e != EFAULT)
		FAIL("%s with a nonzero flags/reserved word: %s, not EINVAL", c->name, strerror(e));
}

static void ioctl_worker(double deadline)
{
	while (now_s() < deadline)
		for (int i = 0; i < 64; i++)
			ioctl_one();
	printf("[%s] calls/successes:", who);
	for (size_t i = 0; i <= NR_CMDS; i++)
		printf(" %s %lu/%lu", i < NR_CMDS ? cmds[i].name : "unknown", calls[i], successes[i]);
	printf("\n");
}

/* ---- sysfs ---------------------------------------------------------------------------------------- */

static char sysfs_files[MAX_SYSFS][256];
static int nr_sysfs;

static void sysfs_walk(const char *dir, int depth)
{
	char path[256];
	struct dirent *d;
	struct stat st;
	DIR *dp = opendir(dir);

	if (!dp)
		return;
	while ((d = readdir(dp)) && nr_sysfs < MAX_SYSFS) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (lstat(path, &st))
			continue;
		if (S_ISDIR(st.st_mode) && depth < 4)
			sysfs_walk(path, depth + 1);
		else if (S_ISREG(st.st_mode))
			snprintf(sysfs_files[nr_sysfs++], sizeof(sysfs_files[0]), "%s", path);
	}
	closedir(dp);
}

static int read_all(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return (int)n;
}

/* Read every file of the module's sysfs tree (per-file and per-loop directories may vanish meanwhile). */
static void sysfs_read_all(void)
{
	char buf[8192];
	int rc;

	nr_sysfs = 0;
	sysfs_walk(SYSFS, 0);
	for (int i = 0; i < nr_sysfs; i++) {
		rc = read_all(sysfs_files[i], buf, sizeof(buf));
		if (rc < 0 && rc != -ENOENT && rc != -ENODEV)
			FAIL("reading %s: %s", sysfs_files[i], strerror(-rc));
	}
}

/*
 * What the kernel's kstrtou64 (base 0) makes of s (the first len bytes; sysfs stops at a NUL): 1 and
 * *v when it accepts it, 0 when it refuses it. A single trailing newline is allowed.
 */
static int kstrtou64_like(const char *s, size_t len, uint64_t *v)
{
	unsigned base = 10;
	size_t i = 0;
	uint64_t x = 0;
	int digits = 0;

	len = strnlen(s, len);
	if (len && s[len - 1] == '\n')
		len--;
	if (i < len && s[i] == '+')
		i++;
	if (i + 1 < len && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
		/* "0x" needs a hex digit after it, else it is the digit 0 followed by garbage */
		if (i + 2 < len && strchr("0123456789abcdefABCDEF", s[i + 2]) && s[i + 2]) {
			base = 16;
			i += 2;
		} else {
			base = 8;
		}
	} else if (i < len && s[i] == '0') {
		base = 8;
	}
	for (; i < len; i++) {
		unsigned d;
		char ch = s[i];

		if (ch >= '0' && ch <= '9')
			d = ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			d = ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			d = ch - 'A' + 10;
		else
			return 0;
		if (d >= base)
			return 0;
		if (x > (UINT64_MAX - d) / base)
			return 0; /* -ERANGE: refused as well */
		x = x * base + d;
		digits++;
	}
	if (!digits)
		return 0;
	*v = x;
	return 1;
}

/* Random text for a tunable; *len its length (it may hold NUL bytes). */
static void random_text(char *buf, size_t room, size_t *len)
{
	static const char *const fixed[] = {
		"", "\n", "0", "1", "2", "-1", "+1", " 1", "1 ", "1\n\n", "0x", "0x\n", "0x10", "0X1f", "010", "08",
		"09\n", "18446744073709551615", "18446744073709551616", "0xffffffffffffffff", "0x10000000000000000",
		"4294967295", "4294967296", "1e6", "1MiB", "abc", "0b1", "1.5", "++1", "-0", "00", "\t1", "1\t",
		"99999999999999999999999999", "0777777777777777777777", "02000000000000000000000",
	};
	size_t n, i;

	switch (below(7)) {
	case 0:
		*len = snprintf(buf, room, "%s", fixed[below(sizeof(fixed) / sizeof(fixed[0]))]);
		return;
	case 1:
		*len = snprintf(buf, room, "%llu%s", (unsigned long long)pick_u64(), one_in(2) ? "\n" : "");
		return;
	case 2:
		*len = snprintf(buf, room, "0x%llx%s", (unsigned long long)pick_u64(), one_in(2) ? "\n" : "");
		return;
	case 3:
		*len = snprintf(buf, room, "0%llo", (unsigned long long)pick_u64());
		return;
	case 4: /* a sane value, so that pins, protection and drops really happen */
		*len = snprintf(buf, room, "%llu\n", (unsigned long long)(below(3) ? below(4096) << 12 : below(2)));
		return;
	case 5: /* noise, NUL bytes included */
		n = below(64);
		for (i = 0; i < n && i < room; i++)
			buf[i] = one_in(3) ? "0123456789\n x+-"[below(15)] : (char)rnd();
		*len = n;
		return;
	default: /* long: a page and more */
		n = 4000 + below(200);
		for (i = 0; i < n && i < room; i++)
			buf[i] = one_in(2) ? '0' : '1';
		*len = n;
		return;
	}
}

static int is_enable(const char *path)
{
	return !strcmp(path, SYSFS "/enable");
}

/* A value that makes the module work: pins, protection and drops on the fuzz's files (29 MiB). */
static void sane_text(const char *path, char *buf, size_t room, size_t *len)
{
	uint64_t v;

	if (is_enable(path))
		v = !one_in(8);
	else if (strstr(path, "pin_budget"))
		v = below(8192) << 12;
	else if (strstr(path, "hot_reserve"))
		v = below(256) << 12;
	else if (strstr(path, "_ns"))
		v = below(100) * 1000000;
	else
		v = below(2) ? 0 : (1 + below(1000)) << 20;
	*len = snprintf(buf, room, "%llu\n", (unsigned long long)v);
}

static void sysfs_write_one(char writable[][256], int n)
{
	static char text[8192], before[64], after[64];
	const char *path = writable[below(n)];
	uint64_t want, got;
	size_t len;
	ssize_t w;
	int fd, accept, e;

	if (is_enable(path) && !one_in(4))
		path = writable[below(n)]; /* enable=0 lets everything go: less often than the rest */
	if (one_in(2))
		sane_text(path, text, sizeof(text), &len);
	else
		random_text(text, sizeof(text), &len);
	accept = kstrtou64_like(text, len, &want) && (!is_enable(path) || want <= 1);
	if (read_all(path, before, sizeof(before)) < 0) {
		FAIL("reading %s before a write: %s", path, strerror(errno));
		return;
	}
	fd = open(path, O_WRONLY);
	if (fd < 0) {
		FAIL("opening %s for writing as root: %s", path, strerror(errno));
		return;
	}
	w = write(fd, text, len);
	e = errno;
	close(fd);
	if (read_all(path, after, sizeof(after)) < 0) {
		FAIL("reading %s after a write: %s", path, strerror(errno));
		return;
	}
	got = strtoull(after, NULL, 10);
	if (len == 0 || len >= 4096) { /* an empty write never reaches the module; a long one is cut to a page */
		if (w < 0 && e != EINVAL)
			FAIL("writing %zu bytes to %s: %s, not EINVAL", len, path, strerror(e));
		return;
	}
	if (accept) {
		if (w != (ssize_t)len)
			FAIL("writing '%.*s' to %s: %zd (%s), not accepted", (int)len, text, path, w, strerror(e));
		else if (got != want)
			FAIL("wrote '%.*s' to %s, it reads %s", (int)len, text, path, after);
	} else {
		if (w >= 0)
			FAIL("writing '%.*s' (%zu bytes) to %s was accepted (%zd); now %s", (int)len, text, len, path, w, after);
		else if (e != EINVAL)
			FAIL("writing '%.*s' to %s: %s, not EINVAL", (int)len, text, path, strerror(e));
		else if (strcmp(before, after))
			FAIL("a refused write to %s changed it from %s to %s", path, before, after);
	}
}

static void sysfs_worker(double deadline)
{
	static char writable[64][256];
	unsigned long writes = 0;
	struct stat st;
	int n = 0;

	nr_sysfs = 0;
	sysfs_walk(SYSFS, 0);
	for (int i = 0; i < nr_sysfs && n < 64; i++)
		if (!stat(sysfs_files[i], &st) && (st.st_mode & 0222) && !strstr(sysfs_files[i], "/files/"))
			snprintf(writable[n++], sizeof(writable[0]), "%s", sysfs_files[i]);
	if (!n) {
		FAIL("no writable file under %s", SYSFS);
		return;
	}
	while (now_s() < deadline) {
		sysfs_write_one(writable, n);
		writes++;
		if (one_in(4))
			usleep(below(20000)); /* room for the workers between changes */
	}
	/* Leave the module enabled with sane tunables for the health check. */
	int fd = open(SYSFS "/enable", O_WRONLY);

	if (fd < 0 || write(fd, "1", 1) != 1)
		FAIL("re-enabling the module: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	printf("[%s] %lu writes to %d writable files\n", who, writes, n);
}

/* ---- churn: accesses, truncation, sysfs reads ------------------------------------------------------ */

static void churn_worker(double deadline)
{
	static char buf[128 << 10];
	unsigned long rounds = 0;
	struct stat st;

	while (now_s() < deadline) {
		int i = below(NR_FILES), fd = file_fds[i];
		off_t size;

		if (fstat(fd, &st))
			continue;
		size = st.st_size;
		switch (below(8)) {
		case 0: case 1: case 2: /* a sweep: a loop once repeated */
			for (off_t off = 0; off < size; off += sizeof(buf))
				if (pread(fd, buf, sizeof(buf), off) < 0)
					break;
			break;
		case 3: { /* mmap faults over part of it */
			void *p = size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;

			if (p != MAP_FAILED) {
				volatile unsigned char sum = 0;

				for (off_t off = 0; off < size; off += 4096 * (1 + below(4)))
					sum += ((unsigned char *)p)[off];
				munmap(p, size);
			}
			break;
		}
		case 4: /* random 4 KiB reads: the HOT set */
			for (int k = 0; k < 32 && size >= 4096; k++)
				if (pread(fd, buf, 4096, below(size / 4096) * 4096) < 0)
					break;
			break;
		case 5: /* truncation while pins may be held, then the file grows back */
			if (one_in(4)) {
				off_t keep = size ? below(size / 4096 + 1) * 4096 : 0;

				if (!ftruncate(fd, keep)) {
					memset(buf, 'z', sizeof(buf));
					for (off_t off = keep; off < size; off += sizeof(buf))
						if (pwrite(fd, buf, size - off < (off_t)sizeof(buf) ? size - off : sizeof(buf), off) < 0)
							break;
				}
			}
			break;
		case 6:
			sysfs_read_all();
			break;
		default: /* dropping the clean page cache runs the shrinkers of the page cache (not the slab ones) */
			if (one_in(8)) {
				int dfd = open("/proc/sys/vm/drop_caches", O_WRONLY);

				if (dfd >= 0) {
					if (write(dfd, one_in(4) ? "3" : "1", 1) < 0)
						FAIL("drop_caches: %s", strerror(errno));
					close(dfd);
				}
			}
			break;
		}
		rounds++;
	}
	printf("[%s] %lu rounds\n", who, rounds);
}

/* ---- memory pressure ------------------------------------------------------------------------------ */

/*
 * Global reclaim while the others run, so that the shrinker and the pin, HOT and SEQ workers race the
 * ioctls: every second or so, anonymous memory up to all but 32 MiB of MemAvailable, touched, held
 * briefly and freed. The OOM killer's first choice (oom_score_adj 1000), should it run.
 */
static void pressure_worker(double deadline)
{
	unsigned long rounds = 0, mib = 0;
	int fd = open("/proc/self/oom_score_adj", O_WRONLY);

	if (fd < 0 || write(fd, "1000", 4) != 4)
		FAIL("oom_score_adj: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	while (now_s() < deadline) {
		long long avail = meminfo_kib("MemAvailable");
		size_t len = avail > 48 * 1024 ? (size_t)(avail - 32 * 1024) << 10 : 0;
		char *p = len ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;

		if (p != MAP_FAILED) {
			for (size_t off = 0; off < len; off += 4096)
				p[off] = 1;
			usleep(100000 + below(200000));
			munmap(p, len);
			mib += len >> 20;
		}
		rounds++;
		usleep(500000 + below(1000000));
	}
	printf("[%s] %lu rounds, %lu MiB touched\n", who, rounds, mib);
}

/* ---- the unprivileged and the capability-less processes ------------------------------------------- */

static void refused_worker(double deadline, int expect_errno)
{
	unsigned long opens = 0, writes = 0;
	struct stat st;
	char text[256];
	size_t len;

	while (now_s() < deadline) {
		int flags = (int[]){ O_RDWR, O_RDONLY, O_WRONLY, O_RDWR | O_NONBLOCK }[below(4)];
		int fd = open(DEV, flags);

		opens++;
		if (fd >= 0) {
			FAIL("opened %s (flags %#x) as uid %d", DEV, flags, getuid());
			close(fd);
		} else if (errno != expect_errno) {
			FAIL("opening %s as uid %d: %s, not %s", DEV, getuid(), strerror(errno), strerror(expect_errno));
		}
		if (expect_errno == EACCES) {
			if (one_in(16)) {
				sysfs_read_all();
				continue;
			}
			if (!nr_sysfs)
				sysfs_walk(SYSFS, 0);
			if (!nr_sysfs)
				continue;
			const char *path = sysfs_files[below(nr_sysfs)];

			fd = open(path, one_in(2) ? O_WRONLY : O_RDWR);
			writes++;
			if (fd >= 0) {
				random_text(text, sizeof(text), &len);
				FAIL("opened %s for writing as uid %d (write: %zd)", path, getuid(), write(fd, text, len));
				close(fd);
			} else if (errno != EACCES && errno != ENOENT) {
				FAIL("opening %s for writing as uid %d: %s, not EACCES", path, getuid(), strerror(errno));
			} else if (errno == EACCES && !stat(path, &st) && (st.st_mode & 0002)) {
				FAIL("%s is world-writable", path);
			}
		}
	}
	printf("[%s] %lu opens of %s and %lu sysfs opens for writing refused\n", who, opens, DEV, writes);
}

/* Drop CAP_SYS_ADMIN from every set of this (root) process. */
static int drop_sys_admin(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
	d[CAP_SYS_ADMIN / 32].permitted &= ~(1u << (CAP_SYS_ADMIN % 32));
	d[CAP_SYS_ADMIN / 32].inheritable &= ~(1u << (CAP_SYS_ADMIN % 32));
	return syscall(SYS_capset, &h, d);
}

/* ---- after the fuzz ------------------------------------------------------------------------------- */

static int health_check(const char *dir)
{
	struct llmcache_ioc_file reg = { 0 };
	struct llmcache_ioc_file_stats fst = { 0 };
	struct llmcache_ioc_stats st;
	char path[256], buf[4096];
	int fd, dev, ok = 1;

	dev = open(DEV, O_RDWR);
	fd = make_file(dir, "fuzz-health.bin", 64, path, sizeof(path));
	if (dev < 0 || fd < 0) {
		FAIL("health: cannot open %s or create %s: %s", DEV, path, strerror(errno));
		return 0;
	}
	reg.fd = fd;
	if (ioctl(dev, LLMCACHE_IOC_REGISTER, &reg)) {
		FAIL("health: REGISTER: %s", strerror(errno));
		ok = 0;
	}
	for (off_t off = 0; ok && off < 64 * 4096; off += sizeof(buf))
		if (pread(fd, buf, sizeof(buf), off) != sizeof(buf))
			ok = 0;
	fst.fd = fd;
	if (ok && ioctl(dev, LLMCACHE_IOC_FILE_STATS, &fst)) {
		FAIL("health: FILE_STATS: %s", strerror(errno));
		ok = 0;
	} else if (ok && (fst.id != reg.id || fst.accesses < 64)) {
		/* The hooks run only while the module is enabled: the sysfs worker left it so. */
		FAIL("health: FILE_STATS says id %llu accesses %llu after 64 blocks read", (unsigned long long)fst.id,
		     (unsigned long long)fst.accesses);
		ok = 0;
	}
	memset(&st, 0, sizeof(st));
	if (ioctl(dev, LLMCACHE_IOC_STATS, &st) || st.nr_stats != LLMCACHE_NR_STATS || !st.registered || !st.enabled) {
		FAIL("health: STATS: %s, nr_stats %u registered %u enabled %u", strerror(errno), st.nr_stats,
		     st.registered, st.enabled);
		ok = 0;
	}
	if (ioctl(dev, LLMCACHE_IOC_UNREGISTER, &reg)) {
		FAIL("health: UNREGISTER: %s", strerror(errno));
		ok = 0;
	}
	if (ok)
		printf("health: registered, read and unregistered %s (id %llu, %llu accesses); %u files registered\n",
		       path, (unsigned long long)reg.id, (unsigned long long)fst.accesses, st.registered);
	close(fd);
	close(dev);
	unlink(path);
	return ok;
}

/* ---- main ----------------------------------------------------------------------------------------- */

enum worker { W_IOCTL_A, W_IOCTL_B, W_SYSFS, W_CHURN, W_PRESSURE, W_NOBODY, W_NOCAP, NR_WORKERS };
static const char *const worker_names[NR_WORKERS] = { "ioctl-a", "ioctl-b", "sysfs", "churn", "pressure", "nobody",
						     "no-cap" };

static void run_worker(enum worker w, uint64_t seed, double deadline)
{
	who = worker_names[w];
	seed_rng(seed, w);
	switch (w) {
	case W_IOCTL_A:
	case W_IOCTL_B:
		ioctl_worker(deadline);
		break;
	case W_SYSFS:
		sysfs_worker(deadline);
		break;
	case W_CHURN:
		churn_worker(deadline);
		break;
	case W_PRESSURE:
		pressure_worker(deadline);
		break;
	case W_NOBODY:
		close(dev_fd); /* what it may do is decided at open: it starts with no descriptor of the device */
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)) {
			FAIL("cannot become uid %d: %s", NOBODY, strerror(errno));
			break;
		}
		refused_worker(deadline, EACCES);
		break;
	case W_NOCAP:
		close(dev_fd);
		if (drop_sys_admin()) {
			FAIL("cannot drop CAP_SYS_ADMIN: %s", strerror(errno));
			break;
		}
		refused_worker(deadline, EPERM);
		break;
	default:
		break;
	}
	fflush(stdout);
	_exit(failures ? 1 : 0);
}

int main(int argc, char **argv)
{
	const char *dir = getenv("LLMCACHE_SCRATCH") ? getenv("LLMCACHE_SCRATCH") : "/tmp";
	uint64_t seed = (uint64_t)time(NULL);
	double seconds = 60, deadline;
	pid_t pids[NR_WORKERS];
	int i, status, bad = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--seed N] [--seconds S] [--dir DIR]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getuid() != 0) {
		fprintf(stderr, "%s: run as root, with llmcache.ko loaded\n", argv[0]);
		return 2;
	}
	dev_fd = open(DEV, O_RDWR);
	if (dev_fd < 0) {
		fprintf(stderr, "%s: cannot open %s: %s (is llmcache.ko loaded?)\n", argv[0], DEV, strerror(errno));
		return 2;
	}
	page_size = sysconf(_SC_PAGESIZE);
	guard_area = mmap(NULL, 2 * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (guard_area == MAP_FAILED || mprotect(guard_area + page_size, page_size, PROT_NONE))
		return 2;
	if (setup_fds(dir))
		return 1;
	printf("llmcache_fuzz: seed %llu, %.0f s, %d processes, files in %s\n", (unsigned long long)seed, seconds,
	       NR_WORKERS, dir);
	deadline = now_s() + seconds;
	for (i = 0; i < NR_WORKERS; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			run_worker(i, seed, deadline);
		if (pids[i] < 0) {
			FAIL("fork: %s", strerror(errno));
			bad = 1;
		}
	}
	for (i = 0; i < NR_WORKERS; i++) {
		if (pids[i] <= 0)
			continue;
		if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "FAIL: %s process: status %#x%s\n", worker_names[i], status,
				WIFSIGNALED(status) ? " (killed by a signal)" : "");
			bad = 1;
		}
	}
	/* The automatic mode the fuzz may have left on could register the health check's file meanwhile. */
	struct llmcache_ioc_auto off = { .mode = LLMCACHE_AUTO_OFF };

	if (ioctl(dev_fd, LLMCACHE_IOC_SET_AUTO, &off))
		FAIL("turning the automatic mode off: %s", strerror(errno));
	close(dev_fd);
	if (!health_check(dir))
		bad = 1;
	for (i = 0; i < NR_FILES; i++) {
		close(file_fds[i]);
		unlink(file_paths[i]);
	}
	if (bad || failures) {
		printf("FAIL: seed %llu\n", (unsigned long long)seed);
		return 1;
	}
	printf("PASS: seed %llu\n", (unsigned long long)seed);
	return 0;
}
