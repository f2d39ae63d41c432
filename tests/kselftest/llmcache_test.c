// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kselftest suite for llmcache.ko, run as root inside the VM (tests/vm/run.sh): loading and unloading,
 * every sysfs file, every ioctl's error paths, a registered file's life (register, delete, unregister)
 * and llmworkload's decoder files reaching their classes. Each test loads a fresh module from
 * $LLMCACHE_KO and unloads it afterwards; the whole suite is skipped when not root or without a module.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "../../include/uapi/llmcache.h"
#include "meminfo.h"

#define SYSFS LLMCACHE_SYSFS_DIR
#define DEV "/dev/" LLMCACHE_DEV_NAME

static const char *ko_path(void)
{
	const char *ko = getenv("LLMCACHE_KO");

	return ko && access(ko, R_OK) == 0 ? ko : NULL;
}

static int module_load(const char *params)
{
	int fd = open(ko_path(), O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return err;
}

static int module_unload(void)
{
	return syscall(SYS_delete_module, "llmcache", O_NONBLOCK) ? -errno : 0;
}

static int module_loaded(void)
{
	return access(SYSFS, F_OK) == 0;
}

/* Read a sysfs file into buf (newline stripped); -errno on failure. */
static int sysfs_read(const char *name, char *buf, size_t size)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", SYSFS, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return 0;
}

static long long sysfs_num(const char *name)
{
	char buf[64], *end;
	long long v;

	if (sysfs_read(name, buf, sizeof(buf)))
		return -1;
	v = strtoll(buf, &end, 10);
	return *end || end == buf ? -1 : v;
}

/* Write text to a sysfs file in one write(); 0 or -errno. */
static int sysfs_write(const char *name, const char *text)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", SYSFS, name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	n = n < 0 ? -errno : 0;
	close(fd);
	return n;
}

static int ioc_file(int dev, unsigned long cmd, int fd, __u64 *id)
{
	struct llmcache_ioc_file req = { .fd = fd };

	if (ioctl(dev, cmd, &req))
		return -errno;
	if (id)
		*id = req.id;
	return 0;
}

static int file_stats(int dev, int fd, struct llmcache_ioc_file_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->fd = fd;
	return ioctl(dev, LLMCACHE_IOC_FILE_STATS, st) ? -errno : 0;
}

/* The hooks this kernel should get: the filemap access tracepoints exist from 6.10 on. */
static const char *expected_hook_mode(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &major, &minor);
	return major > 6 || (major == 6 && minor >= 10) ? "tracepoint" : "kprobe";
}

/* A scratch file of blocks 4 KiB blocks on the VM's ext4 disk; returns an O_RDWR fd. */
static int scratch_file(const char *name, int blocks, char *path, size_t size)
{
	const char *dir = getenv("LLMCACHE_SCRATCH");
	char block[4096];
	int fd, i;

	snprintf(path, size, "%s/%s", dir ? dir : "/tmp", name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	memset(block, 0x5a, sizeof(block));
	for (i = 0; fd >= 0 && i < blocks; i++)
		if (write(fd, block, sizeof(block)) != sizeof(block))
			return -1;
	return fd;
}

TEST(load_unload)
{
	char buf[64];
	struct stat st;
	int i;

	if (module_loaded())
		ASSERT_EQ(0, module_unload());
	for (i = 0; i < 5; i++) {
		ASSERT_EQ(0, module_load(""));
		ASSERT_EQ(0, stat(DEV, &st));
		EXPECT_TRUE(S_ISCHR(st.st_mode));
		EXPECT_EQ(0600, st.st_mode & 07777);
		ASSERT_EQ(0, sysfs_read("hook_mode", buf, sizeof(buf)));
		EXPECT_STREQ(expected_hook_mode(), buf);
		EXPECT_EQ(-EEXIST, module_load(""));
		ASSERT_EQ(0, module_unload());
		EXPECT_FALSE(module_loaded());
		EXPECT_NE(0, access(DEV, F_OK));
	}
	EXPECT_EQ(-ENOENT, module_unload());
}

/* hooks= forces the kprobe mode anywhere; the tracepoint mode only where the tracepoints exist. */
TEST(hooks_parameter)
{
	char buf[64];

	if (module_loaded())
		ASSERT_EQ(0, module_unload());
	ASSERT_EQ(0, module_load("hooks=kprobe"));
	ASSERT_EQ(0, sysfs_read("hook_mode", buf, sizeof(buf)));
	EXPECT_STREQ("kprobe", buf);
	ASSERT_EQ(0, module_unload());
	if (!strcmp(expected_hook_mode(), "kprobe")) {
		EXPECT_EQ(-ENOENT, module_load("hooks=tracepoint"));
	} else {
		ASSERT_EQ(0, module_load("hooks=tracepoint"));
		ASSERT_EQ(0, module_unload());
	}
	EXPECT_EQ(-EINVAL, module_load("hooks=magic"));
	EXPECT_FALSE(module_loaded());
}

FIXTURE(llmcache) {
	int dev;
};

FIXTURE_VARIANT(llmcache) {
	const char *params;
};

FIXTURE_VARIANT_ADD(llmcache, auto) { .params = "" };
FIXTURE_VARIANT_ADD(llmcache, kprobe) { .params = "hooks=kprobe" };

FIXTURE_SETUP(llmcache)
{
	if (module_loaded())
		ASSERT_EQ(0, module_unload());
	ASSERT_EQ(0, module_load(variant->params));
	self->dev = open(DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->dev);
}

FIXTURE_TEARDOWN(llmcache)
{
	close(self->dev);
	EXPECT_EQ(0, module_unload());
}

static const char *const tunables[] = { "enable", "pin_budget", "hot_reserve", "bw", "t_ns", "seq_drop_ns" };
static const char *const read_only[] = {
	"hook_mode", "registered", "stats/accesses", "stats/hits", "stats/misses", "stats/seq_blocks",
	"stats/loop_blocks", "stats/hot_blocks", "stats/loop_iterations", "stats/seqs_created",
	"stats/seqs_recycled", "stats/chunks_recycled", "stats/pinned", "stats/shrinker_released",
	"stats/events_dropped", "stats/seq_dropped", "stats/hot_protected", "stats/loop_dropped",
	"stats/loop_read_ahead", "stats/reuse_room", "stats/seq_seqs", "stats/loop_seqs", "stats/hot_seqs",
};

/* Every file exists, has the documented mode, reads as one value; nothing else is there. */
TEST_F(llmcache, sysfs_files)
{
	const char *dirs[] = { "", "stats" };
	char path[256], buf[256];
	struct stat st;
	size_t i, d, seen = 0;

	for (i = 0; i < sizeof(tunables) / sizeof(*tunables); i++) {
		snprintf(path, sizeof(path), SYSFS "/%s", tunables[i]);
		ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
		EXPECT_EQ(0644, st.st_mode & 07777) TH_LOG("%s", path);
		EXPECT_LE(0, sysfs_num(tunables[i])) TH_LOG("%s", path);
	}
	for (i = 0; i < sizeof(read_only) / sizeof(*read_only); i++) {
		snprintf(path, sizeof(path), SYSFS "/%s", read_only[i]);
		ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
		EXPECT_EQ(0444, st.st_mode & 07777) TH_LOG("%s", path);
		ASSERT_EQ(0, sysfs_read(read_only[i], buf, sizeof(buf)));
		EXPECT_EQ(NULL, strchr(buf, '\n')) TH_LOG("%s: one value", path);
		if (strcmp(read_only[i], "hook_mode"))
			EXPECT_LE(0, sysfs_num(read_only[i])) TH_LOG("%s", path);
		EXPECT_EQ(-EACCES, sysfs_write(read_only[i], "1")) TH_LOG("%s", path);
	}
	for (d = 0; d < 2; d++) {
		DIR *dir;
		struct dirent *e;

		snprintf(path, sizeof(path), SYSFS "/%s", dirs[d]);
		dir = opendir(path);
		ASSERT_NE(NULL, dir);
		while ((e = readdir(dir))) {
			if (e->d_type != DT_REG)
				continue;
			snprintf(path, sizeof(path), SYSFS "/%s/%s", dirs[d], e->d_name);
			ASSERT_EQ(0, stat(path, &st));
			EXPECT_EQ(0, st.st_mode & 0002) TH_LOG("%s is world-writable", path);
			seen++;
		}
		closedir(dir);
	}
	EXPECT_EQ(sizeof(tunables) / sizeof(*tunables) + sizeof(read_only) / sizeof(*read_only), seen);
}

/* Tunables take valid values and refuse garbage with -EINVAL, keeping their value. */
TEST_F(llmcache, sysfs_tunables)
{
	static const char *const garbage[] = { "abc", "\n", "-1", "12x", "0x", "18446744073709551616", "1 2" };
	static const struct { const char *name, *good, *bad; } cases[] = {
		{ "enable", "0", "2" }, { "pin_budget", "1048576", NULL }, { "hot_reserve", "65536", NULL },
		{ "bw", "100000000", NULL }, { "t_ns", "50000000", NULL }, { "seq_drop_ns", "500000000", NULL },
	};
	char before[64], after[64];
	size_t i, g;

	for (i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		ASSERT_EQ(0, sysfs_write(cases[i].name, cases[i].good)) TH_LOG("%s", cases[i].name);
		ASSERT_EQ(0, sysfs_read(cases[i].name, before, sizeof(before)));
		EXPECT_STREQ(cases[i].good, before);
		for (g = 0; g <= sizeof(garbage) / sizeof(*garbage); g++) {
			const char *bad = g < sizeof(garbage) / sizeof(*garbage) ? garbage[g] : cases[i].bad;

			if (!bad)
				continue;
			EXPECT_EQ(-EINVAL, sysfs_write(cases[i].name, bad)) TH_LOG("%s <- '%s'", cases[i].name, bad);
			ASSERT_EQ(0, sysfs_read(cases[i].name, after, sizeof(after)));
			EXPECT_STREQ(before, after) TH_LOG("%s changed by '%s'", cases[i].name, bad);
		}
	}
	ASSERT_EQ(0, sysfs_write("enable", "1\n"));
	EXPECT_EQ(1, sysfs_num("enable"));
}

TEST_F(llmcache, ioctl_bad_fd)
{
	struct llmcache_ioc_file_stats st;

	EXPECT_EQ(-EBADF, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, -1, NULL));
	EXPECT_EQ(-EBADF, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, 100000, NULL));
	EXPECT_EQ(-EBADF, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, -1, NULL));
	EXPECT_EQ(-EBADF, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, 100000, NULL));
	EXPECT_EQ(-EBADF, file_stats(self->dev, -1, &st));
	EXPECT_EQ(-EFAULT, ioctl(self->dev, LLMCACHE_IOC_REGISTER, NULL) ? -errno : 0);
	EXPECT_EQ(-EFAULT, ioctl(self->dev, LLMCACHE_IOC_STATS, NULL) ? -errno : 0);
	EXPECT_EQ(-ENOTTY, ioctl(self->dev, _IO(LLMCACHE_IOC_MAGIC, 99)) ? -errno : 0);
	EXPECT_EQ(0, sysfs_num("registered"));
}

TEST_F(llmcache, ioctl_not_regular)
{
	int pipefd[2], null = open("/dev/null", O_RDONLY), dir = open("/", O_RDONLY | O_DIRECTORY);

	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_LE(0, null);
	ASSERT_LE(0, dir);
	EXPECT_EQ(-EINVAL, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, pipefd[0], NULL));
	EXPECT_EQ(-EINVAL, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, pipefd[1], NULL));
	EXPECT_EQ(-EINVAL, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, null, NULL));
	EXPECT_EQ(-EINVAL, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, dir, NULL));
	EXPECT_EQ(-EINVAL, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, self->dev, NULL));
	EXPECT_EQ(-ENOENT, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, null, NULL));
	EXPECT_EQ(0, sysfs_num("registered"));
	close(pipefd[0]);
	close(pipefd[1]);
	close(null);
	close(dir);
}

TEST_F(llmcache, ioctl_unknown_file_and_flags)
{
	struct llmcache_ioc_file req;
	struct llmcache_ioc_file_stats st;
	char path[256];
	int fd = scratch_file("unknown", 1, path, sizeof(path));

	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOENT, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	EXPECT_EQ(-ENOENT, file_stats(self->dev, fd, &st));
	req = (struct llmcache_ioc_file){ .fd = fd, .flags = 1 };
	EXPECT_EQ(-EINVAL, ioctl(self->dev, LLMCACHE_IOC_REGISTER, &req) ? -errno : 0);
	EXPECT_EQ(0, sysfs_num("registered"));
	close(fd);
	unlink(path);
}

TEST_F(llmcache, ioctl_double_registration)
{
	struct llmcache_ioc_stats st;
	char path[256], sys[64];
	__u64 id = 0, id2 = 0;
	int fd = scratch_file("double", 4, path, sizeof(path)), fd2;

	ASSERT_LE(0, fd);
	fd2 = open(path, O_RDONLY);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, &id));
	EXPECT_LT(0, id);
	EXPECT_EQ(-EEXIST, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	EXPECT_EQ(-EEXIST, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd2, NULL));
	EXPECT_EQ(1, sysfs_num("registered"));
	ASSERT_EQ(0, ioctl(self->dev, LLMCACHE_IOC_STATS, &st));
	EXPECT_EQ(1, st.registered);
	EXPECT_EQ(LLMCACHE_NR_STATS, st.nr_stats);
	EXPECT_EQ(1, st.enabled);
	EXPECT_EQ(strcmp(expected_hook_mode(), "kprobe") && !strstr(variant->params, "kprobe") ?
		  LLMCACHE_HOOK_TRACEPOINT : LLMCACHE_HOOK_KPROBE, st.hook_mode);
	/* Unregistering through another descriptor of the same file works: files are keyed by inode. */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd2, &id2));
	EXPECT_EQ(id, id2);
	EXPECT_EQ(-ENOENT, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	snprintf(sys, sizeof(sys), "files/%llu/path", (unsigned long long)id);
	EXPECT_EQ(-ENOENT, sysfs_read(sys, path, sizeof(path)));
	/* A new registration gets a new id. */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, &id2));
	EXPECT_LT(id, id2);
	close(fd);
	close(fd2);
}

/* Reads of a registered file are seen; deleting it while registered is safe; unregister releases it. */
TEST_F_TIMEOUT(llmcache, register_delete_unregister, 120)
{
	struct llmcache_ioc_file_stats st;
	char path[256], sys[64], buf[512], page[4096], big[16 * 4096];
	__u64 id = 0;
	int fd = scratch_file("victim", 16, path, sizeof(path)), fd2, i;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, &id));
	snprintf(sys, sizeof(sys), "files/%llu/path", (unsigned long long)id);
	ASSERT_EQ(0, sysfs_read(sys, buf, sizeof(buf)));
	EXPECT_STREQ(path, buf);
	for (i = 0; i < 16; i++)
		ASSERT_EQ(sizeof(page), pread(fd, page, sizeof(page), (off_t)i * sizeof(page)));
	ASSERT_EQ(0, file_stats(self->dev, fd, &st));
	EXPECT_EQ(id, st.id);
	EXPECT_EQ(16, st.accesses);
	EXPECT_EQ(16, st.class_blocks[LLMCACHE_CLASS_SEQ] + st.class_blocks[LLMCACHE_CLASS_LOOP] +
			      st.class_blocks[LLMCACHE_CLASS_HOT]);
	EXPECT_LE(16, sysfs_num("stats/accesses"));
	/* One read of 16 blocks is 16 accesses, however many batches the kernel splits it into. */
	ASSERT_EQ(sizeof(big), pread(fd, big, sizeof(big), 0));
	ASSERT_EQ(0, file_stats(self->dev, fd, &st));
	EXPECT_EQ(32, st.accesses);

	ASSERT_EQ(0, unlink(path));
	ASSERT_EQ(0, sysfs_read(sys, buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, "(deleted)")) TH_LOG("path after unlink: %s", buf);
	ASSERT_EQ(sizeof(page), pread(fd, page, sizeof(page), 0));
	ASSERT_EQ(0, file_stats(self->dev, fd, &st));
	EXPECT_EQ(33, st.accesses);
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	EXPECT_EQ(0, sysfs_num("registered"));
	EXPECT_EQ(-ENOENT, sysfs_read(sys, buf, sizeof(buf)));
	close(fd);

	/* A deleted, closed file the module still holds is released when the module goes. */
	fd2 = scratch_file("orphan", 4, path, sizeof(path));
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd2, NULL));
	ASSERT_EQ(0, unlink(path));
	close(fd2);
	EXPECT_EQ(1, sysfs_num("registered"));
}

/* Reads of unregistered files and of a disabled module leave the counters alone. */
TEST_F(llmcache, unregistered_and_disabled)
{
	struct llmcache_ioc_file_stats st;
	char path[256], path2[256], page[4096];
	int fd = scratch_file("quiet", 4, path, sizeof(path)), other = scratch_file("other", 4, path2, sizeof(path2));

	ASSERT_LE(0, fd);
	ASSERT_LE(0, other);
	ASSERT_EQ(sizeof(page), pread(other, page, sizeof(page), 0));
	EXPECT_EQ(0, sysfs_num("stats/accesses"));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(sizeof(page), pread(other, page, sizeof(page), 4096));
	EXPECT_EQ(0, sysfs_num("stats/accesses"));
	ASSERT_EQ(0, sysfs_write("enable", "0"));
	ASSERT_EQ(sizeof(page), pread(fd, page, sizeof(page), 0));
	ASSERT_EQ(0, file_stats(self->dev, fd, &st));
	EXPECT_EQ(0, st.accesses);
	ASSERT_EQ(0, sysfs_write("enable", "1"));
	ASSERT_EQ(sizeof(page), pread(fd, page, sizeof(page), 0));
	ASSERT_EQ(0, file_stats(self->dev, fd, &st));
	EXPECT_EQ(1, st.accesses);
	close(fd);
	close(other);
}

/* Only root opens the device. */
TEST_F(llmcache, device_root_only)
{
	pid_t pid = fork();
	int status;

	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		_exit(open(DEV, O_RDWR) < 0 && errno == EACCES ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/* Read a whole file sweeps times in 128 KiB preads: a loop. */
static int sweep(int fd, off_t size, int sweeps)
{
	static char buf[128 << 10];
	off_t off;

	while (sweeps--)
		for (off = 0; off < size; off += sizeof(buf))
			if (pread(fd, buf, sizeof(buf), off) <= 0)
				return -1;
	return 0;
}

/* Wait up to 20 s for the pin worker to bring stats/pinned to want; returns the last value read. */
static long long wait_pinned(long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 400; i++) {
		v = sysfs_num("stats/pinned");
		if (v == want)
			break;
		usleep(50000);
	}
	return v;
}

/* Pages of fd's blocks [first, first + blocks) that are resident (mincore). */
static int resident(int fd, int first, int blocks)
{
	size_t len = (size_t)(first + blocks) * 4096;
	unsigned char *vec = malloc(first + blocks);
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	int i, n = -1;

	if (vec && p != MAP_FAILED && !mincore(p, len, vec))
		for (i = first, n = 0; i < first + blocks; i++)
			n += vec[i] & 1;
	if (p != MAP_FAILED)
		munmap(p, len);
	free(vec);
	return n;
}

/* Wait up to 20 s for a statistic to reach want; returns the last value read. */
static long long wait_stat(const char *name, long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 400; i++) {
		v = sysfs_num(name);
		if (v == want)
			break;
		usleep(50000);
	}
	return v;
}

/* Is the multi-generational LRU on (/sys/kernel/mm/lru_gen/enabled non-zero)? */
static int mglru_enabled(void)
{
	char buf[32] = "";
	FILE *f = fopen("/sys/kernel/mm/lru_gen/enabled", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	return strtoul(buf, NULL, 16) != 0;
}

/* Drop the clean page cache (1), not the slab caches: those would run the module's shrinker too. */
static void drop_caches(void)
{
	int i, fd;

	sync();
	for (i = 0; i < 2; i++) {
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		if (fd < 0 || write(fd, "1", 1) != 1)
			perror("drop_caches");
		if (fd >= 0)
			close(fd);
	}
}

/*
 * A loop of 1024 blocks with a budget of 512: its lowest 512 blocks are pinned and survive a cache drop;
 * a smaller budget releases pins; truncation and unregistration release the rest.
 */
TEST_F_TIMEOUT(llmcache, pin_budget, 180)
{
	char path[256], sys[64];
	__u64 id = 0;
	int fd = scratch_file("loop", 1024, path, sizeof(path));

	ASSERT_LE(0, fd);
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, &id));
	ASSERT_EQ(0, sysfs_write("pin_budget", "2097152"));
	ASSERT_EQ(0, sweep(fd, 1024 * 4096, 3));
	EXPECT_EQ(512, wait_pinned(512));
	snprintf(sys, sizeof(sys), "files/%llu/pinned", (unsigned long long)id);
	EXPECT_EQ(512, sysfs_num(sys));
	drop_caches();
	/* Unpinned pages may linger a moment (per-CPU LRU batches hold references); most must go. */
	EXPECT_EQ(512, resident(fd, 0, 512)) TH_LOG("pinned blocks left the page cache");
	EXPECT_GT(64, resident(fd, 512, 512)) TH_LOG("unpinned blocks stayed");

	ASSERT_EQ(0, sysfs_write("enable", "0"));
	EXPECT_EQ(0, sysfs_num("stats/pinned")) TH_LOG("disabling keeps pins");
	ASSERT_EQ(0, sysfs_write("enable", "1"));
	EXPECT_EQ(512, wait_pinned(512));
	ASSERT_EQ(0, sysfs_write("pin_budget", "1048576"));
	EXPECT_EQ(256, wait_pinned(256));
	drop_caches();
	EXPECT_EQ(256, resident(fd, 0, 256));
	EXPECT_GT(64, resident(fd, 256, 256)) TH_LOG("released pins stayed");

	EXPECT_EQ(0, sysfs_num("stats/loop_dropped")) TH_LOG("a loop with room to spare lost blocks");

	ASSERT_EQ(0, ftruncate(fd, 0));
	EXPECT_EQ(0, sysfs_num("stats/pinned")) TH_LOG("truncation keeps pins");
	ASSERT_EQ(0, ftruncate(fd, 1024 * 4096));
	ASSERT_EQ(0, sweep(fd, 1024 * 4096, 3));
	EXPECT_EQ(256, wait_pinned(256));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	EXPECT_EQ(0, sysfs_num("stats/pinned"));

	/* Pins held at unload are released by it (the fixture unloads). */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, sweep(fd, 1024 * 4096, 3));
	EXPECT_EQ(256, wait_pinned(256));
	close(fd);
	unlink(path);
}

/* Read blocks [0, blocks) of fd once, 16 KiB at a time: a scan. */
static int scan(int fd, int blocks)
{
	char buf[16 << 10];
	off_t off;

	for (off = 0; off < (off_t)blocks * 4096; off += sizeof(buf))
		if (pread(fd, buf, sizeof(buf), off) <= 0)
			return -1;
	return 0;
}

/* Tokenizer-like lookups: rounds passes over 10 blocks 6 apart (never adjacent: each stays HOT). */
#define HOT_BLOCKS 10
static int hot_block(int k) { return 3 + 6 * k; }

static int lookups(int fd, int rounds)
{
	char page[4096];
	int r, k;

	for (r = 0; r < rounds; r++)
		for (k = 0; k < HOT_BLOCKS; k++)
			if (pread(fd, page, sizeof(page), (off_t)hot_block(k) * 4096) != sizeof(page))
				return -1;
	return 0;
}

static int hot_resident(int fd)
{
	int k, n = 0;

	for (k = 0; k < HOT_BLOCKS; k++)
		n += resident(fd, hot_block(k), 1);
	return n;
}

/* Wait up to 20 s until exactly want of fd's blocks [0, blocks) are resident; returns the last count. */
static int wait_resident(int fd, int blocks, int want)
{
	int i, n = -1;

	for (i = 0; i < 400 && (n = resident(fd, 0, blocks)) != want; i++)
		usleep(50000);
	return n;
}

/*
 * Pins never cause an OOM: with a loop of 256 MiB pinned in a 1 GiB guest, a process that needs 800 MiB
 * gets it, because the shrinker releases pins (longest-period loops' highest blocks first). HOT
 * protection goes only after every pin: while pins remain, the protected blocks stay.
 */
TEST_F_TIMEOUT(llmcache, shrinker_releases_pins, 300)
{
	const size_t loop = 256 << 20, need = 800 << 20;
	char path[256], tpath[256];
	pid_t pid;
	int fd = scratch_file("big", 0, path, sizeof(path)), status;
	int tok = scratch_file("tokenizer", 64, tpath, sizeof(tpath)), i;
	long long pinned, after;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, tok);
	ASSERT_EQ(0, ftruncate(fd, loop));
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, tok, NULL));
	ASSERT_EQ(0, sysfs_write("pin_budget", "268435456"));
	ASSERT_EQ(0, sysfs_write("hot_reserve", "65536"));
	ASSERT_EQ(0, scan(tok, 64));
	ASSERT_EQ(0, lookups(tok, 5));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	for (i = 0; i < 3; i++) { /* the tokenizer is read with every pass: it stays within the core's limit */
		ASSERT_EQ(0, sweep(fd, loop, 1));
		ASSERT_EQ(0, lookups(tok, 1));
	}
	pinned = wait_pinned(loop / 4096);
	EXPECT_LT(loop / 4096 * 3 / 4, pinned) TH_LOG("only %lld pinned", pinned);
	EXPECT_EQ(0, sysfs_num("stats/shrinker_released"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		volatile char *p = malloc(need);
		size_t i;

		if (!p)
			_exit(2);
		for (i = 0; i < need; i += 4096)
			p[i] = 1;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status)) TH_LOG("the allocating process was killed (signal %d)", WTERMSIG(status));
	after = sysfs_num("stats/pinned");
	TH_LOG("pinned %lld blocks, then %lld after the allocation; shrinker released %lld; HOT protected %lld",
	       pinned, after, sysfs_num("stats/shrinker_released"), sysfs_num("stats/hot_protected"));
	EXPECT_LT(0, sysfs_num("stats/shrinker_released"));
	EXPECT_GT(pinned, after);
	EXPECT_GE(loop / 4096, after);
	if (after > 0)
		EXPECT_EQ(HOT_BLOCKS, sysfs_num("stats/hot_protected")) TH_LOG("HOT protection went before pins");
	close(fd);
	close(tok);
	unlink(path);
	unlink(tpath);
}

/*
 * One pass every 10 ms, as an engine's tokens come: periods of even length, so that each restart comes
 * more than a quarter of the shorter of the last two periods after the one before (core.c, restarts())
 * even when the VM stalls a pass. A restart not counted makes the loop look stopped to the next aging,
 * which sets the HOT limit to 0.
 */
static int paced_sweeps(int fd, off_t size, int passes)
{
	while (passes--) {
		if (sweep(fd, size, 1))
			return -1;
		usleep(10000);
	}
	return 0;
}

/*
 * A 64-block loop and a tokenizer whose ten lookups are protected, then 40 passes of the loop without
 * them: the core's HOT idleness limit (twice the loop's period, set every 1024 accesses) falls below the
 * lookups' idleness and their blocks lose their protection although the reserve has room. With
 * loop_first, the loop runs 20 passes before the tokenizer is read, so the limit is already set and does
 * not change: the access that finds the oldest protected block idle past it kicks the recomputation.
 * Without, the tokenizer is read at start-up, and read again it gets its protection back.
 */
static void hot_idle_released(struct __test_metadata *_metadata, int dev, bool loop_first)
{
	char path[256], tpath[256];
	int fd = scratch_file("loop", 64, path, sizeof(path));
	int tok = scratch_file("tokenizer", 64, tpath, sizeof(tpath));

	ASSERT_LE(0, fd);
	ASSERT_LE(0, tok);
	drop_caches();
	ASSERT_EQ(0, sysfs_write("hot_reserve", "65536")); /* 16 blocks */
	ASSERT_EQ(0, ioc_file(dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, ioc_file(dev, LLMCACHE_IOC_REGISTER, tok, NULL));
	if (loop_first)
		ASSERT_EQ(0, paced_sweeps(fd, 64 * 4096, 20));
	ASSERT_EQ(0, scan(tok, 64));
	ASSERT_EQ(0, lookups(tok, 5));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	ASSERT_EQ(0, paced_sweeps(fd, 64 * 4096, 40));
	EXPECT_EQ(0, wait_stat("stats/hot_protected", 0))
		TH_LOG("blocks idle for 38 loop periods stayed protected (loop iterations %lld)",
		       sysfs_num("stats/loop_iterations"));
	if (!loop_first) {
		ASSERT_EQ(0, lookups(tok, 1));
		EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	}
	ASSERT_EQ(0, ioc_file(dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	ASSERT_EQ(0, ioc_file(dev, LLMCACHE_IOC_UNREGISTER, tok, NULL));
	close(fd);
	close(tok);
	unlink(path);
	unlink(tpath);
}

TEST_F_TIMEOUT(llmcache, hot_idle_past_loop_periods_released, 120)
{
	hot_idle_released(_metadata, self->dev, false);
}

TEST_F_TIMEOUT(llmcache, hot_idle_past_unchanged_limit_released, 120)
{
	hot_idle_released(_metadata, self->dev, true);
}

/*
 * 100 load/unload cycles while a process keeps registering a file and reading it: every cycle must load
 * and unload cleanly, whatever the module was doing (the runner checks the kernel log).
 */
FIXTURE(churn) {
	int unused;
};
FIXTURE_SETUP(churn) {}
FIXTURE_TEARDOWN(churn) {}

TEST_F_TIMEOUT(churn, load_unload_under_load, 300)
{
	char path[256];
	int fd = scratch_file("churn", 256, path, sizeof(path)), i, status, stop[2];
	pid_t pid;

	ASSERT_LE(0, fd);
	if (module_loaded())
		ASSERT_EQ(0, module_unload());
	ASSERT_EQ(0, pipe(stop));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char c;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(stop[1]);
		fcntl(stop[0], F_SETFL, O_NONBLOCK);
		while (read(stop[0], &c, 1) < 0) {
			int dev = open(DEV, O_RDWR);

			if (dev >= 0) {
				ioc_file(dev, LLMCACHE_IOC_REGISTER, fd, NULL);
				sysfs_write("pin_budget", "524288");
				close(dev);
			}
			if (sweep(fd, 256 * 4096, 1))
				_exit(1);
		}
		_exit(0);
	}
	close(stop[0]);
	for (i = 0; i < 100; i++) {
		int err = module_load("");

		ASSERT_EQ(0, err) TH_LOG("cycle %d: load", i);
		usleep(i % 10 * 1000);
		/* The reader may hold /dev/llmcache open for a moment: retry the unload. */
		while ((err = module_unload()) == -EAGAIN || err == -EBUSY)
			usleep(1000);
		ASSERT_EQ(0, err) TH_LOG("cycle %d: unload", i);
		if (i % 25 == 24)
			TH_LOG("%d cycles", i + 1);
	}
	close(stop[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
	unlink(path);
}

/*
 * A registered config-like file read once is dropped from the page cache once its scan has passed
 * (seq_drop_ns); a registered file swept three times (a loop) and an unregistered file read once stay.
 */
TEST_F_TIMEOUT(llmcache, seq_dropped_after_scan, 120)
{
	char cpath[256], wpath[256], opath[256];
	int cfg = scratch_file("config", 64, cpath, sizeof(cpath));
	int w = scratch_file("weights", 256, wpath, sizeof(wpath));
	int other = scratch_file("other", 64, opath, sizeof(opath));
	long long dropped;

	ASSERT_LE(0, cfg);
	ASSERT_LE(0, w);
	ASSERT_LE(0, other);
	drop_caches(); /* clean pages only can be dropped: start from the disk */
	ASSERT_EQ(0, sysfs_write("seq_drop_ns", "200000000"));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, cfg, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, w, NULL));
	ASSERT_EQ(0, scan(cfg, 64));
	ASSERT_EQ(0, scan(other, 64));
	ASSERT_EQ(0, sweep(w, 256 * 4096, 3));
	dropped = wait_stat("stats/seq_dropped", 64);
	EXPECT_EQ(64, dropped) TH_LOG("seq_dropped %lld", dropped);
	EXPECT_EQ(0, resident(cfg, 0, 64)) TH_LOG("the scanned config stayed");
	EXPECT_EQ(256, resident(w, 0, 256)) TH_LOG("the loop was dropped");
	EXPECT_EQ(64, resident(other, 0, 64)) TH_LOG("an unregistered file was dropped");
	EXPECT_EQ(0, sysfs_num("stats/shrinker_released"));

	/* seq_drop_ns=0: scans stay. */
	ASSERT_EQ(0, sysfs_write("seq_drop_ns", "0"));
	close(cfg);
	cfg = scratch_file("config2", 64, cpath, sizeof(cpath));
	ASSERT_LE(0, cfg);
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, cfg, NULL));
	ASSERT_EQ(0, scan(cfg, 64));
	usleep(500000);
	EXPECT_EQ(64, resident(cfg, 0, 64));
	EXPECT_EQ(dropped, sysfs_num("stats/seq_dropped"));
	close(cfg);
	close(w);
	close(other);
	unlink(cpath);
	unlink(wpath);
	unlink(opath);
}

/*
 * Tokenizer-like: a scan, then random lookups of 10 blocks. Within hot_reserve the lookups' blocks are
 * protected and survive a page-cache drop while the scan's other blocks are dropped; a smaller reserve
 * keeps the most recently used; reserve 0 and unregistration release them.
 */
TEST_F_TIMEOUT(llmcache, hot_protected, 120)
{
	char path[256];
	int tok = scratch_file("tokenizer", 64, path, sizeof(path));

	ASSERT_LE(0, tok);
	drop_caches();
	ASSERT_EQ(0, sysfs_write("seq_drop_ns", "1000000000"));
	ASSERT_EQ(0, sysfs_write("hot_reserve", "65536")); /* 16 blocks */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, tok, NULL));
	ASSERT_EQ(0, scan(tok, 64));
	ASSERT_EQ(0, lookups(tok, 5));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	/* The scan's other blocks go (all 64 if the drop came before the lookups re-read theirs). */
	EXPECT_EQ(HOT_BLOCKS, wait_resident(tok, 64, HOT_BLOCKS)) TH_LOG("the scan stayed or HOT blocks went");
	EXPECT_LE(64 - HOT_BLOCKS, sysfs_num("stats/seq_dropped"));
	EXPECT_GE(64, sysfs_num("stats/seq_dropped"));
	drop_caches();
	EXPECT_EQ(HOT_BLOCKS, hot_resident(tok)) TH_LOG("protected blocks left the page cache");

	/* 4 blocks: the 4 most recently used lookups stay protected. */
	ASSERT_EQ(0, sysfs_write("hot_reserve", "16384"));
	EXPECT_EQ(4, wait_stat("stats/hot_protected", 4));
	drop_caches();
	EXPECT_EQ(4, hot_resident(tok));
	EXPECT_EQ(4, resident(tok, hot_block(HOT_BLOCKS - 4), 6 * 3 + 1));
	ASSERT_EQ(0, sysfs_write("hot_reserve", "0"));
	EXPECT_EQ(0, wait_stat("stats/hot_protected", 0));
	ASSERT_EQ(0, sysfs_write("hot_reserve", "65536"));
	ASSERT_EQ(0, lookups(tok, 1));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	ASSERT_EQ(0, sysfs_write("enable", "0"));
	EXPECT_EQ(0, sysfs_num("stats/hot_protected")) TH_LOG("disabling keeps protection");
	ASSERT_EQ(0, sysfs_write("enable", "1"));
	ASSERT_EQ(0, lookups(tok, 1));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, tok, NULL));
	EXPECT_EQ(0, sysfs_num("stats/hot_protected"));
	close(tok);
	unlink(path);
}

/*
 * Moderate memory pressure: a 1.5 GiB unregistered file read through a 1 GiB guest evicts other page
 * cache, but 64 MiB of loop pins and the protected HOT blocks stay resident and nothing is released.
 * What the module holds is counted as Mlocked, and reclaim moves it to the unevictable list instead of
 * scanning it again; it is also counted as reclaimable by a shrinker (KReclaimable less SReclaimable),
 * which MemAvailable counts in; unregistering gives all three back.
 */
TEST_F_TIMEOUT(llmcache, pins_survive_moderate_pressure, 300)
{
	const int loop = 16384, control = 4096;
	const off_t big = 1536LL << 20;
	char lpath[256], tpath[256], cpath[256], bpath[256];
	int lfd = scratch_file("loop", loop, lpath, sizeof(lpath));
	int tok = scratch_file("tokenizer", 64, tpath, sizeof(tpath));
	int cfd = scratch_file("control", control, cpath, sizeof(cpath));
	int bfd = scratch_file("big", 0, bpath, sizeof(bpath));
	const long long held_kib = (loop + HOT_BLOCKS) * 4LL, slack_kib = 1024; /* per-CPU counter drift */
	long long mlocked0, unevictable0, shrinkable0;
	static char buf[1 << 20];
	off_t off;

	ASSERT_LE(0, lfd);
	ASSERT_LE(0, tok);
	ASSERT_LE(0, cfd);
	ASSERT_LE(0, bfd);
	ASSERT_EQ(0, ftruncate(bfd, big)); /* sparse: its holes read as page-cache pages of zeros */
	drop_caches();
	mlocked0 = meminfo_kib("Mlocked");
	unevictable0 = meminfo_kib("Unevictable");
	shrinkable0 = shrinker_reclaimable_kib();
	ASSERT_LE(0, mlocked0);
	ASSERT_LE(0, unevictable0);
	ASSERT_LE(0, shrinkable0);
	ASSERT_EQ(0, sysfs_write("seq_drop_ns", "100000000"));
	ASSERT_EQ(0, sysfs_write("pin_budget", "67108864"));
	ASSERT_EQ(0, sysfs_write("hot_reserve", "65536"));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, lfd, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, tok, NULL));
	ASSERT_EQ(0, sweep(lfd, (off_t)loop * 4096, 3));
	EXPECT_EQ(loop, wait_pinned(loop));
	ASSERT_EQ(0, scan(tok, 64));
	ASSERT_EQ(0, lookups(tok, 5));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	EXPECT_EQ(HOT_BLOCKS, wait_resident(tok, 64, HOT_BLOCKS));
	ASSERT_EQ(0, scan(cfd, control));
	EXPECT_LT(control * 3 / 4, resident(cfd, 0, control));

	for (off = 0; off < big; off += sizeof(buf))
		ASSERT_EQ(sizeof(buf), pread(bfd, buf, sizeof(buf), off));
	TH_LOG("after 1.5 GiB: control %d/%d resident, loop %d/%d, hot %d/%d; pinned %lld, released %lld",
	       resident(cfd, 0, control), control, resident(lfd, 0, loop), loop, hot_resident(tok), HOT_BLOCKS,
	       sysfs_num("stats/pinned"), sysfs_num("stats/shrinker_released"));
	EXPECT_GT(control / 4, resident(cfd, 0, control)) TH_LOG("no pressure: unpinned cache stayed");
	EXPECT_EQ(loop, resident(lfd, 0, loop));
	EXPECT_EQ(loop, sysfs_num("stats/pinned"));
	EXPECT_EQ(HOT_BLOCKS, hot_resident(tok));
	EXPECT_EQ(HOT_BLOCKS, sysfs_num("stats/hot_protected"));
	EXPECT_EQ(0, sysfs_num("stats/shrinker_released"));
	EXPECT_GE(slack_kib, llabs(meminfo_kib("Mlocked") - mlocked0 - held_kib));
	EXPECT_GE(slack_kib, llabs(shrinker_reclaimable_kib() - shrinkable0 - held_kib))
		TH_LOG("held folios not counted as reclaimable: MemAvailable leaves them out");
	/*
	 * MGLRU ages every generation, so the pressure meets the held folios and culls them. The classic
	 * LRU (6.1) takes the streaming pages from the inactive list and may never scan the active list
	 * the held folios sit on: then nothing is culled, and nothing scanned either.
	 */
	if (mglru_enabled())
		EXPECT_LE(held_kib * 3 / 4, meminfo_kib("Unevictable") - unevictable0)
			TH_LOG("reclaim left the held folios on the evictable lists");

	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, lfd, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, tok, NULL));
	EXPECT_GE(slack_kib, llabs(meminfo_kib("Mlocked") - mlocked0));
	EXPECT_GE(slack_kib, meminfo_kib("Unevictable") - unevictable0) TH_LOG("released folios stayed unevictable");
	EXPECT_GE(slack_kib, llabs(shrinker_reclaimable_kib() - shrinkable0)) TH_LOG("released folios still reclaimable");
	close(lfd);
	close(tok);
	close(cfd);
	close(bfd);
	unlink(lpath);
	unlink(tpath);
	unlink(cpath);
	unlink(bpath);
}

/* Touch one byte of each page of fd's first size bytes through a shared mapping, sweeps times. */
static int sweep_mapped(int fd, off_t size, int sweeps)
{
	volatile const char *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	unsigned long sum = 0;
	off_t off;

	if (p == MAP_FAILED)
		return -1;
	while (sweeps--)
		for (off = 0; off < size; off += 4096)
			sum += p[off];
	munmap((void *)p, size);
	return sum ? -1 : 0; /* a sparse file reads as zeros */
}

static int file_opts(int dev, unsigned long cmd, int fd, __u32 flags, __u64 pin_limit,
		     struct llmcache_ioc_file_opts *out);

/*
 * Wait up to 20 s for fewer than an eighth of fd's blocks [first, first + blocks) to be resident; returns
 * the last count. The worker drops blocks one to two 50 ms ticks after their access, but a busy host
 * can hold an emulated guest's worker back for longer.
 */
static int wait_tail_dropped(int fd, int first, int blocks)
{
	int i, n = -1;

	for (i = 0; i < 400 && (n = resident(fd, first, blocks)) >= blocks / 8; i++)
		usleep(50000);
	return n;
}

/*
 * A loop that cannot fit: locked anonymous memory leaves about 256 MiB of page cache, and a 512 MiB
 * loop gets 64 MiB of pins. The passed unpinned blocks are dropped right after each sweep reads them
 * (pread, then mmap), the pinned ones stay; with LLMCACHE_FILE_NO_DROP nothing is dropped.
 */
TEST_F_TIMEOUT(llmcache, loop_tail_dropped, 300)
{
	const int loop = 131072, pins = 16384;
	const off_t size = (off_t)loop * 4096;
	long long avail = meminfo_kib("MemAvailable") * 1024, dropped, iterations;
	int unpinned, i;
	size_t hog = avail > (512LL << 20) ? avail - (256LL << 20) : 0;
	char path[256];
	void *locked;
	int fd = scratch_file("loop", 0, path, sizeof(path));

	ASSERT_LE(0, fd);
	ASSERT_LT(0, hog) TH_LOG("MemAvailable %lld: the guest needs at least 512 MiB", avail);
	ASSERT_EQ(0, ftruncate(fd, size)); /* sparse: its holes read as page-cache pages of zeros */
	locked = mmap(NULL, hog, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED,
		      -1, 0);
	ASSERT_NE(MAP_FAILED, locked);
	drop_caches();
	ASSERT_EQ(0, sysfs_write("pin_budget", "67108864"));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));

	ASSERT_EQ(0, sweep(fd, size, 3));
	/*
	 * The worker pins what is resident when it runs: a head page that reclaim took first (a slow
	 * emulated guest's worker can lag a sweep by that much) is pinned when the next iteration reads it.
	 */
	for (i = 0; i < 3 && wait_pinned(pins) != pins; i++)
		ASSERT_EQ(0, sweep(fd, size, 1));
	EXPECT_EQ(pins, wait_pinned(pins));
	unpinned = wait_tail_dropped(fd, pins, loop - pins);
	dropped = sysfs_num("stats/loop_dropped");
	TH_LOG("pread: %lld dropped, unpinned resident %d of %d", dropped, unpinned, loop - pins);
	EXPECT_LT(loop - pins, dropped) TH_LOG("the passed unpinned blocks were not dropped");
	EXPECT_EQ(pins, resident(fd, 0, pins));
	EXPECT_GT((loop - pins) / 8, unpinned);

	iterations = sysfs_num("stats/loop_iterations");
	ASSERT_EQ(0, sweep_mapped(fd, size, 2));
	unpinned = wait_tail_dropped(fd, pins, loop - pins);
	iterations = sysfs_num("stats/loop_iterations") - iterations;
	TH_LOG("mmap: %lld dropped, unpinned resident %d, %lld iterations", sysfs_num("stats/loop_dropped") - dropped,
	       unpinned, iterations);
	/* The second sweep faults from the first unpinned block on, past the pinned head: an iteration too. */
	EXPECT_EQ(2, iterations);
	EXPECT_LT(loop - pins, sysfs_num("stats/loop_dropped") - dropped);
	EXPECT_EQ(pins, resident(fd, 0, pins));
	EXPECT_GT((loop - pins) / 8, unpinned);

	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd, LLMCACHE_FILE_NO_DROP, 0, NULL));
	sleep(1);
	dropped = sysfs_num("stats/loop_dropped");
	ASSERT_EQ(0, sweep(fd, size, 1));
	sleep(1);
	EXPECT_EQ(dropped, sysfs_num("stats/loop_dropped")) TH_LOG("NO_DROP: blocks were dropped");
	EXPECT_LT((loop - pins) / 8, resident(fd, pins, loop - pins));
	munmap(locked, hog);
	close(fd);
	unlink(path);
}

/*
 * Fault page 0 of fd, mapped at p (one page: no fault-around window beside it), after taking it and what
 * the fault read around it out of the page cache.
 */
static int fault_again(int fd, volatile const char *p)
{
	if (madvise((void *)p, 4096, MADV_DONTNEED) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) ||
	    resident(fd, 0, 1) != 0)
		return -1;
	return p[0] == 0x5a ? 0 : -1;
}

/*
 * A page of another file faulted again within two periods of the pinned loop takes one of its pins
 * (stats/reuse_room; kmod/main.c, llc_plan_reuse_room), and gives it back once it stops coming back:
 * two periods later the loop is pinned whole again. Faulted again ten periods later, it takes nothing.
 */
TEST_F_TIMEOUT(llmcache, reuse_room_faulted_page_takes_a_pin, 180)
{
	char loop_path[256], code_path[256];
	int fd = scratch_file("reuse-loop", 256, loop_path, sizeof(loop_path));
	int code = scratch_file("reuse-code", 16, code_path, sizeof(code_path));
	volatile const char *p;
	int i;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, code);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, code, 0);
	ASSERT_NE(MAP_FAILED, p);
	drop_caches();
	ASSERT_EQ(0, sysfs_write("hot_reserve", "0")); /* nothing holds the code's page */
	ASSERT_EQ(0, sysfs_write("pin_budget", "1048576"));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, code, NULL));
	ASSERT_EQ(0, sweep(fd, 256 * 4096, 3));
	ASSERT_EQ(256, wait_pinned(256));

	ASSERT_EQ(0, fault_again(code, p)); /* its first access: nothing to measure */
	ASSERT_EQ(0, sweep(fd, 256 * 4096, 1));
	usleep(500000); /* the pin worker the sweep's iteration kicked has run */
	EXPECT_EQ(0, sysfs_num("stats/reuse_room"));
	EXPECT_EQ(256, sysfs_num("stats/pinned"));
	ASSERT_EQ(0, fault_again(code, p)); /* one period later */
	EXPECT_EQ(1, wait_stat("stats/reuse_room", 1));
	EXPECT_EQ(255, wait_pinned(255)) TH_LOG("the loop kept the pin the faulted page took");

	/*
	 * One to two periods as the core measures them from its iterations. Sweeps back to back after
	 * slower ones count as fewer iterations than sweeps (a restart within a quarter of the last period
	 * is none: design/policy-core.md, rule 4), so the period can be several sweeps long.
	 */
	for (i = 0; i < 8 && sysfs_num("stats/pinned") != 256; i++) {
		ASSERT_EQ(0, sweep(fd, 256 * 4096, 1));
		usleep(300000);
	}
	EXPECT_EQ(256, wait_pinned(256)) TH_LOG("the pin did not come back in eight periods after the faults stopped");
	EXPECT_EQ(0, sysfs_num("stats/reuse_room"));

	ASSERT_EQ(0, sweep(fd, 256 * 4096, 10));
	ASSERT_EQ(0, fault_again(code, p)); /* more than ten periods after its last access */
	ASSERT_EQ(0, sweep(fd, 256 * 4096, 1));
	usleep(500000);
	EXPECT_EQ(0, sysfs_num("stats/reuse_room"));
	EXPECT_EQ(256, sysfs_num("stats/pinned"));
	munmap((void *)p, 4096);
	close(code);
	close(fd);
	unlink(code_path);
	unlink(loop_path);
}

/* Run llmworkload with args; 0 when it exits 0. */
static int llmworkload(const char *args)
{
	const char *bin = getenv("LLMCACHE_BIN");
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s/llmworkload %s >/dev/null", bin, args);
	return system(cmd);
}

/*
 * llmworkload's decoder on the ext4 scratch disk, files registered: the weights sweeps are LOOP, the
 * tokenizer's random lookups after its start-up scan are HOT, the config read once is SEQ.
 */
TEST_F_TIMEOUT(llmcache, decoder_classes, 600)
{
	static const char *const names[] = { "config.bin", "tokenizer.bin", "weights.bin" };
	const char *bin = getenv("LLMCACHE_BIN"), *scratch = getenv("LLMCACHE_SCRATCH");
	struct llmcache_ioc_file_stats st[3];
	char dir[256], args[512], path[512];
	int fd[3], i;

	if (!bin || !scratch)
		SKIP(return, "LLMCACHE_BIN and LLMCACHE_SCRATCH name llmworkload and the scratch disk");
	snprintf(dir, sizeof(dir), "%s/wl-%d", scratch, getpid());
	snprintf(args, sizeof(args), "decoder --dir %s --weights-size 4MiB --tokenizer-size 256KiB "
		 "--config-size 256KiB --access pread", dir);
	snprintf(path, sizeof(path), "%s --tokens 1", args);
	ASSERT_EQ(0, llmworkload(path)); /* creates the files */
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/decoder/%s", dir, names[i]);
		fd[i] = open(path, O_RDONLY);
		ASSERT_LE(0, fd[i]) TH_LOG("%s", path);
		ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd[i], NULL));
	}
	snprintf(path, sizeof(path), "%s --tokens 6 --hot-reads 40 --drop-cache", args);
	ASSERT_EQ(0, llmworkload(path));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, file_stats(self->dev, fd[i], &st[i]));
		TH_LOG("%s: %llu accesses, SEQ %llu LOOP %llu HOT %llu, %llu pages added", names[i],
		       (unsigned long long)st[i].accesses,
		       (unsigned long long)st[i].class_blocks[LLMCACHE_CLASS_SEQ],
		       (unsigned long long)st[i].class_blocks[LLMCACHE_CLASS_LOOP],
		       (unsigned long long)st[i].class_blocks[LLMCACHE_CLASS_HOT], (unsigned long long)st[i].added);
	}
	/* config: 64 blocks read once: SEQ (its first blocks are HOT until the run grows), never LOOP. */
	EXPECT_EQ(64, st[0].accesses);
	EXPECT_EQ(0, st[0].class_blocks[LLMCACHE_CLASS_LOOP]);
	EXPECT_LT(st[0].class_blocks[LLMCACHE_CLASS_HOT] * 8, st[0].class_blocks[LLMCACHE_CLASS_SEQ]);
	/* tokenizer: a 64-block scan, then 240 random lookups that stay HOT. */
	EXPECT_EQ(64 + 6 * 40, st[1].accesses);
	EXPECT_LT(st[1].class_blocks[LLMCACHE_CLASS_SEQ], st[1].class_blocks[LLMCACHE_CLASS_HOT]);
	EXPECT_LT(st[1].class_blocks[LLMCACHE_CLASS_LOOP], st[1].class_blocks[LLMCACHE_CLASS_HOT]);
	/* weights: 6 sweeps of 1024 blocks; all but the first are LOOP. */
	EXPECT_EQ(6 * 1024, st[2].accesses);
	EXPECT_LE(5 * 1024, st[2].class_blocks[LLMCACHE_CLASS_LOOP]);
	EXPECT_LT(0, st[2].added);
	EXPECT_LT(0, sysfs_num("stats/loop_iterations"));
	EXPECT_LT(0, sysfs_num("stats/loop_seqs"));
	EXPECT_EQ(0, sysfs_num("stats/events_dropped"));
	for (i = 0; i < 3; i++)
		close(fd[i]);
}

/* ---- control: per-file options, automatic mode, per-loop sizing ---------------------------------- */

static int file_opts(int dev, unsigned long cmd, int fd, __u32 flags, __u64 pin_limit,
		     struct llmcache_ioc_file_opts *out)
{
	struct llmcache_ioc_file_opts req = { .fd = fd, .flags = flags, .pin_limit = pin_limit };

	if (ioctl(dev, cmd, &req))
		return -errno;
	if (out)
		*out = req;
	return 0;
}

static int set_auto(int dev, __u32 mode, __s32 target, __u64 min_size)
{
	struct llmcache_ioc_auto req = { .mode = mode, .target = target, .min_size = min_size };

	return ioctl(dev, LLMCACHE_IOC_SET_AUTO, &req) ? -errno : 0;
}

/* The loops table: up to max entries into loops; -errno on failure. */
static int get_loops(int dev, struct llmcache_ioc_loops *req, struct llmcache_loop *loops, __u32 max)
{
	memset(req, 0, sizeof(*req));
	req->loops = (__u64)(unsigned long)loops;
	req->max = max;
	return ioctl(dev, LLMCACHE_IOC_LOOPS, req) ? -errno : 0;
}

/* Wait up to seconds for sysfs file name to read want (a string); returns whether it did. */
static int wait_sysfs(const char *name, const char *want, int seconds)
{
	char buf[256];
	int i;

	for (i = 0; i < seconds * 20; i++) {
		if (!sysfs_read(name, buf, sizeof(buf)) && !strcmp(buf, want))
			return 1;
		usleep(50000);
	}
	return 0;
}

/* Is the file at path registered? 1 yes, 0 no, -errno when it cannot be asked. */
static int is_registered(int dev, const char *path)
{
	struct llmcache_ioc_file_stats st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = file_stats(dev, fd, &st);
	close(fd);
	return err == 0 ? 1 : err == -ENOENT ? 0 : err;
}

TEST_F(llmcache, control_sysfs_files)
{
	static const char *const ro[] = { "sizing/bw_measured", "sizing/t_measured_ns", "auto/mode", "auto/target",
					  "auto/min_size", "auto/registered", "auto/scans" };
	char path[256], buf[64];
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof(ro) / sizeof(*ro); i++) {
		snprintf(path, sizeof(path), SYSFS "/%s", ro[i]);
		ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
		EXPECT_EQ(0444, st.st_mode & 07777) TH_LOG("%s", path);
		ASSERT_EQ(0, sysfs_read(ro[i], buf, sizeof(buf)));
		if (strcmp(ro[i], "auto/mode"))
			EXPECT_EQ(0, sysfs_num(ro[i])) TH_LOG("%s", path);
		EXPECT_EQ(-EACCES, sysfs_write(ro[i], "1")) TH_LOG("%s", path);
	}
	ASSERT_EQ(0, sysfs_read("auto/mode", buf, sizeof(buf)));
	EXPECT_STREQ("off", buf);
	/* t_ns 0: T is measured from the loop period. */
	ASSERT_EQ(0, sysfs_write("t_ns", "0"));
	EXPECT_EQ(0, sysfs_num("t_ns"));
}

TEST_F(llmcache, file_opts)
{
	struct llmcache_ioc_file_opts o = { 0 };
	char path[256], other[256], sys[64];
	int fd = scratch_file("opts", 4, path, sizeof(path)), fd2 = scratch_file("opts2", 1, other, sizeof(other));
	int pipefd[2];
	struct stat st;
	__u64 id = 0;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, &id));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, fd, 0, 0, &o));
	EXPECT_EQ(0, o.flags);
	EXPECT_EQ(0, o.pin_limit);
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd,
			       LLMCACHE_FILE_NO_PIN | LLMCACHE_FILE_NO_PROTECT, 1 << 20, NULL));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, fd, 0, 0, &o));
	EXPECT_EQ(LLMCACHE_FILE_NO_PIN | LLMCACHE_FILE_NO_PROTECT, o.flags);
	EXPECT_EQ(1 << 20, o.pin_limit);
	snprintf(sys, sizeof(sys), "files/%llu/flags", (unsigned long long)id);
	EXPECT_EQ(LLMCACHE_FILE_NO_PIN | LLMCACHE_FILE_NO_PROTECT, sysfs_num(sys));
	snprintf(path, sizeof(path), SYSFS "/%s", sys);
	ASSERT_EQ(0, stat(path, &st));
	EXPECT_EQ(0444, st.st_mode & 07777);
	EXPECT_EQ(-EACCES, sysfs_write(sys, "0"));
	snprintf(sys, sizeof(sys), "files/%llu/pin_limit", (unsigned long long)id);
	EXPECT_EQ(1 << 20, sysfs_num(sys));
	/* Unknown flags are refused and change nothing. */
	EXPECT_EQ(-EINVAL, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd, 1u << 4, 0, NULL));
	EXPECT_EQ(-EINVAL, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd, 0x80000000u | LLMCACHE_FILE_NO_PIN, 0, NULL));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, fd, 0, 0, &o));
	EXPECT_EQ(LLMCACHE_FILE_NO_PIN | LLMCACHE_FILE_NO_PROTECT, o.flags);
	EXPECT_EQ(1 << 20, o.pin_limit);
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd, LLMCACHE_FILE_FLAGS_ALL, 0, NULL));
	snprintf(sys, sizeof(sys), "files/%llu/flags", (unsigned long long)id);
	EXPECT_EQ(LLMCACHE_FILE_FLAGS_ALL, sysfs_num(sys));
	/* Bad descriptors, files that are not regular, files not registered, bad pointers. */
	EXPECT_EQ(-EBADF, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, -1, 0, 0, NULL));
	EXPECT_EQ(-EBADF, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, 100000, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, pipefd[0], 0, 0, NULL));
	EXPECT_EQ(-EINVAL, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, self->dev, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd2, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, fd2, 0, 0, NULL));
	EXPECT_EQ(-EFAULT, ioctl(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, NULL) ? -errno : 0);
	EXPECT_EQ(-EFAULT, ioctl(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, NULL) ? -errno : 0);
	/* Options go with the registration. */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	EXPECT_EQ(-ENOENT, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, fd, 0, 0, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_GET_FILE_OPTS, fd, 0, 0, &o));
	EXPECT_EQ(0, o.flags);
	close(pipefd[0]);
	close(pipefd[1]);
	close(fd);
	close(fd2);
}

/*
 * The pin plan honours per-file options: NO_PIN leaves a loop out, pin_limit caps a file's pins, and
 * what they cut goes to the other loop, always within pin_budget.
 */
TEST_F_TIMEOUT(llmcache, file_opts_pin_plan, 180)
{
	char pa[256], pb[256], sa[64], sb[64];
	__u64 ida = 0, idb = 0;
	int a = scratch_file("opts_a", 512, pa, sizeof(pa)), b = scratch_file("opts_b", 512, pb, sizeof(pb));

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, a, &ida));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, b, &idb));
	snprintf(sa, sizeof(sa), "files/%llu/pinned", (unsigned long long)ida);
	snprintf(sb, sizeof(sb), "files/%llu/pinned", (unsigned long long)idb);
	ASSERT_EQ(0, sysfs_write("pin_budget", "2097152")); /* 512 blocks: one of the two loops */
	ASSERT_EQ(0, sweep(a, 512 * 4096, 3));
	ASSERT_EQ(0, sweep(b, 512 * 4096, 3));
	EXPECT_EQ(512, wait_pinned(512));

	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, a, LLMCACHE_FILE_NO_PIN, 0, NULL));
	EXPECT_EQ(0, wait_stat(sa, 0)) TH_LOG("a NO_PIN file keeps pins");
	EXPECT_EQ(512, wait_stat(sb, 512)) TH_LOG("the other loop did not get the budget");
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, b, 0, 1 << 20, NULL));
	EXPECT_EQ(256, wait_stat(sb, 256)) TH_LOG("pin_limit 1 MiB not honoured");
	EXPECT_EQ(256, wait_pinned(256));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, a, 0, 0, NULL));
	EXPECT_EQ(512, wait_pinned(512)) TH_LOG("the budget cut from b did not go to a");
	EXPECT_GE(256, sysfs_num(sb));
	close(a);
	close(b);
	unlink(pa);
	unlink(pb);
}

TEST_F(llmcache, auto_errors)
{
	struct llmcache_ioc_auto req = { .mode = LLMCACHE_AUTO_PID, .target = getpid(), .min_size = 4096 };
	char path[256];
	int fd = scratch_file("notcg", 1, path, sizeof(path)), status;
	pid_t gone = fork();

	ASSERT_LE(0, fd);
	ASSERT_LE(0, gone);
	if (gone == 0)
		_exit(0);
	ASSERT_EQ(gone, waitpid(gone, &status, 0));
	req.flags = 1;
	EXPECT_EQ(-EINVAL, ioctl(self->dev, LLMCACHE_IOC_SET_AUTO, &req) ? -errno : 0);
	req.flags = 0;
	req.pad = 1;
	EXPECT_EQ(-EINVAL, ioctl(self->dev, LLMCACHE_IOC_SET_AUTO, &req) ? -errno : 0);
	EXPECT_EQ(-EINVAL, set_auto(self->dev, 3, getpid(), 4096));
	EXPECT_EQ(-EINVAL, set_auto(self->dev, LLMCACHE_AUTO_PID, getpid(), 0));
	EXPECT_EQ(-EINVAL, set_auto(self->dev, LLMCACHE_AUTO_PID, getpid(), 4095));
	EXPECT_EQ(-EINVAL, set_auto(self->dev, LLMCACHE_AUTO_PID, 0, 1 << 20));
	EXPECT_EQ(-EINVAL, set_auto(self->dev, LLMCACHE_AUTO_PID, -1, 1 << 20));
	EXPECT_EQ(-ESRCH, set_auto(self->dev, LLMCACHE_AUTO_PID, gone, 1 << 20));
	EXPECT_EQ(-ESRCH, set_auto(self->dev, LLMCACHE_AUTO_PID, 2, 1 << 20)) TH_LOG("kthreadd is a kernel thread");
	EXPECT_EQ(-EBADF, set_auto(self->dev, LLMCACHE_AUTO_CGROUP, -1, 1 << 20));
	EXPECT_EQ(-EBADF, set_auto(self->dev, LLMCACHE_AUTO_CGROUP, fd, 1 << 20)) TH_LOG("a file is not a cgroup");
	EXPECT_EQ(-EFAULT, ioctl(self->dev, LLMCACHE_IOC_SET_AUTO, NULL) ? -errno : 0);
	EXPECT_TRUE(wait_sysfs("auto/mode", "off", 1));
	/* Off needs nothing else; a valid pid switches it on. */
	EXPECT_EQ(0, set_auto(self->dev, LLMCACHE_AUTO_OFF, -5, 0));
	ASSERT_EQ(0, set_auto(self->dev, LLMCACHE_AUTO_PID, getpid(), 1ull << 40));
	EXPECT_TRUE(wait_sysfs("auto/mode", "pid", 1));
	EXPECT_EQ(getpid(), sysfs_num("auto/target"));
	EXPECT_EQ(1ull << 40, sysfs_num("auto/min_size"));
	ASSERT_EQ(0, set_auto(self->dev, LLMCACHE_AUTO_OFF, 0, 0));
	EXPECT_TRUE(wait_sysfs("auto/mode", "off", 1));
	close(fd);
	unlink(path);
}

/*
 * A process with a large open file, a small open file and a large mapped file (descriptor closed):
 * automatic mode registers the two large ones, then stops when the process exits; the files stay.
 */
TEST_F_TIMEOUT(llmcache, auto_pid, 120)
{
	char big[256], small[256], mapped[256], cmd[1024];
	int fd, go[2], status, i;
	pid_t pid;

	fd = scratch_file("auto-big", 512, big, sizeof(big));
	ASSERT_LE(0, fd);
	close(fd);
	fd = scratch_file("auto-small", 16, small, sizeof(small));
	ASSERT_LE(0, fd);
	close(fd);
	fd = scratch_file("auto-mapped", 512, mapped, sizeof(mapped));
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, pipe(go));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int a = open(big, O_RDONLY), b = open(small, O_RDONLY), c = open(mapped, O_RDONLY);
		void *p = c >= 0 ? mmap(NULL, 512 * 4096, PROT_READ, MAP_SHARED, c, 0) : MAP_FAILED;
		char x;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		if (a < 0 || b < 0 || p == MAP_FAILED)
			_exit(2);
		close(c);
		read(go[0], &x, 1);
		_exit(0);
	}
	close(go[0]);
	ASSERT_EQ(0, set_auto(self->dev, LLMCACHE_AUTO_PID, pid, 1 << 20));
	/* Its libraries may qualify too (libc is about 2 MiB): look for these files. */
	for (i = 0; i < 300 && !(is_registered(self->dev, big) == 1 && is_registered(self->dev, mapped) == 1); i++)
		usleep(50000);
	EXPECT_EQ(1, is_registered(self->dev, big));
	EXPECT_EQ(1, is_registered(self->dev, mapped));
	EXPECT_EQ(0, is_registered(self->dev, small));
	EXPECT_STREQ("pid", (sysfs_read("auto/mode", cmd, sizeof(cmd)), cmd));
	EXPECT_EQ(pid, sysfs_num("auto/target"));
	EXPECT_LE(1, sysfs_num("auto/scans"));
	EXPECT_LE(2, sysfs_num("auto/registered"));
	EXPECT_EQ(sysfs_num("auto/registered"), sysfs_num("registered"));
	/* The process exits: the mode stops, the files stay registered. */
	close(go[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_TRUE(wait_sysfs("auto/mode", "off", 5));
	EXPECT_EQ(1, is_registered(self->dev, big));
	unlink(big);
	unlink(small);
	unlink(mapped);
}

/* A cgroup v2 target: every process in it; the mode stops when the cgroup is removed. */
TEST_F_TIMEOUT(llmcache, auto_cgroup, 120)
{
	const char *root = "/run/llmcache-cgroup2", *cg = "/run/llmcache-cgroup2/llmcache-test";
	char big[256], procs[256], x;
	int fd, cgfd, go[2], status, i;
	pid_t pid;

	mkdir(root, 0755);
	if (mount("none", root, "cgroup2", 0, NULL) && errno != EBUSY)
		SKIP(return, "cannot mount cgroup2 at %s: %s", root, strerror(errno));
	ASSERT_EQ(0, mkdir(cg, 0755) && errno != EEXIST ? -errno : 0);
	fd = scratch_file("auto-cg", 300, big, sizeof(big));
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, pipe(go));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int a;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
		a = open(procs, O_WRONLY);
		if (a < 0 || write(a, "0", 1) != 1)
			_exit(2);
		close(a);
		a = open(big, O_RDONLY);
		read(go[0], &x, 1);
		_exit(a < 0);
	}
	close(go[0]);
	cgfd = open(cg, O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, cgfd);
	ASSERT_EQ(0, set_auto(self->dev, LLMCACHE_AUTO_CGROUP, cgfd, 1 << 20));
	EXPECT_STREQ("cgroup", (sysfs_read("auto/mode", procs, sizeof(procs)), procs));
	for (i = 0; i < 300 && is_registered(self->dev, big) != 1; i++)
		usleep(50000);
	EXPECT_EQ(1, is_registered(self->dev, big));
	EXPECT_LE(1, sysfs_num("auto/registered"));
	close(go[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The cgroup is still there (empty): the mode runs on until it goes. */
	usleep(1500000);
	EXPECT_STREQ("cgroup", (sysfs_read("auto/mode", procs, sizeof(procs)), procs));
	close(cgfd);
	ASSERT_EQ(0, rmdir(cg));
	EXPECT_TRUE(wait_sysfs("auto/mode", "off", 5));
	umount(root);
	unlink(big);
}

/* llmworkload's decoder running: automatic mode registers its weights, not its small files. */
TEST_F_TIMEOUT(llmcache, auto_workload, 300)
{
	const char *bin = getenv("LLMCACHE_BIN"), *scratch = getenv("LLMCACHE_SCRATCH");
	static const char *const names[] = { "weights.bin", "tokenizer.bin", "config.bin" };
	char dir[256], path[512], wsize[] = "8MiB";
	int i, status;
	pid_t pid;

	if (!bin || !scratch)
		SKIP(return, "LLMCACHE_BIN and LLMCACHE_SCRATCH name llmworkload and the scratch disk");
	snprintf(dir, sizeof(dir), "%s/wl-auto-%d", scratch, getpid());
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		snprintf(path, sizeof(path), "%s/llmworkload", bin);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		freopen("/dev/null", "w", stdout);
		execl(path, path, "decoder", "--dir", dir, "--weights-size", wsize, "--tokenizer-size", "256KiB",
		      "--config-size", "256KiB", "--tokens", "1000000", "--access", "mmap", (char *)NULL);
		_exit(127);
	}
	ASSERT_EQ(0, set_auto(self->dev, LLMCACHE_AUTO_PID, pid, 4 << 20));
	/* The weights once the workload opened them; its binary may qualify too (it is several MiB). */
	snprintf(path, sizeof(path), "%s/decoder/%s", dir, names[0]);
	for (i = 0; i < 1200 && is_registered(self->dev, path) != 1; i++)
		usleep(50000);
	usleep(1500000); /* another scan: still not the small files */
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/decoder/%s", dir, names[i]);
		EXPECT_EQ(i == 0, is_registered(self->dev, path)) TH_LOG("%s", path);
	}
	EXPECT_LE(1, sysfs_num("auto/registered"));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(wait_sysfs("auto/mode", "off", 5));
}

TEST_F(llmcache, loops_ioctl_errors)
{
	struct llmcache_ioc_loops req;
	struct llmcache_loop l[4];

	ASSERT_EQ(0, get_loops(self->dev, &req, l, 4));
	EXPECT_EQ(0, req.count);
	EXPECT_EQ(0, req.total);
	EXPECT_EQ(LLMCACHE_LOOPS_BW_MEASURED, req.flags) TH_LOG("bw 0: measured");
	EXPECT_EQ(100000000, req.t_ns);
	memset(&req, 0, sizeof(req));
	req.flags = 1;
	EXPECT_EQ(-EINVAL, ioctl(self->dev, LLMCACHE_IOC_LOOPS, &req) ? -errno : 0);
	memset(&req, 0, sizeof(req));
	req.max = 4; /* and no pointer */
	EXPECT_EQ(-EINVAL, ioctl(self->dev, LLMCACHE_IOC_LOOPS, &req) ? -errno : 0);
	EXPECT_EQ(-EFAULT, ioctl(self->dev, LLMCACHE_IOC_LOOPS, NULL) ? -errno : 0);
}

/*
 * An engine idle between two prompts: ten passes of a loop, a pause of 4 s, twenty passes. The iteration
 * that spans the pause measures a 4 s period; the passes after it are iterations all the same, not
 * restarts within a quarter of that period (core.c, restarts()), or the loop would look stopped for a
 * second after every pause; and the sizing rule's T stays a pass's time, not the pause's.
 */
TEST_F_TIMEOUT(llmcache, loop_after_pause_keeps_counting, 120)
{
	struct llmcache_ioc_loops req;
	struct llmcache_loop loops[4];
	char path[256];
	int fd = scratch_file("loop", 64, path, sizeof(path));
	long long before, after;

	ASSERT_LE(0, fd);
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, paced_sweeps(fd, 64 * 4096, 10));
	sleep(4);
	before = sysfs_num("stats/loop_iterations");
	ASSERT_EQ(0, paced_sweeps(fd, 64 * 4096, 1));
	ASSERT_EQ(0, get_loops(self->dev, &req, loops, 4));
	ASSERT_EQ(1, req.count);
	EXPECT_LT(3000000000ULL, loops[0].period_ns);
	EXPECT_GT(1000000000ULL, req.t_measured_ns)
		TH_LOG("T %llu ns after a 4 s pause", (unsigned long long)req.t_measured_ns);
	ASSERT_EQ(0, paced_sweeps(fd, 64 * 4096, 19));
	after = sysfs_num("stats/loop_iterations");
	EXPECT_LE(before + 20, after) TH_LOG("%lld of 20 passes after the pause counted", after - before);
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, NULL));
	close(fd);
	unlink(path);
}

/* S_min of the 1024-block weights loop for bw blocks/s and t ns, as the rule computes it. */
static __u64 llc_min(__u64 bw, __u64 t)
{
	__u64 fetched = (bw * t + 999999999) / 1000000000;

	return fetched < 1024 ? 1024 - fetched : 0;
}

/* The table's entry for file id's loop starting at block first, or NULL. */
static const struct llmcache_loop *find_loop(const struct llmcache_loop *l, __u32 n, __u64 id, __u64 first)
{
	__u32 i;

	for (i = 0; i < n; i++)
		if (l[i].file_id == id && l[i].first_block == first)
			return &l[i];
	return NULL;
}

/*
 * The loops table after llmworkload's decoder: its weights are one loop of N = weights blocks with a
 * period of about a token, sized with the bw and t_ns set through sysfs; sysfs shows the same values.
 */
TEST_F_TIMEOUT(llmcache, loops_decoder, 600)
{
	static const char *const names[] = { "config.bin", "tokenizer.bin", "weights.bin" };
	const char *bin = getenv("LLMCACHE_BIN"), *scratch = getenv("LLMCACHE_SCRATCH");
	static struct llmcache_loop l[256];
	const struct llmcache_loop *w;
	struct llmcache_ioc_loops req;
	char dir[256], args[512], path[512], sys[128];
	__u64 id[3], bw = 100000000, t = 10000000, fetched, s_min, stall, others;
	struct timespec t0, t1;
	long long elapsed_ns;
	int fd[3], i;

	if (!bin || !scratch)
		SKIP(return, "LLMCACHE_BIN and LLMCACHE_SCRATCH name llmworkload and the scratch disk");
	snprintf(dir, sizeof(dir), "%s/wl-loops-%d", scratch, getpid());
	snprintf(args, sizeof(args), "decoder --dir %s --weights-size 4MiB --tokenizer-size 256KiB "
		 "--config-size 256KiB --access pread", dir);
	snprintf(path, sizeof(path), "%s --tokens 1", args);
	ASSERT_EQ(0, llmworkload(path));
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/decoder/%s", dir, names[i]);
		fd[i] = open(path, O_RDONLY);
		ASSERT_LE(0, fd[i]);
		ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd[i], &id[i]));
	}
	ASSERT_EQ(0, sysfs_write("bw", "100000000"));
	ASSERT_EQ(0, sysfs_write("t_ns", "10000000"));
	ASSERT_EQ(0, sysfs_write("pin_budget", "1048576"));
	snprintf(path, sizeof(path), "%s --tokens 6 --hot-reads 40 --drop-cache", args);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, llmworkload(path));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	elapsed_ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec;
	EXPECT_EQ(256, wait_pinned(256));

	ASSERT_EQ(0, get_loops(self->dev, &req, l, 256));
	EXPECT_EQ(req.total, req.count);
	EXPECT_EQ(0, req.flags) TH_LOG("bw and t_ns were set: nothing measured");
	EXPECT_EQ(bw / 4096 * 4096, req.bw);
	EXPECT_EQ(t, req.t_ns);
	w = find_loop(l, req.count, id[2], 0);
	ASSERT_NE(NULL, w) TH_LOG("no loop of the weights in a table of %u", req.count);
	/* N = the weights' blocks; a period of one token: more than 0, less than the whole run. */
	EXPECT_EQ(1024, w->blocks);
	/* 5 iterations on a quiet host; 3 were seen with other VMs beside this one. */
	EXPECT_LE(2, w->iterations);
	EXPECT_LT(0, w->period_ns);
	EXPECT_GT(elapsed_ns / 3, (long long)w->period_ns) TH_LOG("period %llu ns, run %lld ns",
								(unsigned long long)w->period_ns, elapsed_ns);
	/* The rule: BW = 24414 blocks/s, T = 10 ms: BW*T = 244.14, so S_min = 1024 - 245 = 779. */
	fetched = (bw / 4096 * t + 999999999) / 1000000000;
	s_min = 1024 - fetched;
	EXPECT_EQ(779, s_min);
	EXPECT_EQ(s_min, w->s_min);
	/*
	 * The budget (256 blocks) goes to the loops by increasing period: all of it to the weights, but for
	 * what a shorter loop of the tokenizer's 64 blocks takes first when its lookups are seen as one.
	 */
	for (i = 0, others = 0; i < (int)req.count; i++)
		others += &l[i] == w ? 0 : l[i].pinned;
	EXPECT_GE(64, others);
	EXPECT_EQ(256 - others, w->pinned);
	EXPECT_EQ(s_min - w->pinned, w->deficit);
	/* (N - pinned) / BW - T: 768 / 24414 s - 10 ms = 21.457 ms with the whole budget. */
	stall = (1024 - w->pinned) * 1000000000ull / (bw / 4096) - t;
	EXPECT_GE(1, llabs((long long)w->stall_ns - (long long)stall)) TH_LOG("stall %llu, expected %llu",
									     (unsigned long long)w->stall_ns,
									     (unsigned long long)stall);
	TH_LOG("weights loop: N %llu, period %llu ns, %llu iterations, S_min %llu, pinned %llu, deficit %llu, "
	       "stall %llu ns; %u loops in all; measured BW %llu B/s, T %llu ns",
	       (unsigned long long)w->blocks, (unsigned long long)w->period_ns, (unsigned long long)w->iterations,
	       (unsigned long long)w->s_min, (unsigned long long)w->pinned, (unsigned long long)w->deficit,
	       (unsigned long long)w->stall_ns, req.count, (unsigned long long)req.bw_measured,
	       (unsigned long long)req.t_measured_ns);
	/* The same values in sysfs, one per file, once the directory was refreshed. */
	snprintf(sys, sizeof(sys), "files/%llu/loops/%llu/blocks", (unsigned long long)id[2],
		 (unsigned long long)w->seq);
	EXPECT_TRUE(wait_sysfs(sys, "1024", 5)) TH_LOG("%s", sys);
#define LOOP_FIELD(f) do {									\
		snprintf(sys, sizeof(sys), "files/%llu/loops/%llu/" #f, (unsigned long long)id[2],	\
			 (unsigned long long)w->seq);							\
		EXPECT_EQ((long long)w->f, sysfs_num(sys)) TH_LOG("%s", sys);				\
	} while (0)
	LOOP_FIELD(first_block);
	LOOP_FIELD(s_min);
	LOOP_FIELD(pinned);
	LOOP_FIELD(deficit);
	LOOP_FIELD(stall_ns);
	LOOP_FIELD(iterations);
	LOOP_FIELD(period_ns);
#undef LOOP_FIELD
	/* The cold first pass was served from the disk: a miss rate was measured. */
	EXPECT_LT(0, sysfs_num("sizing/bw_measured"));
	EXPECT_LT(0, sysfs_num("sizing/t_measured_ns"));
	EXPECT_GE((long long)w->period_ns, sysfs_num("sizing/t_measured_ns"));
	/* bw and t_ns 0: the rule uses the measured values. */
	ASSERT_EQ(0, sysfs_write("bw", "0"));
	ASSERT_EQ(0, sysfs_write("t_ns", "0"));
	ASSERT_EQ(0, get_loops(self->dev, &req, l, 256));
	EXPECT_EQ(LLMCACHE_LOOPS_BW_MEASURED | LLMCACHE_LOOPS_T_MEASURED, req.flags);
	EXPECT_EQ(req.bw_measured / 4096 * 4096, req.bw);
	EXPECT_EQ(req.t_measured_ns, req.t_ns);
	w = find_loop(l, req.count, id[2], 0);
	ASSERT_NE(NULL, w);
	EXPECT_LE(req.t_ns, w->period_ns);
	EXPECT_EQ(llc_min(req.bw / 4096, req.t_ns), w->s_min);
	/* Only registered files' loops: unregistering the weights removes theirs, and its directory. */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd[2], NULL));
	ASSERT_EQ(0, get_loops(self->dev, &req, l, 256));
	EXPECT_EQ(NULL, find_loop(l, req.count, id[2], 0));
	for (i = 0; i < (int)req.count; i++)
		EXPECT_NE(id[2], l[i].file_id);
	/* max 0 counts without copying. */
	ASSERT_EQ(0, get_loops(self->dev, &req, NULL, 0));
	EXPECT_EQ(0, req.count);
	for (i = 0; i < 3; i++)
		close(fd[i]);
}

int main(int argc, char **argv)
{
	if (geteuid())
		ksft_exit_skip("llmcache: the kernel-module tests need root\n");
	if (!ko_path())
		ksft_exit_skip("llmcache: no module: set LLMCACHE_KO to llmcache.ko built for this kernel\n");
	return test_harness_run(argc, argv);
}

/*
 * KV statistics (kmod/kv_stats.c): llmcached pushes its totals with LLMCACHE_IOC_KV_STATS and they show
 * under /sys/kernel/llmcache/kv/, one read-only value per file; a push of the wrong size, with flags
 * or reserved words set, or of garbage is refused with -EINVAL and changes nothing.
 */
static const char *const kv_top[] = { "sessions", "beta_milli", "selects", "pushes", "last_push_ns" };
static const char *const kv_fields[] = { "bytes", "bus_bytes", "kernel_runs", "restores", "score_latency_ns",
					 "scored_tokens", "spills", "tokens" };

static __u64 kv_field(const struct llmcache_kv_pool_stats *p, const char *name)
{
	return !strcmp(name, "bytes") ? p->bytes : !strcmp(name, "tokens") ? p->tokens :
	       !strcmp(name, "spills") ? p->spills : !strcmp(name, "restores") ? p->restores :
	       !strcmp(name, "bus_bytes") ? p->bus_bytes : !strcmp(name, "kernel_runs") ? p->kernel_runs :
	       !strcmp(name, "scored_tokens") ? p->scored_tokens : p->score_latency_ns;
}

static struct llmcache_ioc_kv_stats kv_sample(void)
{
	struct llmcache_ioc_kv_stats st = { .size = sizeof(st), .sessions = 3, .beta_milli = 1250, .selects = 99 };
	int p;

	for (p = 0; p < LLMCACHE_KV_NR_POOLS; p++)
		st.pool[p] = (struct llmcache_kv_pool_stats){ 1000 * (p + 1) + 1, 1000 * (p + 1) + 2, 1000 * (p + 1) + 3,
							      1000 * (p + 1) + 4, 1000 * (p + 1) + 5, 1000 * (p + 1) + 6,
							      1000 * (p + 1) + 7, 1000 * (p + 1) + 8 };
	return st;
}

/*
 * A model file's loop whose head (blocks 64-255, a token embedding) its iterations pass over: each
 * iteration reads block 0 and blocks 256-1023. Once those chunks have gone untouched for two periods the
 * core's pin plan leaves them out and the budget of 512 pins [0, 64) and [256, 704) (core.h, llc_pin_plan).
 */
TEST_F_TIMEOUT(llmcache, cold_chunks_unpinned, 180)
{
	char path[256], page[4096];
	static char buf[128 << 10];
	struct llmcache_ioc_loops req;
	struct llmcache_loop loops[4];
	int fd = scratch_file("embedding", 1024, path, sizeof(path)), i, n;
	off_t off;

	ASSERT_LE(0, fd);
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, sysfs_write("pin_budget", "2097152"));
	ASSERT_EQ(0, sweep(fd, 1024 * 4096, 2));
	/*
	 * Iterations until the core has counted eight and three more: a start within a quarter of the last
	 * period (in wall time) is no restart (core.c, restarts()), and the sweeps' period depends on the
	 * machine, so the loop's period converges on an iteration's within a few of them.
	 */
	for (i = 0, n = 0; i < 400 && n < 3; i++) {
		ASSERT_EQ(sizeof(page), pread(fd, page, sizeof(page), 0));
		for (off = 256 * 4096; off < 1024 * 4096; off += sizeof(buf))
			ASSERT_EQ(sizeof(buf), pread(fd, buf, sizeof(buf), off));
		usleep(10000);
		if (n || (get_loops(self->dev, &req, loops, 4) == 0 && req.count && loops[0].iterations >= 8))
			n++;
	}
	EXPECT_EQ(512, wait_pinned(512));
	for (i = 0; i < 100; i++) { /* the pin worker follows the plan of the last iteration */
		drop_caches();
		if (resident(fd, 256, 448) == 448 && resident(fd, 64, 192) < 32)
			break;
		usleep(100000);
	}
	if (get_loops(self->dev, &req, loops, 4) == 0)
		for (i = 0; i < (int)req.count; i++)
			TH_LOG("loop %d: blocks %llu+%llu, %llu iterations, %llu pinned", i,
			       (unsigned long long)loops[i].first_block, (unsigned long long)loops[i].blocks,
			       (unsigned long long)loops[i].iterations, (unsigned long long)loops[i].pinned);
	EXPECT_EQ(64, resident(fd, 0, 64)) TH_LOG("the chunk read every iteration lost its pins");
	EXPECT_EQ(448, resident(fd, 256, 448)) TH_LOG("the budget did not go past the cold chunks");
	EXPECT_GT(32, resident(fd, 64, 192)) TH_LOG("cold chunks stayed pinned");
	close(fd);
	unlink(path);
}

static void kv_expect(struct __test_metadata *_metadata, const struct llmcache_ioc_kv_stats *st)
{
	const char *pools[] = { "cpu", "storage" };
	char name[64];
	size_t p, f;

	EXPECT_EQ(st->sessions, sysfs_num("kv/sessions"));
	EXPECT_EQ(st->beta_milli, sysfs_num("kv/beta_milli"));
	EXPECT_EQ(st->selects, sysfs_num("kv/selects"));
	for (p = 0; p < 2; p++)
		for (f = 0; f < sizeof(kv_fields) / sizeof(*kv_fields); f++) {
			snprintf(name, sizeof(name), "kv/%s/%s", pools[p], kv_fields[f]);
			EXPECT_EQ(kv_field(&st->pool[p], kv_fields[f]), sysfs_num(name)) TH_LOG("%s", name);
		}
}

TEST_F(llmcache, kv_stats_files)
{
	const char *pools[] = { "cpu", "storage" };
	char path[256];
	struct stat st;
	size_t i, p;

	for (i = 0; i < sizeof(kv_top) / sizeof(*kv_top); i++) {
		snprintf(path, sizeof(path), SYSFS "/kv/%s", kv_top[i]);
		ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
		EXPECT_EQ(0444, st.st_mode & 07777) TH_LOG("%s", path);
		EXPECT_EQ(0, sysfs_num(path + strlen(SYSFS) + 1)) TH_LOG("%s: 0 before any push", path);
	}
	for (p = 0; p < 2; p++)
		for (i = 0; i < sizeof(kv_fields) / sizeof(*kv_fields); i++) {
			snprintf(path, sizeof(path), SYSFS "/kv/%s/%s", pools[p], kv_fields[i]);
			ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
			EXPECT_EQ(0444, st.st_mode & 07777) TH_LOG("%s", path);
			EXPECT_EQ(0, sysfs_num(path + strlen(SYSFS) + 1)) TH_LOG("%s", path);
			EXPECT_EQ(-EACCES, sysfs_write(path + strlen(SYSFS) + 1, "1")) TH_LOG("%s", path);
		}
}

TEST_F(llmcache, kv_stats_ioctl)
{
	struct llmcache_ioc_kv_stats st = kv_sample(), bad;
	unsigned char garbage[sizeof(st)];
	size_t i;

	ASSERT_EQ(0, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, &st));
	EXPECT_EQ(1, sysfs_num("kv/pushes"));
	EXPECT_LT(0, sysfs_num("kv/last_push_ns"));
	kv_expect(_metadata, &st);

	bad = st;
	bad.size = sizeof(bad) - 8;
	EXPECT_EQ(-1, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, &bad));
	EXPECT_EQ(EINVAL, errno);
	bad = st;
	bad.flags = 1;
	EXPECT_EQ(-1, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, &bad));
	EXPECT_EQ(EINVAL, errno);
	bad = st;
	bad.reserved[2] = 7;
	EXPECT_EQ(-1, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, &bad));
	EXPECT_EQ(EINVAL, errno);
	for (i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)(i * 151 + 89);
	EXPECT_EQ(-1, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, garbage));
	EXPECT_EQ(EINVAL, errno);
	/* Another size is another command; no buffer is a fault. */
	EXPECT_EQ(-1, ioctl(self->dev, _IOW(LLMCACHE_IOC_MAGIC, 9, __u64), &st));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, NULL));
	EXPECT_EQ(EFAULT, errno);
	/* Nothing refused changed anything. */
	EXPECT_EQ(1, sysfs_num("kv/pushes"));
	kv_expect(_metadata, &st);

	st.sessions = 0;
	st.pool[LLMCACHE_KV_POOL_STORAGE].spills += 5;
	ASSERT_EQ(0, ioctl(self->dev, LLMCACHE_IOC_KV_STATS, &st));
	EXPECT_EQ(2, sysfs_num("kv/pushes"));
	kv_expect(_metadata, &st);
}

/*
 * LLMCACHE_FILE_NO_DROP: two config-like files read once, one flagged; once seq_drop_ns has passed the
 * other one's scan is dropped and the flagged one stays resident, uncounted in seq_dropped.
 */
TEST_F_TIMEOUT(llmcache, file_opts_no_drop, 120)
{
	char kpath[256], dpath[256];
	int keep = scratch_file("nodrop", 64, kpath, sizeof(kpath));
	int drop = scratch_file("drop", 64, dpath, sizeof(dpath));

	ASSERT_LE(0, keep);
	ASSERT_LE(0, drop);
	drop_caches();
	ASSERT_EQ(0, sysfs_write("seq_drop_ns", "200000000"));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, keep, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, drop, NULL));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, keep, LLMCACHE_FILE_NO_DROP, 0, NULL));
	ASSERT_EQ(0, scan(keep, 64));
	ASSERT_EQ(0, scan(drop, 64));
	EXPECT_EQ(64, wait_stat("stats/seq_dropped", 64));
	EXPECT_EQ(0, resident(drop, 0, 64)) TH_LOG("the unflagged scan stayed");
	usleep(600000); /* three more seq_drop_ns */
	EXPECT_EQ(64, resident(keep, 0, 64)) TH_LOG("the NO_DROP scan was dropped");
	EXPECT_EQ(64, sysfs_num("stats/seq_dropped"));
	close(keep);
	close(drop);
	unlink(kpath);
	unlink(dpath);
}

/*
 * LLMCACHE_FILE_NO_PROTECT: two tokenizer-like files with the same lookups and a reserve of 16 blocks;
 * only the unflagged file's 10 HOT blocks are protected. Clearing the flag fills the reserve; flagging
 * the other file then releases its blocks.
 */
TEST_F_TIMEOUT(llmcache, file_opts_no_protect, 120)
{
	char upath[256], ppath[256];
	int unprot = scratch_file("noprotect", 64, upath, sizeof(upath));
	int prot = scratch_file("protect", 64, ppath, sizeof(ppath));

	ASSERT_LE(0, unprot);
	ASSERT_LE(0, prot);
	drop_caches();
	ASSERT_EQ(0, sysfs_write("seq_drop_ns", "1000000000"));
	ASSERT_EQ(0, sysfs_write("hot_reserve", "65536")); /* 16 blocks */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, unprot, NULL));
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, prot, NULL));
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, unprot, LLMCACHE_FILE_NO_PROTECT, 0, NULL));
	ASSERT_EQ(0, scan(unprot, 64));
	ASSERT_EQ(0, scan(prot, 64));
	ASSERT_EQ(0, lookups(unprot, 5));
	ASSERT_EQ(0, lookups(prot, 5));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS));
	usleep(300000); /* the worker runs 50 ms after an access to an unprotected HOT block */
	EXPECT_EQ(HOT_BLOCKS, sysfs_num("stats/hot_protected")) TH_LOG("NO_PROTECT blocks were protected");
	drop_caches();
	EXPECT_EQ(HOT_BLOCKS, hot_resident(prot)) TH_LOG("protected blocks left the page cache");

	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, unprot, 0, 0, NULL));
	ASSERT_EQ(0, lookups(unprot, 1));
	EXPECT_EQ(16, wait_stat("stats/hot_protected", 16)) TH_LOG("clearing NO_PROTECT protected nothing more");
	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, prot, LLMCACHE_FILE_NO_PROTECT, 0, NULL));
	EXPECT_EQ(HOT_BLOCKS, wait_stat("stats/hot_protected", HOT_BLOCKS)) TH_LOG("setting NO_PROTECT released nothing");
	drop_caches();
	EXPECT_EQ(HOT_BLOCKS, hot_resident(unprot));
	close(unprot);
	close(prot);
	unlink(upath);
	unlink(ppath);
}

/*
 * Registration allocates before taking the registration mutex, so racing registrations of one file
 * both allocate: exactly one links it, every other gets EEXIST and its state is freed (the ids stay
 * dense: a refused registration takes none), round after round.
 */
TEST_F_TIMEOUT(llmcache, register_race, 120)
{
	enum { PROCS = 4, ROUNDS = 50 };
	char path[256];
	int fd = scratch_file("race", 4, path, sizeof(path)), go[2], done[2], r, i, status;
	pid_t pids[PROCS];
	__u64 id = 0;

	ASSERT_LE(0, fd);
	for (r = 0; r < ROUNDS; r++) {
		int wins = 0, dups = 0;
		char c = 0;

		ASSERT_EQ(0, pipe(go));
		ASSERT_EQ(0, pipe(done));
		for (i = 0; i < PROCS; i++) {
			pids[i] = fork();
			ASSERT_LE(0, pids[i]);
			if (pids[i] == 0) {
				int err;

				close(go[1]);
				if (read(go[0], &c, 1) != 0)
					_exit(3);
				err = ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL);
				c = err == 0 ? 'w' : err == -EEXIST ? 'd' : 'x';
				_exit(write(done[1], &c, 1) == 1 ? 0 : 4);
			}
		}
		close(go[0]);
		close(go[1]); /* every child's read returns now */
		close(done[1]);
		while (read(done[0], &c, 1) == 1) {
			wins += c == 'w';
			dups += c == 'd';
		}
		close(done[0]);
		for (i = 0; i < PROCS; i++) {
			ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
			EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		}
		ASSERT_EQ(1, wins) TH_LOG("round %d: %d registrations succeeded", r, wins);
		ASSERT_EQ(PROCS - 1, dups) TH_LOG("round %d", r);
		ASSERT_EQ(1, sysfs_num("registered"));
		ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_UNREGISTER, fd, &id));
		ASSERT_EQ((__u64)r + 1, id) TH_LOG("round %d: id %llu", r, (unsigned long long)id);
	}
	EXPECT_EQ(0, sysfs_num("registered"));
	close(fd);
	unlink(path);
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -errno;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -EIO;
}

#define MEMCG_ROOT "/run/llmcache-cgroup2"

/*
 * Mount cgroup v2 at MEMCG_ROOT with the memory controller and make cgroup cg limited to max bytes: 0,
 * or -errno, or 0 with *why set when this kernel cannot (the test then skips).
 */
static int memcg_make(const char *cg, const char *max, const char **why)
{
	char path[256];

	mkdir(MEMCG_ROOT, 0755);
	if (mount("none", MEMCG_ROOT, "cgroup2", 0, NULL) && errno != EBUSY)
		return *why = "cannot mount cgroup2 at " MEMCG_ROOT, 0;
	if (write_text(MEMCG_ROOT "/cgroup.subtree_control", "+memory")) {
		umount(MEMCG_ROOT);
		return *why = "the memory controller is not available to cgroup v2 here", 0;
	}
	if (mkdir(cg, 0755) && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/memory.max", cg);
	return write_text(path, max);
}

/* cg's memory.events, read into buf. */
static const char *memcg_events(const char *cg, char *buf, size_t size)
{
	char path[256];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "%s/memory.events", cg);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, size - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* Fork a child that joins cgroup cg: 0 in the child (it exits 2 if it cannot join), its pid in the parent. */
static pid_t fork_into(const char *cg)
{
	char procs[256];
	pid_t pid = fork();

	if (pid)
		return pid;
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	if (write_text(procs, "0"))
		_exit(2);
	return 0;
}

/* The wait status of child pid once it exits; -1 if it could not be forked or waited for. */
static int reap(pid_t pid)
{
	int status;

	return pid < 0 || waitpid(pid, &status, 0) != pid ? -1 : status;
}

/* A child in cgroup cg reads fd's first size bytes sweeps times, as an engine's loop: its wait status. */
static int sweep_in(const char *cg, int fd, off_t size, int sweeps)
{
	pid_t pid = fork_into(cg);

	if (!pid)
		_exit(sweep(fd, size, sweeps) ? 3 : 0);
	return reap(pid);
}

/* A child in cgroup cg maps fd's first size bytes and reads them sweeps times, as an mmap engine: its wait status. */
static int sweep_mapped_in(const char *cg, int fd, off_t size, int sweeps)
{
	pid_t pid = fork_into(cg);

	if (!pid)
		_exit(sweep_mapped(fd, size, sweeps) ? 3 : 0);
	return reap(pid);
}

/* The engine that ran in cgroup cg finished (its wait status) and the cgroup's OOM killer took nothing. */
static void expect_engine_finished(struct __test_metadata *_metadata, const char *cg, int status)
{
	char events[512];

	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the engine did not finish: status %#x (killed by signal %d)", status,
		       WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	EXPECT_NE(NULL, strstr(memcg_events(cg, events, sizeof(events)), "oom_kill 0")) TH_LOG("memory.events: %s", events);
}

/*
 * An engine in a memory cgroup (32 MiB) loops over a file larger than its limit (48 MiB) with read(), with
 * a global pin budget far above both: the pins stop where the planner's read() budget does
 * (llc_plan_read_budget: the limit less the engine's memory and three read-ahead windows of 4 MiB at
 * least), the engine keeps the rest and finishes without an OOM kill. Without the cap the pins,
 * unevictable and charged to the cgroup, fill it and the cgroup's OOM killer takes the engine.
 */
TEST_F_TIMEOUT(llmcache, pins_capped_by_memcg, 300)
{
	const char *cg = MEMCG_ROOT "/llmcache-memcg", *why = NULL;
	char file[256];
	long long pinned;
	int fd, status;

	ASSERT_LE(0, memcg_make(cg, "33554432", &why));
	if (why)
		SKIP(return, "%s", why);
	fd = scratch_file("memcg-loop", 12288, file, sizeof(file));
	ASSERT_LE(0, fd);
	drop_caches(); /* the engine's reads charge the pages to its cgroup */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, sysfs_write("pin_budget", "268435456"));
	status = sweep_in(cg, fd, 12288 * 4096LL, 4);
	ASSERT_NE(-1, status);
	expect_engine_finished(_metadata, cg, status);
	pinned = wait_pinned(8192 - 3 * 1024);
	EXPECT_LT(2048, pinned) TH_LOG("pins (%lld blocks) far below the planner's read() budget", pinned);
	EXPECT_GE(8192 - 3 * 1024, pinned) TH_LOG("pins (%lld blocks) leave the engine's reads no room", pinned);
	ASSERT_EQ(0, sysfs_write("enable", "0"));
	EXPECT_EQ(0, rmdir(cg));
	umount(MEMCG_ROOT);
	close(fd);
	unlink(file);
}

/* The value of key in cgroup cg's memory.stat ("file": the bytes of page cache charged to it), or -1. */
static long long memcg_stat(const char *cg, const char *key)
{
	char path[256], line[256], name[64];
	long long v = -1, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", cg);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lld", name, &n) == 2 && !strcmp(name, key)) {
			v = n;
			break;
		}
	if (f)
		fclose(f);
	return v;
}

/*
 * An mmap engine in an 80 MiB cgroup loops over a 96 MiB file: the planner pins the loop's head and
 * leaves the stream its room (eight 4 MiB read-ahead windows, at most two thirds of the cgroup's room
 * for the stream to be read ahead at all: in 64 MiB it is not), and the module reads the stream ahead
 * of the engine (kmod/stream.c), in the window after its position and, at the end of an iteration, the
 * next iteration's first unpinned blocks, and drops what the engine passed. The pages read ahead are
 * charged to the engine's cgroup: once the engine is gone, every resident page of the file is in the
 * cgroup's page cache, the window read for the iteration that did not come among them. With
 * LLMCACHE_FILE_NO_READ_AHEAD nothing is read ahead.
 */
TEST_F_TIMEOUT(llmcache, stream_read_ahead_in_memcg, 300)
{
	const char *cg = MEMCG_ROOT "/llmcache-stream", *why = NULL;
	const int loop = 24576;
	long long read_ahead, dropped, pinned, charged;
	int fd, status, total;
	char path[256];

	ASSERT_LE(0, memcg_make(cg, "83886080", &why));
	if (why)
		SKIP(return, "%s", why);
	fd = scratch_file("memcg-stream", 0, path, sizeof(path));
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, (off_t)loop * 4096)); /* sparse: its holes read as page-cache pages of zeros */
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, sysfs_write("pin_budget", "268435456"));
	read_ahead = sysfs_num("stats/loop_read_ahead");
	dropped = sysfs_num("stats/loop_dropped");

	status = sweep_mapped_in(cg, fd, (off_t)loop * 4096, 8);
	ASSERT_NE(-1, status);
	expect_engine_finished(_metadata, cg, status);
	sleep(1); /* the last window's reads complete */
	pinned = sysfs_num("stats/pinned");
	read_ahead = sysfs_num("stats/loop_read_ahead") - read_ahead;
	dropped = sysfs_num("stats/loop_dropped") - dropped;
	total = resident(fd, 0, loop);
	charged = memcg_stat(cg, "file");
	TH_LOG("%lld pinned, %lld blocks read ahead, %lld dropped, %d resident, %lld bytes of page cache in the cgroup",
	       pinned, read_ahead, dropped, total, charged);
	EXPECT_LT(0, pinned) TH_LOG("the loop's head is not pinned");
	EXPECT_GT(loop, pinned) TH_LOG("the whole loop is pinned: nothing to read ahead");
	/*
	 * Over 8 sweeps: at least a quarter of one iteration's stream each way. How much more depends on how
	 * often the worker runs beside the sweep, and the cgroup's reclaim takes passed pages the worker is
	 * slow to drop (they then do not count): 0.86 of an iteration on a loaded host, 8 on a quiet one.
	 */
	EXPECT_LT((loop - pinned) / 4, read_ahead) TH_LOG("the stream was hardly read ahead");
	EXPECT_LT((loop - pinned) / 4, dropped) TH_LOG("the stream was hardly dropped once passed");
	EXPECT_LT(pinned, total) TH_LOG("nothing read ahead for the next iteration is resident");
	EXPECT_LE((long long)total * 4096, charged + (1 << 20)) TH_LOG("pages read ahead are charged to another cgroup");

	ASSERT_EQ(0, file_opts(self->dev, LLMCACHE_IOC_SET_FILE_OPTS, fd, LLMCACHE_FILE_NO_READ_AHEAD, 0, NULL));
	read_ahead = sysfs_num("stats/loop_read_ahead");
	ASSERT_NE(-1, sweep_mapped_in(cg, fd, (off_t)loop * 4096, 2));
	EXPECT_EQ(read_ahead, sysfs_num("stats/loop_read_ahead")) TH_LOG("NO_READ_AHEAD: blocks were read ahead");
	ASSERT_EQ(0, sysfs_write("enable", "0"));
	EXPECT_EQ(0, rmdir(cg));
	umount(MEMCG_ROOT);
	close(fd);
	unlink(path);
}

/*
 * The head of a mapped file that does not fit is pinned from the engine's first fault (llc_plan_heads),
 * not from its loop, which only its later passes show: an mmap engine in an 80 MiB cgroup reads a
 * 96 MiB file once. After that one pass its first 4 MiB are pinned and resident; left to the cgroup's
 * LRU they would be the first pages reclaimed, and nothing would be pinned before the second pass.
 */
TEST_F_TIMEOUT(llmcache, head_pinned_in_first_pass, 300)
{
	const char *cg = MEMCG_ROOT "/llmcache-head", *why = NULL;
	const int blocks = 24576, head = 1024;
	long long pinned;
	int fd, status;
	char path[256];

	ASSERT_LE(0, memcg_make(cg, "83886080", &why));
	if (why)
		SKIP(return, "%s", why);
	fd = scratch_file("memcg-head", 0, path, sizeof(path));
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, (off_t)blocks * 4096));
	drop_caches();
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, sysfs_write("pin_budget", "268435456"));
	status = sweep_mapped_in(cg, fd, (off_t)blocks * 4096, 1);
	ASSERT_NE(-1, status);
	expect_engine_finished(_metadata, cg, status);
	pinned = sysfs_num("stats/pinned");
	TH_LOG("%lld blocks pinned after one pass, %d of the first %d resident", pinned, resident(fd, 0, head), head);
	EXPECT_LE(head, pinned) TH_LOG("the file's head is not pinned after the first pass");
	EXPECT_GT(blocks, pinned) TH_LOG("the whole file is pinned: the cgroup cannot hold it");
	EXPECT_EQ(head, resident(fd, 0, head)) TH_LOG("the head was reclaimed during the first pass");
	ASSERT_EQ(0, sysfs_write("enable", "0"));
	EXPECT_EQ(0, rmdir(cg));
	umount(MEMCG_ROOT);
	close(fd);
	unlink(path);
}

/* A child in cgroup cg touches mib MiB of anonymous memory in small pages: its wait status. */
static int grow_anon_in(const char *cg, size_t mib)
{
	pid_t pid = fork_into(cg);
	size_t len = mib << 20, i;
	char *p;

	if (pid)
		return reap(pid);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(3);
	madvise(p, len, MADV_NOHUGEPAGE);
	for (i = 0; i < len; i += 4096)
		p[i] = 1;
	_exit(0);
}

/*
 * The engine's own memory grows into the part of its cgroup's limit that the pins hold: the cgroup's
 * reclaim finds nothing left to free and the module gives pins back (kmod/memcg.c) instead of letting
 * the cgroup's OOM killer take the engine. A 64 MiB cgroup, a 24 MiB loop read in it and pinned whole
 * (within the planner's read() budget), then 52 MiB of anonymous memory touched in the same cgroup: without the
 * release, the 24 MiB that nothing can reclaim leave 40 and the allocation is OOM-killed. Once the
 * pressure is over the loop's pins grow back.
 */
TEST_F_TIMEOUT(llmcache, pins_yield_to_memcg_pressure, 300)
{
	const char *cg = MEMCG_ROOT "/llmcache-press", *why = NULL;
	char file[256], events[512];
	long long released, squeezed;
	int fd, status, i;

	ASSERT_LE(0, memcg_make(cg, "67108864", &why));
	if (why)
		SKIP(return, "%s", why);
	fd = scratch_file("memcg-press", 6144, file, sizeof(file));
	ASSERT_LE(0, fd);
	drop_caches(); /* the engine's reads charge the pages to its cgroup */
	ASSERT_EQ(0, ioc_file(self->dev, LLMCACHE_IOC_REGISTER, fd, NULL));
	ASSERT_EQ(0, sysfs_write("pin_budget", "268435456"));
	ASSERT_NE(-1, sweep_in(cg, fd, 6144 * 4096LL, 3));
	ASSERT_EQ(6144, wait_pinned(6144)) TH_LOG("the loop is not pinned whole");
	released = sysfs_num("stats/shrinker_released");

	status = grow_anon_in(cg, 52);
	ASSERT_NE(-1, status);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the allocation did not finish: status %#x (killed by signal %d)", status,
		       WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	EXPECT_NE(NULL, strstr(memcg_events(cg, events, sizeof(events)), "oom_kill 0")) TH_LOG("memory.events: %s", events);
	squeezed = sysfs_num("stats/pinned");
	EXPECT_GE(6144 - 12 * 256, squeezed) TH_LOG("pins did not make room for the 12 MiB the allocation lacked");
	EXPECT_LE(released + 6144 - squeezed, sysfs_num("stats/shrinker_released"));

	sleep(2); /* a quiet second, then each plan grows the room back by 1/16 of the allowance */
	ASSERT_NE(-1, sweep_in(cg, fd, 6144 * 4096LL, 4));
	for (i = 0; i < 400 && sysfs_num("stats/pinned") <= squeezed; i++)
		usleep(50000);
	EXPECT_LT(squeezed, sysfs_num("stats/pinned"))
		TH_LOG("the pins did not grow back after the pressure: cgroup anon %lld, file %lld, unevictable %lld",
		       memcg_stat(cg, "anon"), memcg_stat(cg, "file"), memcg_stat(cg, "unevictable"));
	ASSERT_EQ(0, sysfs_write("enable", "0"));
	EXPECT_EQ(0, rmdir(cg));
	umount(MEMCG_ROOT);
	close(fd);
	unlink(file);
}
