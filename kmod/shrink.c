// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The shrinker: Algorithm 1's Evict() when the kernel runs short of memory, in its order:
 *   1. SEQ: resident blocks of scans (llc_seq_shrink), always first, and only in a reclaim context that
 *      may enter the filesystem;
 *   2. HOT over the reserve: nothing to do, the module never holds HOT blocks beyond hot_reserve (the
 *      kernel's LRU ages them);
 *   3. LOOP pins, the highest blocks of the longest-period loop first (llc_pin_shrink);
 *   4. HOT protection within the reserve, last (llc_evict_class picks HOT once no pin is left).
 * Steps 3 and 4 give back folios the module holds. They yield only to real pressure: while the page
 * cache that reclaim can free instead (file LRU pages that the module does not hold and that are not
 * dirty or under writeback) exceeds 1/64 of RAM, count_objects does not offer them, so reclaim that
 * unheld page cache can satisfy (another large file read, or the unpinned part of the loop streaming
 * through) leaves pins alone. Below that, each call releases what reclaim asks for until the spare
 * cache is back above it, and the pin budget and hot reserve are capped, growing back as the workers
 * run (pin.c, hot.c).
 *
 * Backstop: should reclaim fail anyway (spare pages that cannot be freed after all), an OOM notifier
 * releases every pin and protection and caps both to 0 before the OOM killer picks a victim; the
 * kernel then retries the allocation. Pins never push the machine into OOM. The module's own
 * allocations under llc_reg_mutex use __GFP_NORETRY, so they never enter the OOM path holding it.
 *
 * Not memcg-aware: the kernel calls this shrinker for global reclaim only, and a memory cgroup's OOM
 * does not call the notifier. Pinned pages stay charged to the cgroup that read them: pin.c keeps them
 * within what the planner leaves them under its limit and memcg.c releases them when its own reclaim
 * finds nothing to free.
 */
#include <linux/mm.h>
#include <linux/oom.h>
#include <linux/shrinker.h>
#include <linux/version.h>
#include <linux/vmstat.h>
#include "internal.h"

static u64 llc_held(void)
{
	return READ_ONCE(llc.stats[LLMCACHE_STAT_PINNED]) + READ_ONCE(llc.stats[LLMCACHE_STAT_HOT_PROTECTED]);
}

/*
 * The page cache reclaim could free instead of what the module holds: clean file LRU pages the module
 * does not hold (llc_plan_spare_file: the held folios reclaim has met are on the unevictable list,
 * outside the file LRU counts, and the mlocked pages of processes are kept apart from them).
 */
static long llc_spare_file(void)
{
	return llc_plan_spare_file(global_node_page_state(NR_ACTIVE_FILE) + global_node_page_state(NR_INACTIVE_FILE),
				   global_node_page_state(NR_FILE_DIRTY) + global_node_page_state(NR_WRITEBACK),
				   global_node_page_state(NR_UNEVICTABLE), global_zone_page_state(NR_MLOCK), llc_held());
}

/* Is that page cache running out? */
static bool llc_must_yield(void)
{
	return llc_held() && llc_spare_file() < (long)(totalram_pages() >> 6);
}

/* The page cache the kernel could give to pages the module does not hold: free plus spare file pages. */
u64 llc_cache_room(void)
{
	return max(llc_spare_file(), 0L) + global_zone_page_state(NR_FREE_PAGES);
}

static unsigned long llc_shrink_count(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long n = READ_ONCE(llc.seq_undropped);

	if (llc_must_yield())
		n += llc_held();
	return n ? n : SHRINK_EMPTY;
}

static unsigned long llc_shrink_scan(struct shrinker *s, struct shrink_control *sc)
{
	u64 resident[LLMCACHE_NR_CLASSES] = { 0 };
	unsigned long freed = 0, n, flags;

	if (!mutex_trylock(&llc_reg_mutex)) /* the mutex's holder may be allocating */
		return SHRINK_STOP;
	if ((sc->gfp_mask & __GFP_FS) && gfpflags_allow_blocking(sc->gfp_mask))
		freed = llc_seq_shrink(sc->nr_to_scan);
	while (freed < sc->nr_to_scan && llc_must_yield()) {
		resident[LLMCACHE_CLASS_LOOP] = READ_ONCE(llc.stats[LLMCACHE_STAT_PINNED]);
		resident[LLMCACHE_CLASS_HOT] = READ_ONCE(llc.stats[LLMCACHE_STAT_HOT_PROTECTED]);
		if (llc_evict_class(resident, READ_ONCE(llc.hot_reserve) >> LLMCACHE_BLOCK_SHIFT) ==
		    LLMCACHE_CLASS_LOOP)
			n = llc_pin_shrink(sc->nr_to_scan - freed);
		else
			n = llc_hot_shrink(sc->nr_to_scan - freed);
		if (!n)
			break;
		freed += n;
	}
	spin_lock_irqsave(&llc.lock, flags);
	llc.stats[LLMCACHE_STAT_SHRINKER_RELEASED] += freed;
	spin_unlock_irqrestore(&llc.lock, flags);
	mutex_unlock(&llc_reg_mutex);
	return freed ? freed : SHRINK_STOP;
}

/* The OOM killer is about to run: give back everything the module holds instead. */
static int llc_oom_notify(struct notifier_block *nb, unsigned long unused, void *arg)
{
	unsigned long *freed = arg, n, flags;

	if (!llc_held() || !mutex_trylock(&llc_reg_mutex))
		return NOTIFY_OK;
	n = llc_pin_shrink(ULONG_MAX) + llc_hot_shrink(ULONG_MAX);
	spin_lock_irqsave(&llc.lock, flags);
	llc.stats[LLMCACHE_STAT_SHRINKER_RELEASED] += n;
	spin_unlock_irqrestore(&llc.lock, flags);
	mutex_unlock(&llc_reg_mutex);
	if (n)
		pr_info("llmcache: out of memory: released %lu pinned and protected blocks\n", n);
	*freed += n;
	return NOTIFY_OK;
}

static struct notifier_block llc_oom_nb = { .notifier_call = llc_oom_notify };

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
/* 6.7 replaced register_shrinker() with shrinker_alloc() + shrinker_register(). */
static struct shrinker *llc_shrinker;

int llc_shrink_init(void)
{
	llc_shrinker = shrinker_alloc(0, "llmcache");
	if (!llc_shrinker)
		return -ENOMEM;
	llc_shrinker->count_objects = llc_shrink_count;
	llc_shrinker->scan_objects = llc_shrink_scan;
	llc_shrinker->seeks = DEFAULT_SEEKS;
	shrinker_register(llc_shrinker);
	return register_oom_notifier(&llc_oom_nb); /* cannot fail */
}

void llc_shrink_exit(void)
{
	unregister_oom_notifier(&llc_oom_nb);
	shrinker_free(llc_shrinker);
}
#else
static struct shrinker llc_shrinker = {
	.count_objects = llc_shrink_count,
	.scan_objects = llc_shrink_scan,
	.seeks = DEFAULT_SEEKS,
};

int llc_shrink_init(void)
{
	int err = register_shrinker(&llc_shrinker, "llmcache");

	return err ? err : register_oom_notifier(&llc_oom_nb); /* cannot fail */
}

void llc_shrink_exit(void)
{
	unregister_oom_notifier(&llc_oom_nb);
	unregister_shrinker(&llc_shrinker);
}
#endif
