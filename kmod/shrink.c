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
 * cache that reclaim can free instead (file LRU pages minus those the module holds, mapped, dirty or
 * under writeback) is at least as large as what the module holds, count_objects does not offer them,
 * so reclaim that unheld page cache can satisfy (another large file read, say) leaves pins alone.
 * Once it is smaller, each call releases what reclaim asks for until the two balance again, and the
 * pin budget and hot reserve are capped, growing back as the workers run (pin.c, hot.c). An
 * allocation that needs the memory therefore always gets it: pins never push the machine into OOM.
 * Mapped pinned pages count twice (mapped and held): the estimate errs towards yielding.
 *
 * Not memcg-aware: pins are released under global pressure, not at a cgroup's limit.
 */
#include <linux/mm.h>
#include <linux/shrinker.h>
#include <linux/version.h>
#include <linux/vmstat.h>
#include "llmcache.h"

static u64 llc_held(void)
{
	return READ_ONCE(llc.stats[LLMCACHE_STAT_PINNED]) + READ_ONCE(llc.stats[LLMCACHE_STAT_HOT_PROTECTED]);
}

/* Is the page cache reclaim could free instead of what the module holds smaller than it? */
static bool llc_must_yield(void)
{
	long held = llc_held();
	long spare = global_node_page_state(NR_ACTIVE_FILE) + global_node_page_state(NR_INACTIVE_FILE) -
		     global_node_page_state(NR_FILE_MAPPED) - global_node_page_state(NR_FILE_DIRTY) -
		     global_node_page_state(NR_WRITEBACK) - held;

	return held && spare < held;
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
	return 0;
}

void llc_shrink_exit(void)
{
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
	return register_shrinker(&llc_shrinker, "llmcache");
}

void llc_shrink_exit(void)
{
	unregister_shrinker(&llc_shrinker);
}
#endif
