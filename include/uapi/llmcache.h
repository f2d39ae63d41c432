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
	LLMCACHE_NR_STATS
};

#endif /* _UAPI_LLMCACHE_H */
