// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Loop pinning. A pinned block is a page-cache folio the module holds an extra reference to: reclaim
 * cannot free a folio with an extra reference, so the block stays resident. A worker applies the core's
 * pin plan (loops by increasing period, each from its lowest block up, within pin_budget): it drops
 * pins that left the plan and pins the planned blocks that are resident; it runs when a loop starts or
 * restarts, when a planned file gains pages and when pin_budget changes.
 *
 * Pins never push the machine into OOM: a shrinker releases them under memory pressure in Algorithm 1's
 * eviction order (the plan for a smaller budget is contained in the larger one's, so lowering the
 * budget releases the highest blocks of the longest-period loops first) and caps the budget; the cap
 * grows back by 1/16 of the budget each time the worker runs.
 */
#include <linux/pagemap.h>
#include <linux/shrinker.h>
#include <linux/version.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include "llmcache.h"

#define LLC_PLAN_MAX 256

static struct llc_pin_range llc_plan[LLC_PLAN_MAX]; /* under llc_reg_mutex */
static u64 llc_cap = U64_MAX;                        /* blocks; lowered by the shrinker */
static void llc_pin_worker(struct work_struct *w);
static DECLARE_WORK(llc_pin_work, llc_pin_worker);

static bool llc_planned(u32 n, u64 id, pgoff_t index)
{
	u32 i;

	for (i = 0; i < n; i++)
		if (llc_plan[i].file == id && index >= llc_plan[i].first &&
		    index < llc_plan[i].first + llc_plan[i].count)
			return true;
	return false;
}

static void llc_pins_changed(struct llc_file *f, long delta)
{
	unsigned long flags;

	spin_lock_irqsave(&llc.lock, flags);
	f->pinned += delta;
	llc.stats[LLMCACHE_STAT_PINNED] += delta;
	spin_unlock_irqrestore(&llc.lock, flags);
}

/* Drop the pin on f's page index, if this caller is the one that takes it out. */
static bool llc_unpin(struct llc_file *f, pgoff_t index)
{
	struct folio *folio = xa_erase_irq(&f->pins, index);

	if (!folio)
		return false;
	folio_put(folio);
	llc_pins_changed(f, -1);
	return true;
}

void llc_unpin_all(struct llc_file *f)
{
	struct folio *folio;
	unsigned long index;

	xa_for_each(&f->pins, index, folio)
		llc_unpin(f, index);
}

/* A page of a pinned file left the page cache (truncation, invalidation): its pin goes with it. */
void llc_pin_removed(struct llc_file *f, struct folio *folio)
{
	pgoff_t index = folio->index, end = index + folio_nr_pages(folio);
	struct folio *old;

	if (xa_empty(&f->pins))
		return;
	for (; index < end; index++) {
		old = xa_erase(&f->pins, index); /* interrupts are off: the page cache's lock is held */
		if (old) {
			folio_put(old); /* the page cache still holds its own reference */
			f->pinned--;
			llc.stats[LLMCACHE_STAT_PINNED]--;
		}
	}
}

/*
 * Make the pins match the plan for budget blocks; with release_only, only drop pins. Returns the pins
 * dropped. Caller holds llc_reg_mutex.
 */
static unsigned long llc_pin_apply(u64 budget, bool release_only)
{
	unsigned long released = 0, flags, index;
	struct folio *folio;
	struct llc_file *f;
	u32 n, i;
	u64 b;

	lockdep_assert_held(&llc_reg_mutex);
	spin_lock_irqsave(&llc.lock, flags);
	n = budget ? llc_pin_plan(llc.core, budget, llc_plan, LLC_PLAN_MAX) : 0;
	spin_unlock_irqrestore(&llc.lock, flags);

	list_for_each_entry(f, &llc_files_list, list) {
		xa_for_each(&f->pins, index, folio)
			if ((!llc_planned(n, f->id, index) || READ_ONCE(folio->mapping) != f->mapping) &&
			    llc_unpin(f, index))
				released++;
		f->planned = false;
	}
	if (release_only)
		return released;
	for (i = 0; i < n; i++) {
		list_for_each_entry(f, &llc_files_list, list)
			if (f->id == llc_plan[i].file)
				break;
		if (list_entry_is_head(f, &llc_files_list, list))
			continue;
		WRITE_ONCE(f->planned, true);
		for (b = llc_plan[i].first; b < llc_plan[i].first + llc_plan[i].count; b++) {
			if (xa_load(&f->pins, b))
				continue;
			folio = filemap_get_folio(f->mapping, b);
			if (IS_ERR_OR_NULL(folio))
				continue;
			if (xa_insert_irq(&f->pins, b, folio, GFP_KERNEL)) {
				folio_put(folio);
				continue;
			}
			llc_pins_changed(f, 1);
			/* Removed from the page cache meanwhile: the removal hook may have missed this pin. */
			if (READ_ONCE(folio->mapping) != f->mapping)
				llc_unpin(f, b);
			cond_resched();
		}
	}
	return released;
}

static void llc_pin_worker(struct work_struct *w)
{
	u64 budget = READ_ONCE(llc.pin_budget) >> LLMCACHE_BLOCK_SHIFT;

	mutex_lock(&llc_reg_mutex);
	if (llc_cap < budget)
		llc_cap += max_t(u64, budget / 16, 1);
	llc_pin_apply(min(budget, llc_cap), false);
	mutex_unlock(&llc_reg_mutex);
}

void llc_pin_kick(void)
{
	schedule_work(&llc_pin_work);
}

/* Release everything now (unregister-all, unload, budget 0). Caller holds llc_reg_mutex. */
void llc_pin_release(void)
{
	llc_pin_apply(0, true);
}

static unsigned long llc_shrink_count(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long n = READ_ONCE(llc.stats[LLMCACHE_STAT_PINNED]);

	return n ? n : SHRINK_EMPTY;
}

static unsigned long llc_shrink_scan(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long released, flags;
	u64 pinned;

	if (!mutex_trylock(&llc_reg_mutex)) /* the mutex's holder may be allocating */
		return SHRINK_STOP;
	spin_lock_irqsave(&llc.lock, flags);
	pinned = llc.stats[LLMCACHE_STAT_PINNED];
	spin_unlock_irqrestore(&llc.lock, flags);
	llc_cap = pinned > sc->nr_to_scan ? pinned - sc->nr_to_scan : 0;
	released = llc_pin_apply(llc_cap, true);
	spin_lock_irqsave(&llc.lock, flags);
	llc.stats[LLMCACHE_STAT_SHRINKER_RELEASED] += released;
	spin_unlock_irqrestore(&llc.lock, flags);
	mutex_unlock(&llc_reg_mutex);
	return released ? released : SHRINK_STOP;
}

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
static struct shrinker *llc_shrinker;

int llc_pin_init(void)
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

static void llc_shrinker_exit(void)
{
	shrinker_free(llc_shrinker);
}
#else
static struct shrinker llc_shrinker = {
	.count_objects = llc_shrink_count,
	.scan_objects = llc_shrink_scan,
	.seeks = DEFAULT_SEEKS,
};

int llc_pin_init(void)
{
	return register_shrinker(&llc_shrinker, "llmcache");
}

static void llc_shrinker_exit(void)
{
	unregister_shrinker(&llc_shrinker);
}
#endif

/* After the hooks are gone: nothing schedules the worker any more. */
void llc_pin_exit(void)
{
	cancel_work_sync(&llc_pin_work);
	llc_shrinker_exit();
}
