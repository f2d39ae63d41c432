/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * llmcache.ko internals shared by its files: the registered-file set, the single policy-core instance
 * fed by the hooks, the tunables, and the entry points of the device, sysfs and hook parts.
 */
#ifndef LLMCACHE_KMOD_H
#define LLMCACHE_KMOD_H

#include <linux/fs.h>
#include <linux/jump_label.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/sched/clock.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include "libllmcache/core/core.h"
#include "libllmcache/core/plan.h"

#define LLC_TAIL_SPANS 4 /* runs of LOOP accesses a file keeps for tail.c between its ticks */
#define LLC_PLAN_MAX 256 /* ranges of a pin plan (pin.c) */

/* A registered file: found by its mapping from the hooks (RCU hash), held by a file reference. */
/* An mmap engine's stream read ahead of it (stream.c): set under llc_reg_mutex and llc.lock, moved under llc.lock. */
struct llc_stream {
	struct mem_cgroup *memcg; /* the engine's cgroup, a css reference; NULL: not read ahead */
	u64 lo, hi;               /* its loop [lo, hi) */
	u64 head;                 /* pinned: [lo, lo + head) */
	u64 window;               /* blocks read ahead of the engine */
	u64 lag;                  /* blocks behind its position that its threads may still use */
	u64 position, asked_to;   /* llc_plan_position, llc_plan_prefetch */
	u64 dropped_to;           /* llc_plan_passed */
};

struct llc_file {
	struct hlist_node node;         /* llc_files_hash, RCU */
	struct list_head list;          /* llc_files_list, under llc_reg_mutex */
	struct kobject kobj;            /* /sys/kernel/llmcache/files/<id> */
	struct rcu_head rcu;
	struct file *file;
	struct address_space *mapping;
	u64 id;
	/* Written under llc.lock by the hooks. */
	u64 accesses;
	u64 class_blocks[LLMCACHE_NR_CLASSES];
	u64 added;
	u64 removed;                    /* under llc.hold_lock */
	pgoff_t req_first, req_last;    /* last read request of mm_filemap_get_pages; a hint, no lock */
	u64 pinned;                     /* pins held, under llc.hold_lock */
	struct xarray pins;             /* page index -> the folio whose reference the module holds */
	bool planned;                   /* the pin plan covers this file: new pages kick the worker */
	bool head;                      /* the plan pins its head (llc_plan_heads); under llc_reg_mutex */
	bool head_asked;                /* its first page while mapped kicked the worker; under llc.lock */
	u32 flags;                      /* LLMCACHE_FILE_*, written under llc.lock */
	u64 pin_limit;                  /* bytes this file may pin, 0: no limit; under llc.lock */
	struct kobject *loops_kobj;     /* files/<id>/loops */
	struct list_head loops;         /* its struct llc_loop_obj, under llc_reg_mutex */
	pgoff_t todo_first, todo_last;  /* pages a planned file gained since the pin worker looked, llc.lock */
	pgoff_t pin_first, pin_last;    /* the pin worker's copy of them */
	struct xarray hot;              /* page index -> the folio held as HOT protection */
	u64 hot_protected;              /* HOT blocks protected, under llc.hold_lock */
	u64 seq_undropped;              /* SEQ accesses since its scans were last dropped, under llc.lock */
	u64 seq_last_ns;                /* time of its last SEQ access, under llc.lock */
	struct llc_span tail[LLC_TAIL_SPANS];      /* LOOP accesses since tail.c's last tick, llc.lock */
	u32 nr_tail;
	struct llc_span tail_aged[LLC_TAIL_SPANS]; /* those of the tick before, under llc_reg_mutex */
	u32 nr_tail_aged;
	struct llc_stream stream;
};

struct llc_state {
	/*
	 * lock: the core and the counters the access hooks write. Never taken in interrupt context, nor
	 * under a lock that interrupt context takes (the page cache's i_pages), so the read hook can take
	 * it without turning interrupts off. hold_lock: what the page cache's deletion hook writes under i_pages, the held
	 * pages' counts (files' pinned, hot_protected and removed, stats PINNED and HOT_PROTECTED);
	 * interrupts off, and nothing is taken under it. Readers elsewhere read those counts with READ_ONCE.
	 */
	spinlock_t lock;
	spinlock_t hold_lock;
	struct llc_core *core;
	bool enabled;
	int hook_mode;                  /* enum llmcache_hook_mode */
	u64 pin_budget, hot_reserve;    /* bytes */
	u64 bw;                         /* bytes per second, 0: not known */
	u64 t_ns;                       /* allowed fetch delay per loop iteration */
	u64 seq_drop_ns;                /* a file's scans are dropped this long after its last SEQ access */
	u64 seq_undropped;              /* sum of the files' seq_undropped, under lock */
	u64 hot_idle_limit;             /* llc_hot_idle_limit() at the last hot.c kick, under lock */
	u64 hot_oldest_vt;              /* last access of the oldest block hot.c protects, U64_MAX: none; under lock */
	/*
	 * The pins given up to pages faulted again within two periods of the longest-period loop holding
	 * pins (llc_plan_reuse_room), that period and those loops (set by the pin worker), and the room the
	 * worker last planned with: the access hook kicks it when the room moves, as faults come or their
	 * windows pass; under lock.
	 */
	struct llc_reuse_room reuse_room;
	u64 reuse_period_vt;
	u64 reuse_room_planned;         /* the room the pin worker last planned with */
	struct llc_pin_range reuse_loops[LLC_PLAN_MAX]; /* the loops the pins hold (llc_plan_pinned_loops) */
	u32 nr_reuse_loops;
	u64 stats[LLMCACHE_NR_STATS];   /* the module's own counters (hits, misses, drops, pins) */
	unsigned int nr_files;          /* under llc_reg_mutex */
};

extern struct llc_state llc;
extern struct mutex llc_reg_mutex;
extern struct list_head llc_files_list;
DECLARE_STATIC_KEY_FALSE(llc_active);

/* Hooks: feed accesses and page-cache changes of registered files into the core. */
enum llc_access_kind {
	LLC_ACCESS_READ,    /* a read's pages */
	LLC_ACCESS_REQUEST, /* what remains of a read request (mm_filemap_get_pages), batch by batch */
	LLC_ACCESS_MAPPED,  /* pages fault-around mapped (mm_filemap_map_pages, once it mapped any) */
	LLC_ACCESS_AROUND,  /* a fault-around window about to be mapped (a kprobe at filemap_map_pages' entry) */
	LLC_ACCESS_FAULT,   /* the page of an mmap fault (it was not mapped: never, or reclaim took it) */
};
void llc_feed_access(struct address_space *mapping, pgoff_t first, pgoff_t last, enum llc_access_kind kind);
void llc_feed_cache(struct folio *folio, bool added);

/* Registration (callers hold llc_reg_mutex, but for llc_file_new and llc_file_free). */
struct llc_file *llc_file_by_mapping(struct address_space *mapping);
struct llc_file *llc_file_find_rcu(struct address_space *mapping);
struct llc_file *llc_file_new(struct file *file, gfp_t gfp); /* without the mutex */
int llc_file_link(struct llc_file **fp, u64 *id);
void llc_file_free(struct llc_file *f);
int llc_register(struct file *file, u64 *id);
void llc_unregister(struct llc_file *f);
void llc_update_active(void);
void llc_snapshot(u64 stats[LLMCACHE_NR_STATS], u64 class_seqs[LLMCACHE_NR_CLASSES]);

/* Pinning (pin.c). */
int llc_pin_init(void);
void llc_pin_exit(void);
void llc_pin_kick(void);
void llc_pin_release(void);
void llc_unpin_all(struct llc_file *f);
void llc_pin_removed(struct llc_file *f, struct folio *folio);
bool llc_hold(struct llc_file *f, bool hot, pgoff_t index);
bool llc_unhold(struct llc_file *f, bool hot, pgoff_t index);
unsigned long llc_pin_shrink(unsigned long nr);
unsigned long llc_pin_trim(void);
struct llc_file *llc_file_by_id(u64 id);

/* Pins under a memory cgroup's pressure (memcg.c). */
struct mem_cgroup;
int llc_memcg_init(void);
void llc_memcg_exit(void);
void llc_memcg_forget(void);
bool llc_memcg_plan_begin(void);
void llc_memcg_released(unsigned long n);
/* What the planner needs to know of the registered files one memory cgroup's limit binds. */
struct llc_memcg_files {
	u64 mapped_blocks; /* the size of those some process maps */
	u64 readahead;     /* the largest read-ahead of their devices, in blocks */
	bool mapped;       /* a process maps one of them */
};
u64 llc_memcg_allowance(struct mem_cgroup *memcg, u64 limit, const struct llc_memcg_files *files);
void llc_memcg_granted(const struct mem_cgroup *memcg, u64 blocks);
void llc_memcg_range(const struct mem_cgroup *memcg, struct llc_file *f, pgoff_t first, u64 count);
u64 llc_memcg_window(const struct mem_cgroup *memcg);
struct mem_cgroup *llc_limiting_memcg(struct llc_file *f, pgoff_t first, u64 count, u64 *limit);

/* HOT protection (hot.c), SEQ invalidation (seq.c), the shrinker (shrink.c). */
void llc_hot_kick(void);
void llc_hot_release(void);
unsigned long llc_hot_shrink(unsigned long nr);
void llc_hot_exit(void);
void llc_seq_kick(void);
unsigned long llc_seq_shrink(unsigned long nr);
void llc_seq_exit(void);
int llc_shrink_init(void);
void llc_shrink_exit(void);
u64 llc_cache_room(void);

/* Reading an mmap engine's stream ahead of it (stream.c). */
struct llc_pin_range;
void llc_stream_plan(const struct llc_pin_range *plan, u32 n);
void llc_stream_forget(struct llc_file *f);
bool llc_stream_note(struct llc_file *f, u64 last);
void llc_stream_kick(void);
void llc_stream_exit(void);

/* Dropping the passed unpinned blocks of loops that cannot fit (tail.c). */
bool llc_tail_note(struct llc_file *f, pgoff_t first, pgoff_t last);
void llc_tail_kick(void);
void llc_tail_exit(void);

/*
 * The clock of the hooks and of what compares with their times (loop periods, the miss rate, the SEQ
 * drop delay): local_clock(), the scheduler's and the tracers' clock, which reads the TSC. ktime_get_ns()
 * reads the clocksource, which can be an emulated HPET (Debian's 6.1 under qemu, where that read was
 * 60% of the read hook's time) or the ACPI PM timer. Two CPUs may disagree by up to a tick, so every
 * interval taken from it is clamped at 0.
 */
static inline u64 llc_clock_ns(void)
{
	return local_clock();
}

/* Per-loop sizing (loops.c) and automatic registration (auto.c). */
void llc_bw_sample(u64 blocks, u64 now_ns);
long llc_loops_ioctl(void __user *arg);
void llc_loops_kick(void);
void llc_loops_file_del(struct llc_file *f);
void llc_loops_exit(void);
extern const struct attribute_group llc_sizing_group;
long llc_auto_ioctl(void __user *arg);
void llc_auto_exit(void);
extern const struct attribute_group llc_auto_group;

int llc_hooks_init(const char *want);
void llc_hooks_exit(void);
int llc_dev_init(void);
void llc_dev_exit(void);
int llc_sysfs_init(void);
struct kobject *llc_sysfs_root(void);
void llc_sysfs_exit(void);
int llc_sysfs_file_add(struct llc_file *f);
extern const struct kobj_type llc_file_ktype;

#endif /* LLMCACHE_KMOD_H */
