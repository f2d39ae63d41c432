/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * Types shared by bpf/llmtrace.bpf.c and its userspace loaders (llmtrace, later llmcached --mode=bpf).
 * The ring buffer carries struct llmcache_access records (include/uapi/llmcache.h) exactly as the native
 * trace stores them; tunables are the skeleton's const volatile rodata (see llmtrace.bpf.c).
 */
#ifndef LLMTRACE_H
#define LLMTRACE_H

#include "../include/uapi/llmcache.h"

/* Counters in the per-CPU `counters` array map, summed by userspace. */
enum llmtrace_counter {
	LLMTRACE_CNT_LOST = 0,   /* records dropped because the ring buffer was full */
	LLMTRACE_CNT_MERGED,     /* filemap_get_pages calls folded into the read that started them */
	LLMTRACE_CNT_JOINED,     /* reads joined to the thread's run of reads before them (join_blocks) */
	LLMTRACE_CNT_INSERTED,   /* pages of recorded files added to the page cache (read from storage) */
	LLMTRACE_CNT_EVICTED,    /* pages of recorded files removed from the page cache */
	LLMTRACE_NR_COUNTERS
};

/*
 * The first record about a file (dev, inode) is preceded by one naming it: the names of the dentries from
 * the file up to the root of its file system, leaf first (userspace prepends the mount point of dev).
 * a.op is LLMCACHE_OP_PATH; depth names are valid; truncated is set when the walk stopped before the root.
 */
#define LLMTRACE_PATH_DEPTH 24
#define LLMTRACE_NAME_MAX 128
struct llmtrace_path_event {
	struct llmcache_access a;
	__u32 depth;
	__u32 truncated;
	char names[LLMTRACE_PATH_DEPTH][LLMTRACE_NAME_MAX];
};

/* Key and values of the `named` map: userspace marks the files outside --path-prefix IGNORED. */
struct llmtrace_file_key {
	__u64 inode;
	__u32 dev;
	__u32 pad;
};
enum llmtrace_file_state {
	LLMTRACE_FILE_RECORDED = 1,
	LLMTRACE_FILE_IGNORED = 2,
};

#define LLMTRACE_MAX_FILES 65536 /* files named so far (forgotten least recently used first) */
#define LLMTRACE_MAX_TGIDS 65536 /* processes followed at once (the -p / -- CMD set and their children) */
#define LLMTRACE_MAX_THREADS 65536 /* threads with a read in flight (filemap_get_pages merging) */

#endif /* LLMTRACE_H */
