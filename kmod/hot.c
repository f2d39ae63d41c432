// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * HOT protection. Algorithm 1 keeps the hot set (tokenizer tables, metadata, indices: a few blocks
 * re-referenced at random all along) in a reserved part of the cache managed LRU. The module protects
 * the most recently used HOT blocks up to hot_reserve bytes the way it pins loops: it holds a reference
 * to their page-cache folios, so neither reclaim nor drop_caches frees them. A reference rather than,
 * say, marking folios accessed: only a reference guarantees residency whatever the kernel's LRU thinks,
 * it costs nothing per access, and pins already show it is released safely everywhere (truncation,
 * unregistration, enable=0, unload). HOT blocks beyond the reserve are not held: they age in the
 * kernel's LRU like any page, which is Algorithm 1's eviction of HOT blocks over the reserve. Nor is a
 * HOT block idle for longer than the core's limit (llc_hot_idle_limit(): unused for two iterations of
 * the biggest loop that runs, an engine's two tokens, like a tokenizer page read at start-up and never
 * again): the reserve protects the blocks still in use, not the first ones ever read
 * (Documentation/design/policy-core.md, "The HOT reserve against a loop's period").
 *
 * A worker recomputes the protected set 50 ms after an access to an unprotected HOT block (accesses
 * within that window coalesce), when the core's idleness limit changes, when the oldest block it
 * protects has been idle past that limit (llc.hot_oldest_vt: a block goes idle as time passes, with no
 * access to it and the limit the same), when hot_reserve changes and when the module is re-enabled: it
 * walks the core's HOT list from its most recently used end, keeps what is still chosen, drops the
 * rest and holds the newly chosen blocks that are resident (a block read later is protected at its
 * next access).
 * Files flagged LLMCACHE_FILE_NO_PROTECT are skipped. Under memory pressure the shrinker releases
 * protection last, after every loop pin (llc_hot_shrink), and caps the reserve; the cap grows back by
 * 1/16 of the reserve at each recomputation.
 */
#include <linux/bsearch.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_HOT_MAX 8192 /* blocks protected at most (32 MiB) */

struct llc_hot_block {
	u64 file;
	pgoff_t index;
};

static struct llc_hot_block llc_hot_set[LLC_HOT_MAX]; /* under llc_reg_mutex */
static u64 llc_hot_cap = U64_MAX;                     /* blocks; lowered by the shrinker */
static void llc_hot_worker(struct work_struct *w);
static DECLARE_DELAYED_WORK(llc_hot_work, llc_hot_worker);

void llc_hot_kick(void)
{
	if (!delayed_work_pending(&llc_hot_work))
		schedule_delayed_work(&llc_hot_work, msecs_to_jiffies(50));
}

static int llc_file_cmp(const void *a, const void *b)
{
	u64 x = (*(struct llc_file *const *)a)->id, y = (*(struct llc_file *const *)b)->id;

	return x < y ? -1 : x > y;
}

static int llc_file_key(const void *key, const void *elt)
{
	u64 x = *(const u64 *)key, y = (*(struct llc_file *const *)elt)->id;

	return x < y ? -1 : x > y;
}

static struct llc_file *llc_hot_file(struct llc_file **files, u32 n, u64 id)
{
	struct llc_file **f = bsearch(&id, files, n, sizeof(*files), llc_file_key);

	return f ? *f : NULL;
}

/* The most recently used HOT blocks of the given files, at most limit. Caller holds llc_reg_mutex. */
static u32 llc_hot_choose(u64 limit, struct llc_file **files, u32 nfiles)
{
	const struct llc_seq *s = NULL;
	unsigned long flags;
	u16 id, tail = LLC_SEQ_NONE;
	u32 n = 0;
	u64 b, idle_limit, now, oldest = U64_MAX;

	spin_lock_irqsave(&llc.lock, flags);
	idle_limit = llc_hot_idle_limit(llc.core);
	now = llc_vtime(llc.core);
	for (id = llc_first(llc.core, LLMCACHE_CLASS_HOT); id != LLC_SEQ_NONE; id = llc_next(llc.core, id))
		tail = id;
	for (id = tail; id != LLC_SEQ_NONE && n < limit; id = s->list_prev) {
		s = llc_seq_get(llc.core, id);
		if (idle_limit && now - s->last_vt > idle_limit)
			break; /* it and every older one went unused for two iterations of the biggest loop */
		if (!llc_hot_file(files, nfiles, s->file))
			continue;
		for (b = s->start; b <= s->end && n < limit; b++)
			if (llc_lookup(llc.core, s->file, b) == id) {
				llc_hot_set[n].file = s->file;
				llc_hot_set[n++].index = b;
				oldest = s->last_vt;
			}
	}
	llc.hot_oldest_vt = oldest; /* the access hook kicks a recomputation once it is idle past the limit */
	spin_unlock_irqrestore(&llc.lock, flags);
	return n;
}

static void llc_hot_apply(void)
{
	u64 reserve = READ_ONCE(llc.hot_reserve) >> LLMCACHE_BLOCK_SHIFT, limit;
	struct llc_file **files, *f;
	struct folio *folio;
	unsigned long index, flags;
	u32 nfiles = 0, n = 0, i;

	lockdep_assert_held(&llc_reg_mutex);
	files = kmalloc_array(max(llc.nr_files, 1U), sizeof(*files), GFP_KERNEL | __GFP_NORETRY | __GFP_NOWARN);
	if (!files)
		return;
	list_for_each_entry(f, &llc_files_list, list)
		if (!(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_PROTECT))
			files[nfiles++] = f;
	sort(files, nfiles, sizeof(*files), llc_file_cmp, NULL);
	if (llc_hot_cap < reserve)
		llc_hot_cap += max_t(u64, reserve / 16, 1);
	limit = min3(reserve, llc_hot_cap, (u64)LLC_HOT_MAX);
	if (limit && nfiles) {
		n = llc_hot_choose(limit, files, nfiles);
	} else {
		spin_lock_irqsave(&llc.lock, flags);
		llc.hot_oldest_vt = U64_MAX;
		spin_unlock_irqrestore(&llc.lock, flags);
	}

	/* Mark what stays protected, release the rest, then protect what is new. */
	for (i = 0; i < n; i++) {
		f = llc_hot_file(files, nfiles, llc_hot_set[i].file);
		xa_lock_irq(&f->hot);
		__xa_set_mark(&f->hot, llc_hot_set[i].index, XA_MARK_0);
		xa_unlock_irq(&f->hot);
	}
	list_for_each_entry(f, &llc_files_list, list)
		xa_for_each(&f->hot, index, folio) {
			if (!xa_get_mark(&f->hot, index, XA_MARK_0)) {
				llc_unhold(f, true, index);
				continue;
			}
			xa_lock_irq(&f->hot);
			__xa_clear_mark(&f->hot, index, XA_MARK_0);
			xa_unlock_irq(&f->hot);
		}
	for (i = 0; i < n; i++) {
		llc_hold(llc_hot_file(files, nfiles, llc_hot_set[i].file), true, llc_hot_set[i].index);
		cond_resched();
	}
	kfree(files);
}

static void llc_hot_worker(struct work_struct *w)
{
	mutex_lock(&llc_reg_mutex);
	if (READ_ONCE(llc.enabled))
		llc_hot_apply();
	mutex_unlock(&llc_reg_mutex);
}

/* Release all protection (enable=0). Caller holds llc_reg_mutex. */
void llc_hot_release(void)
{
	struct llc_file *f;
	struct folio *folio;
	unsigned long index;

	lockdep_assert_held(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list)
		xa_for_each(&f->hot, index, folio)
			llc_unhold(f, true, index);
}

/*
 * The shrinker's last step, after every loop pin: release about nr protected blocks and cap the
 * reserve. Blocks go in file and index order; the next recomputation restores the LRU choice.
 */
unsigned long llc_hot_shrink(unsigned long nr)
{
	u64 held = READ_ONCE(llc.stats[LLMCACHE_STAT_HOT_PROTECTED]);
	unsigned long released = 0, index;
	struct llc_file *f;
	struct folio *folio;

	lockdep_assert_held(&llc_reg_mutex);
	llc_hot_cap = held > nr ? held - nr : 0;
	list_for_each_entry(f, &llc_files_list, list)
		xa_for_each(&f->hot, index, folio) {
			if (released >= nr)
				return released;
			released += llc_unhold(f, true, index);
		}
	return released;
}

void llc_hot_exit(void)
{
	cancel_delayed_work_sync(&llc_hot_work);
}
