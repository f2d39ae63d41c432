// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * llmcache.ko: the policy core of libllmcache/core in the kernel. Accesses to registered files, seen by
 * the filemap tracepoints (or kprobes where the kernel lacks them), are classified into SEQ, LOOP and
 * HOT block sequences by one core instance. This file holds the state, the registered-file set and the
 * feed from the hooks into the core; dev.c, sysfs.c and hooks.c are the interfaces around it.
 *
 * Cost for files nobody registered: a static branch while nothing is registered, else one RCU hash
 * lookup of the mapping pointer.
 */
#include <linux/file.h>
#include <linux/hashtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include "internal.h"
#include "kv_stats.h"

#define LLC_MAX_EVENT_BLOCKS 4096 /* blocks one event may feed; the rest count as dropped */

static char *hooks = "auto";
module_param(hooks, charp, 0444);
MODULE_PARM_DESC(hooks, "access hooks: auto, tracepoint or kprobe");

struct llc_state llc = {
	.lock = __SPIN_LOCK_UNLOCKED(llc.lock),
	.hold_lock = __SPIN_LOCK_UNLOCKED(llc.hold_lock),
	.enabled = true,
	.t_ns = 100 * NSEC_PER_MSEC,
	.seq_drop_ns = NSEC_PER_SEC,
	.hot_oldest_vt = U64_MAX,
};
DEFINE_MUTEX(llc_reg_mutex);
LIST_HEAD(llc_files_list);
DEFINE_STATIC_KEY_FALSE(llc_active);
static DEFINE_HASHTABLE(llc_files_hash, 8);
static u64 llc_next_id = 1;

static struct llc_file *llc_find_rcu(struct address_space *mapping)
{
	struct llc_file *f;

	hash_for_each_possible_rcu(llc_files_hash, f, node, (unsigned long)mapping)
		if (f->mapping == mapping)
			return f;
	return NULL;
}

/* The registered file of mapping, or NULL; caller holds rcu_read_lock(). */
struct llc_file *llc_file_find_rcu(struct address_space *mapping)
{
	return llc_find_rcu(mapping);
}

/*
 * mm_filemap_get_pages fires once per batch of a read with [current position, end of request]: an event
 * with the end of the file's previous request and a start inside it continues that request and adds
 * nothing. Checked before the clock read and the lock, so that a request pays them once and not at every
 * batch (a 128 KiB read of 4 KiB folios is two batches). The two words are a hint shared by the file's
 * readers, read and written without llc.lock: two threads reading one file at once can at worst make
 * a batch count once more or once less, as their interleaved requests could with the lock.
 */
static bool llc_request_continues(struct llc_file *f, pgoff_t first, pgoff_t last)
{
	pgoff_t req_first = READ_ONCE(f->req_first), req_last = READ_ONCE(f->req_last);

	WRITE_ONCE(f->req_first, first);
	WRITE_ONCE(f->req_last, last);
	return last == req_last && first > req_first && first <= req_last;
}

/* Whether the oldest block hot.c protects has been idle past the HOT limit. Caller holds llc.lock. */
static bool llc_hot_oldest_idle(u64 idle_limit)
{
	return idle_limit && llc.hot_oldest_vt != U64_MAX && llc_vtime(llc.core) - llc.hot_oldest_vt > idle_limit;
}

/*
 * One access to pages [first, last] of mapping.
 * - LLC_ACCESS_REQUEST: the range is what remains of a read request; see llc_request_continues.
 * - LLC_ACCESS_MAPPED, LLC_ACCESS_AROUND, LLC_ACCESS_FAULT: a mapping's pages. Their SEQ blocks are not
 *   left to seq.c: a page stays mapped and is re-read without a fault, so a loop over a mapped file
 *   looks like one scan, and dropping it once its mappings go would make the engine's next start read
 *   its weights from storage again. LLC_ACCESS_AROUND's window, seen before anything is mapped, is not
 *   written into the core's recent-access table (llc_access_mapped): the fault that follows in it
 *   measures its distance from its page's last fault or read.
 * - LLC_ACCESS_FAULT: a fault's page that is not a loop's nor in one the pins hold, and was last accessed
 *   within two periods of the longest-period loop holding pins, takes one pin of that loop
 *   (llc_plan_reuse_room): a page of the engine's code that reclaim took and the engine wants again
 *   within a token.
 */
void llc_feed_access(struct address_space *mapping, pgoff_t first, pgoff_t last, enum llc_access_kind kind)
{
	const unsigned int shift = PAGE_SHIFT - LLMCACHE_BLOCK_SHIFT;
	struct llc_file *f;
	u64 b, n, req, now, idle_limit, seq = 0, loop = 0, reused = 0;
	bool kick = false, hot_kick = false, tail = false, stream = false, hot;

	if (!static_branch_unlikely(&llc_active) || last < first)
		return;
	rcu_read_lock();
	f = llc_find_rcu(mapping);
	if (f && !(kind == LLC_ACCESS_REQUEST && llc_request_continues(f, first, last))) {
		b = (u64)first << shift;
		n = (u64)(last - first + 1) << shift;
		now = llc_clock_ns();
		hot = READ_ONCE(llc.hot_reserve) && !(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_PROTECT);
		spin_lock(&llc.lock); /* interrupts stay on: see struct llc_state */
		if (n > LLC_MAX_EVENT_BLOCKS) {
			llc.stats[LLMCACHE_STAT_EVENTS_DROPPED] += n - LLC_MAX_EVENT_BLOCKS;
			n = LLC_MAX_EVENT_BLOCKS;
		}
		req = n;
		while (n) {
			/* The range is one access of req blocks: a window faulted again is no loop (core.h). */
			struct llc_verdict v = kind == LLC_ACCESS_AROUND ? llc_access_mapped(llc.core, f->id, b, req, now) :
									    llc_access_req(llc.core, f->id, b, req, now);
			/* The request's next blocks that only extend v's sequence go at once. */
			u64 k = 1 + llc_access_extend(llc.core, f->id, b + 1, n - 1, v.seq);

			f->accesses += k;
			f->class_blocks[v.cls] += k;
			kick |= v.event == LLC_EV_ITERATION || v.event == LLC_EV_TO_LOOP;
			seq += v.cls == LLMCACHE_CLASS_SEQ ? k : 0;
			loop += v.cls == LLMCACHE_CLASS_LOOP ? k : 0;
			/* An unprotected HOT block (never extended at once): the protected set may change. */
			hot_kick |= hot && v.cls == LLMCACHE_CLASS_HOT && !xa_load(&f->hot, b);
			reused += kind == LLC_ACCESS_FAULT && llc_plan_reuse_counts(&v, llc.reuse_period_vt, llc.reuse_loops,
										    llc.nr_reuse_loops, f->id, b);
			n -= k;
			b += k;
		}
		if (reused || llc.reuse_room_planned)
			kick |= llc_plan_reuse_room(&llc.reuse_room, llc_vtime(llc.core), llc.reuse_period_vt, reused) !=
				llc.reuse_room_planned;
		/*
		 * A new HOT idleness limit (every LLC_AGING_INTERVAL at most), or the oldest protected block
		 * idle past it: the protected set may change.
		 */
		idle_limit = llc_hot_idle_limit(llc.core);
		if (READ_ONCE(llc.hot_reserve) &&
		    (idle_limit != llc.hot_idle_limit || llc_hot_oldest_idle(idle_limit))) {
			llc.hot_idle_limit = idle_limit;
			hot_kick = true;
		}
		if (seq && (kind == LLC_ACCESS_READ || kind == LLC_ACCESS_REQUEST) &&
		    !(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_DROP)) {
			f->seq_undropped += seq; /* resident SEQ blocks at most, for seq.c and the shrinker */
			llc.seq_undropped += seq;
			f->seq_last_ns = now;
		} else {
			seq = 0;
		}
		if (loop && !(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_DROP))
			tail = llc_tail_note(f, first, last);
		if (loop || READ_ONCE(f->head)) /* a head file is streamed from its first pass */
			stream = llc_stream_note(f, b - 1);
		spin_unlock(&llc.lock);
	}
	rcu_read_unlock();
	if (kick && READ_ONCE(llc.pin_budget))
		llc_pin_kick();
	if (seq)
		llc_seq_kick();
	if (hot_kick)
		llc_hot_kick();
	if (tail)
		llc_tail_kick();
	if (stream)
		llc_stream_kick();
}

void llc_feed_cache(struct folio *folio, bool added)
{
	u64 blocks = (u64)folio_nr_pages(folio) << (PAGE_SHIFT - LLMCACHE_BLOCK_SHIFT);
	struct llc_file *f;
	unsigned long flags;
	bool kick = false;

	if (!static_branch_unlikely(&llc_active))
		return;
	rcu_read_lock();
	f = llc_find_rcu(READ_ONCE(folio->mapping));
	if (f) {
		if (added) { /* after the page cache's lock was released */
			spin_lock_irqsave(&llc.lock, flags);
			f->added += blocks;
			llc.stats[LLMCACHE_STAT_MISSES] += blocks;
			llc_bw_sample(blocks, llc_clock_ns());
			kick = READ_ONCE(f->planned);
			/* A mapped file's first page: the plan may pin its head from the first pass (pin.c). */
			if (!kick && !f->head_asked && mapping_mapped(f->mapping))
				kick = f->head_asked = true;
			if (kick) { /* the pin worker looks at these pages next */
				f->todo_first = min(f->todo_first, folio->index);
				f->todo_last = max(f->todo_last, folio->index + folio_nr_pages(folio) - 1);
			}
			spin_unlock_irqrestore(&llc.lock, flags);
		} else { /* under the page cache's i_pages lock: not llc.lock, see struct llc_state */
			spin_lock_irqsave(&llc.hold_lock, flags);
			f->removed += blocks;
			llc_pin_removed(f, folio);
			spin_unlock_irqrestore(&llc.hold_lock, flags);
		}
	}
	rcu_read_unlock();
	if (kick)
		llc_pin_kick();
}

/* Hooks run only while something is registered and the module is enabled. */
void llc_update_active(void)
{
	lockdep_assert_held(&llc_reg_mutex);
	if (READ_ONCE(llc.enabled) && llc.nr_files)
		static_branch_enable(&llc_active);
	else
		static_branch_disable(&llc_active);
}

struct llc_file *llc_file_by_mapping(struct address_space *mapping)
{
	struct llc_file *f;

	lockdep_assert_held(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list)
		if (f->mapping == mapping)
			return f;
	return NULL;
}

/*
 * Registration in two steps so that llc_reg_mutex is not held across the allocation: llc_file_new
 * allocates and initialises the state (taking its own reference to file), llc_file_link checks for a
 * duplicate and links it under the mutex; on an error the caller frees it with llc_file_free.
 */
struct llc_file *llc_file_new(struct file *file, gfp_t gfp)
{
	struct llc_file *f;

	if (!S_ISREG(file_inode(file)->i_mode))
		return ERR_PTR(-EINVAL);
	f = kzalloc(sizeof(*f), gfp);
	if (!f)
		return ERR_PTR(-ENOMEM);
	f->file = get_file(file);
	f->mapping = file->f_mapping;
	f->req_first = f->req_last = f->todo_first = ULONG_MAX;
	xa_init_flags(&f->pins, XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&f->hot, XA_FLAGS_LOCK_IRQ);
	return f;
}

/* A state llc_file_link refused (its kobject was never initialised). */
void llc_file_free(struct llc_file *f)
{
	if (!IS_ERR_OR_NULL(f)) {
		fput(f->file);
		kfree(f);
	}
}

/* Caller holds llc_reg_mutex. Once f is linked, or consumed by a failed sysfs add, f is set to NULL. */
int llc_file_link(struct llc_file **fp, u64 *id)
{
	struct llc_file *f = *fp;
	int err;

	lockdep_assert_held(&llc_reg_mutex);
	if (llc_file_by_mapping(f->mapping))
		return -EEXIST;
	f->id = llc_next_id++;
	*fp = NULL;
	err = llc_sysfs_file_add(f); /* on failure the kobject's release frees f and drops the file */
	if (err)
		return err;
	list_add_tail(&f->list, &llc_files_list);
	hash_add_rcu(llc_files_hash, &f->node, (unsigned long)f->mapping);
	llc.nr_files++;
	llc_update_active();
	*id = f->id;
	return 0;
}

/* Both steps under llc_reg_mutex, for callers that already hold it (the automatic mode's scan). */
int llc_register(struct file *file, u64 *id)
{
	struct llc_file *f = llc_file_new(file, GFP_KERNEL | __GFP_NORETRY | __GFP_NOWARN);
	int err;

	if (IS_ERR(f))
		return PTR_ERR(f);
	err = llc_file_link(&f, id);
	llc_file_free(f);
	return err;
}

void llc_unregister(struct llc_file *f)
{
	lockdep_assert_held(&llc_reg_mutex);
	hash_del_rcu(&f->node);
	list_del(&f->list);
	llc.nr_files--;
	llc_update_active();
	llc_unpin_all(f);
	llc_stream_forget(f);
	llc_loops_file_del(f);
	kobject_put(&f->kobj); /* release: fput, then kfree after an RCU grace period */
}

void llc_snapshot(u64 stats[LLMCACHE_NR_STATS], u64 class_seqs[LLMCACHE_NR_CLASSES])
{
	const u64 *core;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&llc.lock, flags);
	core = llc_stats(llc.core);
	for (i = 0; i < LLMCACHE_NR_STATS; i++)
		stats[i] = core[i] + llc.stats[i];
	for (i = 0; i < LLMCACHE_NR_CLASSES; i++)
		class_seqs[i] = llc_class_count(llc.core, i);
	spin_unlock_irqrestore(&llc.lock, flags);
	/* Misses are pages that entered the page cache; every other access found its block resident. */
	stats[LLMCACHE_STAT_HITS] = stats[LLMCACHE_STAT_ACCESSES] > stats[LLMCACHE_STAT_MISSES] ?
		stats[LLMCACHE_STAT_ACCESSES] - stats[LLMCACHE_STAT_MISSES] : 0;
}

static void *llc_core_mem;

static int __init llc_init(void)
{
	struct llc_config cfg;
	u64 size;
	int err;

	llc_config_default(&cfg);
	size = llc_core_size(&cfg);
	llc_core_mem = kvzalloc(size, GFP_KERNEL);
	if (!llc_core_mem)
		return -ENOMEM;
	llc.core = llc_core_init(llc_core_mem, size, &cfg);
	if (!llc.core) {
		err = -EINVAL;
		goto free_core;
	}
	err = llc_pin_init();
	if (err)
		goto free_core;
	err = llc_sysfs_init();
	if (err)
		goto pin;
	if (llc_kv_init()) /* optional: the module works without /sys/kernel/llmcache/kv/ */
		pr_warn("llmcache: cannot create /sys/kernel/llmcache/kv: the KV statistics will not show\n");
	err = llc_dev_init();
	if (err)
		goto sysfs;
	err = llc_hooks_init(hooks);
	if (err)
		goto dev;
	pr_info("llmcache: loaded, %llu KiB of policy core, hooks: %s\n", size >> 10,
		llc.hook_mode == LLMCACHE_HOOK_TRACEPOINT ? "tracepoint" : "kprobe");
	return 0;
dev:
	llc_dev_exit();
	llc_auto_exit();
sysfs:
	llc_kv_exit();
	llc_sysfs_exit();
pin:
	llc_pin_exit();
free_core:
	kvfree(llc_core_mem);
	return err;
}

static void __exit llc_exit(void)
{
	struct llc_file *f, *tmp;

	llc_hooks_exit();
	llc_dev_exit();
	llc_auto_exit(); /* registers no more files */
	mutex_lock(&llc_reg_mutex);
	list_for_each_entry_safe(f, tmp, &llc_files_list, list)
		llc_unregister(f);
	mutex_unlock(&llc_reg_mutex);
	llc_kv_exit();
	llc_sysfs_exit(); /* no more writes that kick the pin worker */
	llc_pin_exit();
	llc_stream_exit();
	rcu_barrier(); /* the files' kfree_rcu callbacks run before the module text goes */
	kvfree(llc_core_mem);
	pr_info("llmcache: unloaded\n");
}

module_init(llc_init);
module_exit(llc_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("llmcache: classify LLM page-cache accesses into SEQ, LOOP and HOT block sequences");
MODULE_AUTHOR("llmcache developers");
