/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * llmcache ABI shared by the kernel module, the BPF programs and userspace.
 *
 * Everything that crosses a boundary (kernel <-> user, BPF ring buffer <-> user, trace file <-> tools)
 * is defined here, with fixed-width types only. A block is 4 KiB whatever the page size of the machine:
 * traces and policies count in these blocks.
 */
#ifndef _UAPI_LLMCACHE_H
#define _UAPI_LLMCACHE_H

#include <linux/types.h>

#define LLMCACHE_BLOCK_SHIFT 12
#define LLMCACHE_BLOCK_SIZE (1U << LLMCACHE_BLOCK_SHIFT)

/* What kind of access a record describes. */
enum llmcache_op {
	LLMCACHE_OP_READ = 0,       /* read(), pread64(), readv(), ... */
	LLMCACHE_OP_WRITE = 1,      /* write(), pwrite64(), writev(), ... */
	LLMCACHE_OP_MMAP_FAULT = 2, /* a page fault on a file mapping */
	LLMCACHE_OP_PATH = 3,       /* not an access: names the file (dev, inode); see the trace format */
	LLMCACHE_NR_OPS
};

/* The classes of Algorithm 1: one-time scans, per-token loops, and the small hot set. */
enum llmcache_class {
	LLMCACHE_CLASS_SEQ = 0,
	LLMCACHE_CLASS_LOOP = 1,
	LLMCACHE_CLASS_HOT = 2,
	LLMCACHE_NR_CLASSES
};

/*
 * One access to nr_blocks consecutive 4 KiB blocks of one file, starting at first_block.
 * 40 bytes, naturally aligned. When op is LLMCACHE_OP_PATH the record names the file (dev, inode):
 * nr_blocks bytes of path follow it in a native trace, padded with zeros to a multiple of 8.
 */
struct llmcache_access {
	__u64 time_ns;     /* CLOCK_MONOTONIC or trace-relative time */
	__u64 inode;       /* inode number, or a 64-bit hash of the path when the inode is unknown */
	__u64 first_block; /* byte offset >> LLMCACHE_BLOCK_SHIFT */
	__u32 pid;         /* thread group id of the process */
	__u32 dev;         /* device number (new_encode_dev), 0 when unknown */
	__u32 nr_blocks;   /* blocks accessed; for LLMCACHE_OP_PATH the path length in bytes */
	__u8 op;           /* enum llmcache_op */
	__u8 pad[3];
};

/* llmcache_access.dev of a device number (major up to 12 bits, minor up to 20): the kernel's new_encode_dev(). */
static inline __u32 llmcache_encode_dev(__u32 major, __u32 minor)
{
	return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xffU) << 12);
}

/*
 * A file's key in userspace's tables of files (the daemon's, llmtrace's), from its encoded device and
 * inode: the device above bit 44, so that two files of one device never share a key (inode numbers stay
 * below 2^44 in practice) and a key of two devices rarely does.
 */
static inline __u64 llmcache_file_key(__u32 dev, __u64 inode)
{
	return ((__u64)dev << 44) ^ inode;
}

/*
 * Native trace file: this header, then a stream of struct llmcache_access records (and the path bytes
 * that follow LLMCACHE_OP_PATH records), little-endian, until end of file. Readers stream it.
 */
#define LLMCACHE_TRACE_MAGIC "LLMTRACE"
#define LLMCACHE_TRACE_VERSION 1

struct llmcache_trace_header {
	char magic[8];        /* LLMCACHE_TRACE_MAGIC, not NUL-terminated */
	__u32 version;        /* LLMCACHE_TRACE_VERSION */
	__u32 header_size;    /* sizeof(struct llmcache_trace_header): records start here */
	__u32 record_size;    /* sizeof(struct llmcache_access) */
	__u32 flags;          /* LLMCACHE_TRACE_F_* */
	__u64 start_time_ns;  /* time of the first record, or 0 */
	char producer[64];    /* NUL-terminated: what wrote the trace, e.g. "llmworkload 0.1 decoder" */
};

#define LLMCACHE_TRACE_F_MMAP_UNSEEN (1U << 0) /* regular files were mmapped but faults were not recorded */
#define LLMCACHE_TRACE_F_WRITES_UNSEEN (1U << 1) /* writes were not recorded (llmtrace's filemap hooks without --writes) */

/* Statistics, one counter each, in the order sysfs and llmcachectl list them. */
enum llmcache_stat {
	LLMCACHE_STAT_ACCESSES = 0,      /* block accesses seen */
	LLMCACHE_STAT_HITS,              /* accesses to resident blocks */
	LLMCACHE_STAT_MISSES,            /* accesses that needed a read from storage */
	LLMCACHE_STAT_SEQ_BLOCKS,        /* accesses classified SEQ */
	LLMCACHE_STAT_LOOP_BLOCKS,       /* accesses classified LOOP */
	LLMCACHE_STAT_HOT_BLOCKS,        /* accesses classified HOT */
	LLMCACHE_STAT_LOOP_ITERATIONS,   /* loop restarts observed */
	LLMCACHE_STAT_SEQS_CREATED,      /* block sequences started */
	LLMCACHE_STAT_SEQS_RECYCLED,     /* sequences dropped because the table was full */
	LLMCACHE_STAT_CHUNKS_RECYCLED,   /* block-index chunks dropped because the index was full */
	LLMCACHE_STAT_PINNED,            /* blocks pinned now */
	LLMCACHE_STAT_SHRINKER_RELEASED, /* pins and pages released under memory pressure */
	LLMCACHE_STAT_EVENTS_DROPPED,    /* events lost (ring buffer full, allocation failure) */
	LLMCACHE_STAT_SEQ_DROPPED,       /* SEQ pages invalidated once their scan had passed, or under pressure */
	LLMCACHE_STAT_HOT_PROTECTED,     /* HOT blocks protected now (within hot_reserve) */
	LLMCACHE_STAT_LOOP_DROPPED,      /* unpinned LOOP pages dropped after their access (loops that cannot fit) */
	LLMCACHE_STAT_LOOP_READ_AHEAD,   /* unpinned LOOP blocks read ahead of an mmap engine (loops that cannot fit) */
	LLMCACHE_STAT_REUSE_ROOM,        /* pins given up now to pages faulted again within two loop periods */
	LLMCACHE_NR_STATS
};

/*
 * Kernel module ABI: the misc device /dev/llmcache (root only) and its ioctls. Files are registered by
 * an open file descriptor; the module holds its own reference to the file until it is unregistered or
 * the module is unloaded. sysfs names live under /sys/kernel/llmcache/ (Documentation/ABI/testing/).
 */
#include <linux/ioctl.h>

#define LLMCACHE_DEV_NAME "llmcache"
#define LLMCACHE_SYSFS_DIR "/sys/kernel/llmcache"
#define LLMCACHE_IOC_MAGIC 0xB9
#define LLMCACHE_STATS_MAX 32 /* room for LLMCACHE_NR_STATS to grow without changing the ioctl */

/* How the module sees page-cache accesses (hook_mode in sysfs names them "tracepoint" and "kprobe"). */
enum llmcache_hook_mode {
	LLMCACHE_HOOK_TRACEPOINT = 0, /* filemap access tracepoints (6.10+) */
	LLMCACHE_HOOK_KPROBE = 1,     /* kprobes on filemap_read / filemap_fault */
};

/* LLMCACHE_IOC_REGISTER: fd in; id out (the file's directory /sys/kernel/llmcache/files/<id>). */
struct llmcache_ioc_file {
	__s32 fd;
	__u32 flags; /* must be 0 */
	__u64 id;
};

/* LLMCACHE_IOC_FILE_STATS: fd in; what the module saw of that registered file out. */
struct llmcache_ioc_file_stats {
	__s32 fd;
	__u32 flags;                              /* must be 0 */
	__u64 id;
	__u64 accesses;                           /* block accesses */
	__u64 class_blocks[LLMCACHE_NR_CLASSES];  /* accesses per class after classification */
	__u64 added;                              /* pages added to the page cache (misses and readahead) */
	__u64 removed;                            /* pages removed from the page cache */
};

/* LLMCACHE_IOC_STATS: global statistics. */
struct llmcache_ioc_stats {
	__u64 stats[LLMCACHE_STATS_MAX];             /* enum llmcache_stat; the rest are 0 */
	__u64 class_seqs[LLMCACHE_NR_CLASSES];       /* live block sequences per class */
	__u32 nr_stats;                              /* LLMCACHE_NR_STATS of the module */
	__u32 registered;                            /* files registered now */
	__u32 hook_mode;                             /* enum llmcache_hook_mode */
	__u32 enabled;
};

/*
 * Per-file options (LLMCACHE_IOC_SET_FILE_OPTS / LLMCACHE_IOC_GET_FILE_OPTS). flags: LLMCACHE_FILE_*;
 * an unknown bit is refused with EINVAL. pin_limit: bytes of this file the module may pin, 0: no
 * per-file limit (pin_budget still applies). NO_PIN: never pin the file's blocks; NO_DROP: never
 * invalidate its SEQ blocks or loop tails; NO_PROTECT: never protect its HOT blocks; NO_READ_AHEAD: never
 * read its loop's stream ahead of an mmap engine (stats/loop_read_ahead).
 */
#define LLMCACHE_FILE_NO_PIN (1u << 0)
#define LLMCACHE_FILE_NO_DROP (1u << 1)
#define LLMCACHE_FILE_NO_PROTECT (1u << 2)
#define LLMCACHE_FILE_NO_READ_AHEAD (1u << 3)
#define LLMCACHE_FILE_FLAGS_ALL \
	(LLMCACHE_FILE_NO_PIN | LLMCACHE_FILE_NO_DROP | LLMCACHE_FILE_NO_PROTECT | LLMCACHE_FILE_NO_READ_AHEAD)

struct llmcache_ioc_file_opts {
	__s32 fd;        /* a descriptor of a registered file */
	__u32 flags;     /* LLMCACHE_FILE_* */
	__u64 pin_limit; /* bytes, 0: no per-file limit */
};

/*
 * Automatic mode (LLMCACHE_IOC_SET_AUTO): every second the module registers the regular files that the
 * target process (or every process of the target cgroup v2) has open or mapped and that are at least
 * min_size bytes, on storage-backed filesystems. LLMCACHE_AUTO_OFF stops it; so does the target
 * process's exit or the cgroup's removal. Files stay registered when it stops.
 */
enum llmcache_auto_mode {
	LLMCACHE_AUTO_OFF = 0,
	LLMCACHE_AUTO_PID = 1,    /* target: a process id (thread group) */
	LLMCACHE_AUTO_CGROUP = 2, /* target: a descriptor of a cgroup v2 directory */
};

struct llmcache_ioc_auto {
	__u32 mode;     /* enum llmcache_auto_mode */
	__s32 target;   /* pid or cgroup directory fd; ignored when off */
	__u64 min_size; /* bytes, at least LLMCACHE_BLOCK_SIZE; ignored when off */
	__u32 flags;    /* must be 0 */
	__u32 pad;      /* must be 0 */
};

/*
 * Per-loop sizing (LLMCACHE_IOC_LOOPS): a snapshot of every live LOOP sequence, taken at one instant,
 * with the sizing rule applied: s_min = max(0, blocks - BW*T), deficit = max(0, s_min - pinned),
 * stall_ns = the predicted stall per iteration with the pinned blocks cached (~0: BW unknown).
 */
struct llmcache_loop {
	__u64 file_id;     /* registration id: /sys/kernel/llmcache/files/<file_id> */
	__u64 seq;         /* the policy core's sequence id: files/<file_id>/loops/<seq> */
	__u64 first_block; /* first 4 KiB block of the loop */
	__u64 blocks;      /* N: blocks per iteration */
	__u64 period_ns;   /* wall time between the last two iteration starts */
	__u64 iterations;  /* iteration starts seen */
	__u64 s_min;       /* blocks that must be cached for no stall */
	__u64 pinned;      /* blocks of the loop pinned now */
	__u64 deficit;     /* max(0, s_min - pinned) */
	__u64 stall_ns;    /* predicted stall per iteration; ~0ULL when BW is unknown */
};

#define LLMCACHE_LOOPS_BW_MEASURED (1u << 0) /* bw came from the measured miss rate */
#define LLMCACHE_LOOPS_T_MEASURED (1u << 1)  /* t_ns came from the shortest loop period */

struct llmcache_ioc_loops {
	__u64 loops;         /* in: user pointer to max struct llmcache_loop */
	__u32 max;           /* in: room at loops (0: only count) */
	__u32 count;         /* out: entries written */
	__u32 total;         /* out: live loops (more than count when max was too small) */
	__u32 flags;         /* in: must be 0; out: LLMCACHE_LOOPS_* */
	__u64 bw;            /* out: bytes per second the rule used (0: unknown) */
	__u64 t_ns;          /* out: T the rule used */
	__u64 bw_measured;   /* out: bytes per second misses were served at, 0: not measured yet */
	__u64 t_measured_ns; /* out: the shortest loop period (a loop's shorter of its last two), 0: none */
};

#define LLMCACHE_IOC_REGISTER _IOWR(LLMCACHE_IOC_MAGIC, 1, struct llmcache_ioc_file)
#define LLMCACHE_IOC_UNREGISTER _IOW(LLMCACHE_IOC_MAGIC, 2, struct llmcache_ioc_file)
#define LLMCACHE_IOC_STATS _IOR(LLMCACHE_IOC_MAGIC, 3, struct llmcache_ioc_stats)
#define LLMCACHE_IOC_FILE_STATS _IOWR(LLMCACHE_IOC_MAGIC, 4, struct llmcache_ioc_file_stats)
#define LLMCACHE_IOC_SET_FILE_OPTS _IOW(LLMCACHE_IOC_MAGIC, 5, struct llmcache_ioc_file_opts)
#define LLMCACHE_IOC_GET_FILE_OPTS _IOWR(LLMCACHE_IOC_MAGIC, 6, struct llmcache_ioc_file_opts)
#define LLMCACHE_IOC_SET_AUTO _IOW(LLMCACHE_IOC_MAGIC, 7, struct llmcache_ioc_auto)
#define LLMCACHE_IOC_LOOPS _IOWR(LLMCACHE_IOC_MAGIC, 8, struct llmcache_ioc_loops)

/*
 * LLMCACHE_IOC_KV_STATS: llmcached pushes the KV service's statistics (summed over its sessions; the
 * counters include closed sessions) so that they show under /sys/kernel/llmcache/kv/. size must be
 * sizeof(struct llmcache_ioc_kv_stats) and flags and reserved 0, or the push is refused (-EINVAL).
 */
enum llmcache_kv_pool {
	LLMCACHE_KV_POOL_CPU = 0,     /* pages in host memory */
	LLMCACHE_KV_POOL_STORAGE = 1, /* slabs on the storage device (SmartSSD, NVMe, loop, file) */
	LLMCACHE_KV_NR_POOLS
};

struct llmcache_kv_pool_stats {
	__u64 bytes;            /* KV bytes held now */
	__u64 tokens;           /* tokens held now */
	__u64 spills;           /* pages that left the CPU pool / slabs written to storage */
	__u64 restores;         /* pages that came back to the CPU pool / slabs read from storage */
	__u64 bus_bytes;        /* bytes this pool moved over the host bus (storage: slabs and Score Blocks) */
	__u64 kernel_runs;      /* scoring kernel runs (CPU: selects that scored resident pages; storage: jobs) */
	__u64 scored_tokens;    /* tokens scored */
	__u64 score_latency_ns; /* mean time of one run, from its start to its last Score Block */
};

struct llmcache_ioc_kv_stats {
	__u32 size;             /* sizeof(struct llmcache_ioc_kv_stats) */
	__u32 flags;            /* must be 0 */
	__u32 sessions;         /* sessions open now */
	__u32 beta_milli;       /* CPU:storage split in force (HillInfer's beta) x 1000; 0 = none */
	__u64 selects;          /* selections served */
	__u64 reserved[3];      /* must be 0 */
	struct llmcache_kv_pool_stats pool[LLMCACHE_KV_NR_POOLS];
};

#define LLMCACHE_IOC_KV_STATS _IOW(LLMCACHE_IOC_MAGIC, 9, struct llmcache_ioc_kv_stats)

#endif /* _UAPI_LLMCACHE_H */
