// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * llmtrace: record which 4 KiB blocks of which regular files the traced processes read, through the page
 * cache or through mmap, as struct llmcache_access records in a BPF ring buffer. The policy core
 * (libllmcache/core) classifies exactly these records, so a trace of a real engine can be replayed by
 * llmreplay and the same feed drives llmcached's userspace mode.
 *
 * Hooks, chosen by the loader per kernel (programs whose attach point is missing are not loaded):
 * - filemap raw tracepoints where the kernel has them (mm_filemap_get_pages, mm_filemap_map_pages and
 *   mm_filemap_fault: 6.18 here, probed in BTF at load time): every buffered read including cache hits,
 *   fault-around batches and mmap faults, with the address_space, so the inode's mode, size and device
 *   are read through CO-RE. Fault-around records are widened to the large folios at their ends.
 *   filemap_read() calls filemap_get_pages() once per folio batch with the remaining range of the same
 *   read(); the batches after the first are folded into the first (same thread, same inode, same end,
 *   a higher start, and the same read-syscall count task->ioac.syscr), so one read() is one record. The
 *   first batch's record starts where the read syscall does, taken from the task's user registers.
 *   No syscall tracepoint is attached in this mode unless writes are asked for (record_writes).
 * - otherwise (e.g. Linux 6.1) the raw syscall tracepoints sys_enter/sys_exit for read, pread64, readv,
 *   preadv, preadv2, with the file and its offset taken from the task's fd table at entry and the byte
 *   count at exit; and for mmap, kprobes on filemap_map_pages and filemap_fault (fault-around and faults,
 *   the same records as the tracepoints), or where kprobes cannot attach (this machine's 6.18 has no
 *   kprobe PMU) exceptions:page_fault_user with bpf_find_vma() (the faulting pages only).
 * - writes: sys_enter for write, pwrite64, writev, pwritev, pwritev2 (the offset is i_size for O_APPEND
 *   files), always in the syscall mode and with record_writes in the filemap mode, where it is attached
 *   for them alone; there the byte count is the one asked for, in the syscall mode the one written
 *   (sys_exit, attached anyway for the reads).
 * - mm_filemap_add_to_page_cache / mm_filemap_delete_from_page_cache (tp_btf, 6.1 too): pages of the
 *   recorded files read into the page cache and evicted, counted (LLMTRACE_CNT_INSERTED / _EVICTED).
 * - sched_process_fork (raw tracepoint) adds the children of followed processes to the followed set.
 * Names: before the first record about a file, a struct llmtrace_path_event carries the dentry names from
 * the inode (its first alias) up to its file system's root; userspace adds the mount point of dev. This
 * names files that a short-lived process opened and closed before userspace could look in /proc.
 * Filters: followed tgids (-p, -- CMD), a cgroup (v2, its descendants too), a minimum file size, regular
 * files only, and paths: userspace marks the files outside --path-prefix IGNORED in `named` once named.
 * A record that finds the ring buffer full is counted in LLMTRACE_CNT_LOST.
 * Joined reads: a thread's read that carries on its previous read of the same file joins that record (in
 * the thread's task storage) up to join_blocks blocks, so small sequential reads cost one ring buffer
 * record per join_blocks blocks. The record is sent when a read does not join it, at the thread's exit
 * (sched_process_exit) and when userspace stops recording (the task iterator flush_runs).
 * fentry/fexit are not used: they do not attach on every kernel this must run on. kprobes are used only for
 * mmap without the filemap tracepoints: a kprobe costs more than a tp_btf hook.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#define _LINUX_TYPES_H /* vmlinux.h already has the __u* types that llmcache.h asks <linux/types.h> for */
#include "llmtrace.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define S_IFMT 00170000
#define S_IFREG 0100000
#define PAGE_SHIFT 12 /* x86: a page is one 4 KiB block */

const volatile bool filter_tgids = false; /* only tgids in `followed` */
const volatile bool follow_forks = true;  /* add children of followed tgids */
const volatile __u64 cgroup_id = 0;       /* 0: any cgroup */
const volatile __u32 cgroup_level = 0;    /* depth of cgroup_id below the cgroup2 root */
const volatile __u64 min_size = 0;        /* files smaller than this are ignored */
const volatile __u32 self_tgid = 0;       /* the recorder itself, never traced */
const volatile __u64 wakeup_bytes = 0;    /* wake the reader only once this much is waiting (0: always) */
const volatile bool syscall_reads = false; /* reads from the syscalls (no filemap tracepoints) */
const volatile bool record_writes = false; /* writes too (sys_enter is attached for them) */
const volatile __u32 join_blocks = 1;     /* a thread's reads join into records of up to this many blocks */
volatile __u64 followed_gen = 0;          /* bumped by userspace each time it adds to `followed` */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the loader (--ring-size) */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LLMTRACE_NR_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LLMTRACE_MAX_TGIDS);
	__type(key, __u32);
	__type(value, __u8);
} followed SEC(".maps");

/* The read or write a thread is in: filemap_get_pages batches, or a syscall between entry and exit. */
struct inflight {
	__u64 inode_ptr;
	__u64 index, last_index; /* get_pages: the first batch's start and the read's end */
	__u64 syscr;
	__u64 pos;               /* syscall: byte offset at entry */
	__u64 followed_gen;      /* followed_gen + 1 when `followed` was last looked up for this thread */
	__u8 op;                 /* syscall: LLMCACHE_OP_READ or LLMCACHE_OP_WRITE */
	__u8 followed;           /* and its answer */
	struct llmcache_access run; /* reads joined and not sent yet (nr_blocks 0: none) */
};

/* filemap_get_pages and the joined reads: per thread, in task-local storage (no hashing). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inflight);
} task_reads SEC(".maps");

/* Between sys_enter and sys_exit, per thread id: writes, and reads without the filemap hooks. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LLMTRACE_MAX_THREADS);
	__type(key, __u64);
	__type(value, struct inflight);
} reads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LLMTRACE_MAX_FILES);
	__type(key, struct llmtrace_file_key);
	__type(value, __u8); /* enum llmtrace_file_state */
} named SEC(".maps");

/* The file this CPU named or found named last: most records are about the same file as the one before. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct llmtrace_file_key); /* pad: its enum llmtrace_file_state */
} last_named SEC(".maps");

/* Records this CPU sent since it last asked the ring how full it is. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unasked SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);

	if (v)
		(*v)++;
}

/*
 * Is tgid to be recorded? r, the thread's task-local state, caches whether tgid is followed until
 * userspace follows more processes: the task storage lookup is needed anyway, a hash lookup per read is not.
 * A new thread or child has no state yet and looks up (sched_process_fork added a followed parent's child).
 */
static __always_inline bool wanted_r(__u32 tgid, struct inflight *r)
{
	bool yes;

	if (tgid == self_tgid)
		return false;
	if (filter_tgids) {
		__u64 gen = followed_gen + 1;

		if (r && r->followed_gen == gen) {
			yes = r->followed;
		} else {
			yes = bpf_map_lookup_elem(&followed, &tgid);
			if (r) {
				r->followed_gen = gen;
				r->followed = yes;
			}
		}
		if (!yes)
			return false;
	}
	if (cgroup_id && bpf_get_current_ancestor_cgroup_id(cgroup_level) != cgroup_id)
		return false;
	return true;
}

static __always_inline bool wanted(__u32 tgid) { return wanted_r(tgid, NULL); }

/*
 * Waking the reader for every record costs more than the record (a context switch per read() on a small
 * machine): wake it when wakeup_bytes are waiting; it also polls on a timer. The ring is asked every 16th
 * record of a CPU only (a helper call less per record; the per-CPU array lookup is inlined).
 */
static __always_inline __u64 wakeup_flags(void)
{
	__u32 *n;

	if (!wakeup_bytes)
		return 0;
	if ((n = bpf_map_lookup_elem(&unasked, &(__u32){ 0 })) && (++*n & 15))
		return BPF_RB_NO_WAKEUP;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* The kernel's s_dev (major << 20 | minor) in userspace st_dev encoding (new_encode_dev). */
static __always_inline __u32 encode_dev(__u32 s_dev)
{
	__u32 major = s_dev >> 20, minor = s_dev & 0xfffff;

	return ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & ~0xffU) << 12);
}

/*
 * Name (dev, inode) unless it was named already. Returns its enum llmtrace_file_state, or 0 if the ring
 * buffer is full.
 */
static __always_inline __u32 name_file(struct inode *inode, __u32 dev, __u64 ino, __u32 tgid)
{
	struct llmtrace_file_key k = { .inode = ino, .dev = dev };
	struct llmtrace_file_key *last = bpf_map_lookup_elem(&last_named, &(__u32){ 0 });
	struct llmtrace_path_event *e;
	struct dentry *d, *parent;
	struct hlist_node *alias;
	__u8 *state, recorded = LLMTRACE_FILE_RECORDED;

	if (last && last->inode == ino && last->dev == dev)
		return last->pad;
	if ((state = bpf_map_lookup_elem(&named, &k))) {
		k.pad = *state;
		if (last)
			*last = k;
		return k.pad;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	__builtin_memset(&e->a, 0, sizeof(e->a));
	e->a.time_ns = bpf_ktime_get_ns();
	e->a.inode = ino;
	e->a.dev = dev;
	e->a.pid = tgid;
	e->a.op = LLMCACHE_OP_PATH;
	e->depth = 0;
	e->truncated = 1;
	alias = BPF_CORE_READ(inode, i_dentry.first);
	d = alias ? container_of(alias, struct dentry, d_u.d_alias) : NULL;
	for (int i = 0; i < LLMTRACE_PATH_DEPTH && d; i++) {
		parent = BPF_CORE_READ(d, d_parent);
		if (parent == d) { /* the file system's root: its name is "/" */
			e->truncated = 0;
			break;
		}
		bpf_probe_read_kernel_str(e->names[i], LLMTRACE_NAME_MAX, BPF_CORE_READ(d, d_name.name));
		e->depth = i + 1;
		d = parent;
	}
	bpf_ringbuf_submit(e, wakeup_flags());
	bpf_map_update_elem(&named, &k, &recorded, BPF_NOEXIST);
	k.pad = LLMTRACE_FILE_RECORDED;
	if (last)
		*last = k;
	return LLMTRACE_FILE_RECORDED;
}

/* What a record needs to know about an inode. */
struct facts {
	__u64 ino;
	__s64 size;
	__u32 s_dev;
	__u16 mode;
};

/* Send the reads a thread joined (a run ends, the thread exits, the recording stops). */
static __always_inline void send_run(struct inflight *r)
{
	if (!r->run.nr_blocks)
		return;
	if (bpf_ringbuf_output(&events, &r->run, sizeof(r->run), wakeup_flags()))
		count(LLMTRACE_CNT_LOST);
	r->run.nr_blocks = 0;
}

/*
 * Blocks [first, last] of inode were accessed by tgid: filter, clip to the end of the file, emit. With r,
 * the reading thread's state, a read that carries on the thread's run of reads of the file joins it while
 * the run stays under join_blocks: a reader of small sequential blocks then costs a ring buffer record per
 * join_blocks blocks, not per read. The run keeps its first read's time; it is sent when a read does not
 * join it, when the thread exits (thread_exit) and when the recording stops (flush_runs).
 */
static __always_inline void emit(struct inode *inode, const struct facts *f, __u64 first, __u64 last, __u8 op,
				 __u32 tgid, struct inflight *r)
{
	struct llmcache_access *a;
	__u32 dev, n;

	if ((f->mode & S_IFMT) != S_IFREG || f->size <= 0 || (__u64)f->size < min_size)
		return;
	if (last > (__u64)(f->size - 1) >> PAGE_SHIFT)
		last = (__u64)(f->size - 1) >> PAGE_SHIFT;
	if (first > last)
		return;
	dev = encode_dev(f->s_dev);
	n = last - first + 1;
	if (r && r->run.nr_blocks && r->run.inode == f->ino && r->run.dev == dev && r->run.op == op &&
	    r->run.first_block + r->run.nr_blocks == first && r->run.nr_blocks + n <= join_blocks) {
		r->run.nr_blocks += n;
		count(LLMTRACE_CNT_JOINED);
		return;
	}
	switch (name_file(inode, dev, f->ino, tgid)) {
	case LLMTRACE_FILE_RECORDED:
		break;
	case 0:
		count(LLMTRACE_CNT_LOST);
		return;
	default:
		return;
	}
	if (r) {
		send_run(r);
		if (n < join_blocks) {
			r->run = (struct llmcache_access){
				.time_ns = bpf_ktime_get_ns(), .inode = f->ino, .first_block = first, .pid = tgid,
				.dev = dev, .nr_blocks = n, .op = op,
			};
			return;
		}
	}
	a = bpf_ringbuf_reserve(&events, sizeof(*a), 0);
	if (!a) {
		count(LLMTRACE_CNT_LOST);
		return;
	}
	a->time_ns = bpf_ktime_get_ns();
	a->inode = f->ino;
	a->first_block = first;
	a->pid = tgid;
	a->dev = dev;
	a->nr_blocks = n;
	a->op = op;
	a->pad[0] = a->pad[1] = a->pad[2] = 0;
	bpf_ringbuf_submit(a, wakeup_flags());
}

/* inode from a tp_btf argument: a trusted BTF pointer, read with plain loads. */
static __always_inline void emit_btf(struct inode *inode, __u64 first, __u64 last, __u8 op, __u32 tgid,
				     struct inflight *r)
{
	struct facts f = {
		.ino = inode->i_ino, .size = inode->i_size, .s_dev = inode->i_sb->s_dev, .mode = inode->i_mode,
	};

	emit(inode, &f, first, last, op, tgid, r);
}

/* inode from a map or a probe read: read with probe reads. */
static __always_inline void emit_probe(struct inode *inode, __u64 first, __u64 last, __u8 op, __u32 tgid,
				       struct inflight *r)
{
	struct facts f = {
		.ino = BPF_CORE_READ(inode, i_ino),
		.size = BPF_CORE_READ(inode, i_size),
		.s_dev = BPF_CORE_READ(inode, i_sb, s_dev),
		.mode = BPF_CORE_READ(inode, i_mode),
	};

	if (inode)
		emit(inode, &f, first, last, op, tgid, r);
}

static __always_inline __u64 read_syscalls(struct task_struct *task)
{
	if (!bpf_core_field_exists(task->ioac))
		return 0;
	return task->ioac.syscr;
}

/* The file behind fd in the current task, or NULL. */
static __always_inline struct file *fd_file(int fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;

	if (fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

/* x86_64 system call numbers of the calls that read or write files at an offset. */
enum {
	NR_read = 0, NR_write = 1, NR_pread64 = 17, NR_pwrite64 = 18, NR_readv = 19, NR_writev = 20,
	NR_preadv = 295, NR_pwritev = 296, NR_preadv2 = 327, NR_pwritev2 = 328,
};

/*
 * filemap_get_pages() returns a batch of up-to-date folios that ends before one that is not without
 * reaching its tracepoint, so a read's first event can start after the read. The first page of the read
 * syscall the thread is in, from its user registers (no syscall tracepoint: attaching one puts every
 * system call of every task on the slow path): the pread offset, or for read() the file position, which
 * ksys_read() moves only once the read is over. index when the syscall is no read of this range.
 */
static __always_inline __u64 read_start(struct task_struct *task, struct inode *inode, __u64 index, __u64 last_index)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 count = 0;
	__s64 pos = -1;
	struct file *f;

	if (!regs)
		return index;
	switch (regs->orig_ax) {
	case NR_pread64:
		count = regs->dx;
		/* fall through */
	case NR_preadv: case NR_preadv2:
		pos = (__s64)regs->r10;
		break;
	case NR_read:
		count = regs->dx;
		break;
	case NR_readv:
		break;
	default:
		return index;
	}
	if (pos < 0) { /* read(), readv(), preadv2() at offset -1: the file position */
		if (!(f = fd_file(regs->di)) || BPF_CORE_READ(f, f_inode) != inode)
			return index;
		pos = BPF_CORE_READ(f, f_pos);
	}
	if ((__u64)pos >> PAGE_SHIFT >= index || (count && (pos + count - 1) >> PAGE_SHIFT != last_index))
		return index;
	return (__u64)pos >> PAGE_SHIFT;
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(filemap_get_pages, struct address_space *mapping, unsigned long index, unsigned long last_index)
{
	/* The task once, and fields from it: every helper call costs a call and a return (mitigations). */
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid;
	struct inode *inode = mapping->host;
	struct inflight *r;
	__u64 syscr;

	r = bpf_task_storage_get(&task_reads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wanted_r(tgid, r))
		return 0;
	syscr = read_syscalls(task);
	if (r) {
		if (r->inode_ptr == (__u64)inode && r->last_index == last_index && r->syscr == syscr &&
		    index > r->index) {
			r->index = index;
			count(LLMTRACE_CNT_MERGED);
			return 0;
		}
		r->inode_ptr = (__u64)inode;
		r->index = index;
		r->last_index = last_index;
		r->syscr = syscr;
	}
	emit_btf(inode, index ? read_start(task, inode, index, last_index) : 0, last_index, LLMCACHE_OP_READ, tgid, r);
	return 0;
}

/* xarray entry encoding (include/linux/xarray.h): internal entries end in binary 10. */
static __always_inline bool xa_internal(__u64 e) { return (e & 3) == 2; }
static __always_inline bool xa_node(__u64 e) { return xa_internal(e) && e > 4096; }
static __always_inline bool xa_sibling(__u64 e) { return xa_internal(e) && (e >> 2) < 62; }

/*
 * The page cache folio holding page `index` of mapping, or NULL: xa_load() without the RCU lock, every
 * read a probe read, so a racing truncation can only make the answer stale.
 */
static __always_inline struct folio *cache_folio(struct address_space *mapping, __u64 index)
{
	__u64 e = (__u64)BPF_CORE_READ(mapping, i_pages.xa_head);

	if (!xa_node(e))
		return index == 0 && e && !(e & 3) ? (struct folio *)e : NULL;
	/* Unrolled: the 6.1 verifier rejects the loop the compiler makes of this (a fall-through back-edge). */
#pragma unroll
	for (int depth = 0; depth < 8 && xa_node(e); depth++) {
		struct xa_node *node = (struct xa_node *)(e - 2);
		__u32 off = (index >> BPF_CORE_READ(node, shift)) & 63;

		bpf_probe_read_kernel(&e, sizeof(e), &node->slots[off]);
		if (xa_sibling(e)) {
			off = (e >> 2) & 63;
			bpf_probe_read_kernel(&e, sizeof(e), &node->slots[off]);
		}
	}
	return e && !(e & 3) ? (struct folio *)e : NULL;
}

/* Widen [*first, *last] to the folios holding its ends: fault-around maps whole large folios (6.18). */
/* Older kernels (the 6.1 guest) keep a large folio's order in a field of its own. */
struct folio___order_field {
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* Pages in a folio: 1, or 2^order for a large folio (PG_head set; the order in the low byte of _flags_1). */
static __always_inline __u64 folio_pages(struct folio *f)
{
	int head = bpf_core_enum_value(enum pageflags, PG_head);
	__u64 flags = 0, order;

	/*
	 * The page flags are a folio's first word on every kernel, but their type changed (unsigned long,
	 * then memdesc_flags_t in 6.18), which no single CO-RE field relocation matches.
	 */
	bpf_probe_read_kernel(&flags, sizeof(flags), f);
	if (!(flags & (1ULL << head)))
		return 1;
	if (bpf_core_field_exists(struct folio___order_field, _folio_order))
		order = BPF_CORE_READ((struct folio___order_field *)f, _folio_order);
	else
		order = BPF_CORE_READ(f, _flags_1) & 0xff;
	return 1ULL << (order & 63);
}

static __always_inline void widen_to_folios(struct address_space *mapping, __u64 *first, __u64 *last)
{
	__u64 ends[2] = { *first, *last };

#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct folio *f = cache_folio(mapping, ends[i]);
		__u64 start, nr;

		if (!f)
			continue;
		nr = folio_pages(f);
		start = BPF_CORE_READ(f, index);
		if (start > ends[i] || start + nr <= ends[i])
			continue; /* stale: the folio moved */
		if (start < *first)
			*first = start;
		if (start + nr - 1 > *last)
			*last = start + nr - 1;
	}
}

SEC("tp_btf/mm_filemap_map_pages")
int BPF_PROG(filemap_map_pages, struct address_space *mapping, unsigned long start, unsigned long end)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 first = start, last = end;

	if (!wanted(tgid))
		return 0;
	widen_to_folios(mapping, &first, &last);
	emit_btf(mapping->host, first, last, LLMCACHE_OP_MMAP_FAULT, tgid, NULL);
	return 0;
}

SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(filemap_fault, struct address_space *mapping, unsigned long index)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (wanted(tgid))
		emit_btf(mapping->host, index, index, LLMCACHE_OP_MMAP_FAULT, tgid, NULL);
	return 0;
}

/*
 * Kernels without those two tracepoints (6.1): kprobes on the functions they sit in, with the same records.
 * filemap_map_pages(vmf, start_pgoff, end_pgoff) maps the cached pages of the fault-around window; the
 * tracepoint fires at its end once something was mapped, the kprobe at its start: it reports the window
 * the kernel is about to map (where nothing is cached, the fault that follows reads it in and faults
 * again). filemap_fault(vmf) is the fault itself. Every field is a probe read (CO-RE).
 */
static __always_inline struct address_space *vmf_mapping(struct vm_fault *vmf)
{
	return BPF_CORE_READ(vmf, vma, vm_file, f_mapping);
}

SEC("kprobe/filemap_map_pages")
int BPF_KPROBE(kp_filemap_map_pages, struct vm_fault *vmf, unsigned long start, unsigned long end)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct address_space *mapping;
	__u64 first = start, last = end;

	if (!wanted(tgid) || !(mapping = vmf_mapping(vmf)))
		return 0;
	widen_to_folios(mapping, &first, &last);
	emit_probe(BPF_CORE_READ(mapping, host), first, last, LLMCACHE_OP_MMAP_FAULT, tgid, NULL);
	return 0;
}

SEC("kprobe/filemap_fault")
int BPF_KPROBE(kp_filemap_fault, struct vm_fault *vmf)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct address_space *mapping;
	__u64 index;

	if (!wanted(tgid) || !(mapping = vmf_mapping(vmf)))
		return 0;
	index = BPF_CORE_READ(vmf, pgoff);
	emit_probe(BPF_CORE_READ(mapping, host), index, index, LLMCACHE_OP_MMAP_FAULT, tgid, NULL);
	return 0;
}

/*
 * Pages of the recorded files that enter or leave the page cache: reads from storage, and evictions. A
 * file counts once it is named (kswapd evicts, kworkers read ahead), or before that when a followed
 * process does it (its first read's readahead comes before the read's own event).
 */
static __always_inline void cache_change(struct folio *folio, __u32 which)
{
	struct inode *host = BPF_CORE_READ(folio, mapping, host);
	struct llmtrace_file_key k = {
		.inode = BPF_CORE_READ(host, i_ino), .dev = encode_dev(BPF_CORE_READ(host, i_sb, s_dev)),
	};
	__u8 *state = bpf_map_lookup_elem(&named, &k);
	__u64 *v;

	if (!host || (state && *state != LLMTRACE_FILE_RECORDED))
		return;
	if (!state && (!wanted(bpf_get_current_pid_tgid() >> 32) ||
		       (BPF_CORE_READ(host, i_mode) & S_IFMT) != S_IFREG || BPF_CORE_READ(host, i_size) < (__s64)min_size))
		return;
	if ((v = bpf_map_lookup_elem(&counters, &which)))
		*v += folio_pages(folio);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(filemap_add, struct folio *folio)
{
	cache_change(folio, LLMTRACE_CNT_INSERTED);
	return 0;
}

SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(filemap_delete, struct folio *folio)
{
	cache_change(folio, LLMTRACE_CNT_EVICTED);
	return 0;
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (!follow_forks || ptgid == ctgid || !bpf_map_lookup_elem(&followed, &ptgid))
		return 0;
	bpf_map_update_elem(&followed, &ctgid, &one, BPF_ANY);
	return 0;
}

#define O_APPEND 02000

/* The regular file behind fd, and the byte offset an access at pos (-1: the file position) starts at. */
static __always_inline struct inode *rw_file(int fd, __s64 pos, __u8 op, __u64 *start)
{
	struct inode *inode;
	struct file *f;

	if (!(f = fd_file(fd)))
		return NULL;
	inode = BPF_CORE_READ(f, f_inode);
	if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFREG)
		return NULL;
	if (pos >= 0)
		*start = pos;
	else if (op == LLMCACHE_OP_WRITE && (BPF_CORE_READ(f, f_flags) & O_APPEND))
		*start = BPF_CORE_READ(inode, i_size);
	else
		*start = BPF_CORE_READ(f, f_pos);
	return inode;
}

/* A read (syscall mode) or write starts: remember the file and the offset, if it is a regular file. */
static __always_inline void rw_start(int fd, __s64 pos, __u8 op)
{
	__u64 tid = bpf_get_current_pid_tgid(), start = 0;
	struct inode *inode = rw_file(fd, pos, op, &start);

	if (!inode)
		return;
	struct inflight r = { .inode_ptr = (__u64)inode, .pos = start, .op = op };
	bpf_map_update_elem(&reads, &tid, &r, BPF_ANY);
}

struct iov_sum {
	const struct iovec *iov;
	__u64 bytes;
};

static long add_iov(__u64 i, void *data)
{
	struct iov_sum *s = data;
	__u64 len = 0;

	bpf_probe_read_user(&len, sizeof(len), &s->iov[i].iov_len);
	s->bytes += len;
	return 0;
}

/*
 * With the filemap hooks sys_exit is not attached, because every system call pays for it: a write is
 * recorded at entry, with the bytes it asks for (a regular file takes them all unless the write fails).
 */
static __always_inline void write_at_entry(long id, struct pt_regs *regs, __s64 pos, __u32 tgid)
{
	__u64 start = 0, bytes = regs->dx;
	struct inode *inode = rw_file(regs->di, pos, LLMCACHE_OP_WRITE, &start);

	if (!inode)
		return;
	if (id == NR_writev || id == NR_pwritev || id == NR_pwritev2) {
		struct iov_sum sum = { .iov = (const struct iovec *)regs->si };

		bpf_loop(bytes < 1024 ? bytes : 1024, add_iov, &sum, 0);
		bytes = sum.bytes;
	}
	if (!bytes)
		return;
	struct facts f = {
		.ino = BPF_CORE_READ(inode, i_ino),
		.size = BPF_CORE_READ(inode, i_size),
		.s_dev = BPF_CORE_READ(inode, i_sb, s_dev),
		.mode = BPF_CORE_READ(inode, i_mode),
	};
	if ((__s64)(start + bytes) > f.size) /* the size the file has once written */
		f.size = start + bytes;
	emit(inode, &f, start >> PAGE_SHIFT, (start + bytes - 1) >> PAGE_SHIFT, LLMCACHE_OP_WRITE, tgid, NULL);
}

/*
 * One program for every system call entry (a program per syscall tracepoint makes start-up and, above
 * all, detaching slow: each detach waits for a grace period). x86_64 arguments: di, si, dx, r10, r8.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u8 op = LLMCACHE_OP_READ;
	__s64 pos = -1;

	switch (id) {
	case NR_pwrite64: case NR_pwritev: case NR_pwritev2:
		op = LLMCACHE_OP_WRITE;
		/* fall through */
	case NR_pread64: case NR_preadv: case NR_preadv2:
		pos = (__s64)regs->r10;
		break;
	case NR_write: case NR_writev:
		op = LLMCACHE_OP_WRITE;
		break;
	case NR_read: case NR_readv:
		break;
	default:
		return 0;
	}
	if (op == LLMCACHE_OP_READ ? !syscall_reads : !record_writes) /* filemap mode: attached for writes only */
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!wanted(tgid))
		return 0;
	if (!syscall_reads)
		write_at_entry(id, regs, pos, tgid);
	else
		rw_start(regs->di, pos, op);
	return 0;
}

/* ...and returns ret bytes (only in the syscall mode: see write_at_entry). */
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u64 tid = bpf_get_current_pid_tgid();
	struct inflight *r;

	switch (regs->orig_ax) {
	case NR_write: case NR_writev: case NR_pwrite64: case NR_pwritev: case NR_pwritev2:
		break;
	case NR_read: case NR_readv: case NR_pread64: case NR_preadv: case NR_preadv2:
		if (syscall_reads)
			break;
		return 0;
	default:
		return 0;
	}
	if (!(r = bpf_map_lookup_elem(&reads, &tid)))
		return 0;
	if (ret > 0) {
		/* Reads join in the thread's task storage, as with the filemap hooks; writes are sent one by one. */
		struct inflight *t = r->op != LLMCACHE_OP_READ || join_blocks <= 1 ? NULL :
			bpf_task_storage_get(&task_reads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

		emit_probe((struct inode *)r->inode_ptr, r->pos >> 12, (r->pos + ret - 1) >> 12, r->op, tid >> 32, t);
	}
	bpf_map_delete_elem(&reads, &tid);
	return 0;
}

struct fault_ctx {
	__u64 address;
	struct inode *inode;
	__u64 block;
};

static long fault_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct fault_ctx *c = data;
	struct file *f = vma->vm_file;

	if (!f)
		return 0;
	c->inode = BPF_CORE_READ(f, f_inode);
	c->block = vma->vm_pgoff + ((c->address - vma->vm_start) >> PAGE_SHIFT);
	return 0;
}

/* The format of exceptions:page_fault_user (its trace_event_raw type is not in every kernel's BTF). */
struct page_fault_args {
	__u64 common;
	__u64 address, ip, error_code;
};

SEC("tp/exceptions/page_fault_user")
int page_fault_user(struct page_fault_args *ctx)
{
	struct fault_ctx c = { .address = ctx->address };

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	bpf_find_vma((struct task_struct *)bpf_get_current_task_btf(), c.address, fault_vma, &c, 0);
	if (c.inode)
		emit_probe(c.inode, c.block, c.block, LLMCACHE_OP_MMAP_FAULT, bpf_get_current_pid_tgid() >> 32, NULL);
	return 0;
}

/* A thread exits: send its joined reads before its task storage goes. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(thread_exit, struct task_struct *task)
{
	struct inflight *r = bpf_task_storage_get(&task_reads, task, 0, 0);

	if (r)
		send_run(r);
	return 0;
}

/* The recording stops: userspace detaches the other programs, then runs this over every task once. */
SEC("iter/task")
int flush_runs(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct inflight *r;

	if (!task)
		return 0;
	r = bpf_task_storage_get(&task_reads, task, 0, 0);
	if (r)
		send_run(r);
	return 0;
}
