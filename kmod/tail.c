// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Loop tails. When a loop does not fit, Algorithm 1 evicts "the highest-numbered block of the
 * longest-period block sequence": past the pinned blocks, that is the block the sweep has just read.
 * Those blocks are read again only one period later, and by then the cache that could hold them has
 * gone to the rest of the sweep, so keeping them buys nothing. Left to the kernel, they still cost:
 * reclaim must find them among everything else, and an mmap engine's pages must first be unmapped,
 * a mapped page with a young PTE is even activated once before it can go.
 *
 * So the module drops them itself, shortly after their access, by the planner's rules, which the daemon
 * runs too (libllmcache/core/plan.h): the hooks note, per registered file, up to LLC_TAIL_SPANS runs of
 * LOOP accesses (llc_plan_note_run: a forward sweep is one run, a restart a second); every
 * LLC_TAIL_TICK_MS a worker takes those runs, and drops the ones it took at the previous tick less the
 * ones of the latest (llc_plan_tail_drops), so a block goes one to two ticks after its last access, when
 * the read or fault that touched it is long done. Every block that is not LOOP in the core's block index,
 * held by the module (pins, HOT protection), dirty or under writeback stays. Mapped pages are unmapped
 * first (unmap_mapping_pages), then the run is invalidated.
 *
 * Only for loops that cannot fit (llc_plan_drop_tails): a file's tails are dropped while its LOOP blocks
 * that are not pinned outnumber the page cache the kernel could give them (free pages plus the file LRU
 * pages that the module does not hold, shrink.c's llc_cache_room()). A loop that fits in the cache left
 * over, pinned or not, is never touched, and neither is a file flagged LLMCACHE_FILE_NO_DROP.
 */
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/pagevec.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_TAIL_TICK_MS 50

static void llc_tail_worker(struct work_struct *w);
static DECLARE_DELAYED_WORK(llc_tail_work, llc_tail_worker);

/* A LOOP access to f's pages [first, last]. Caller holds llc.lock. Returns true when it was noted. */
bool llc_tail_note(struct llc_file *f, pgoff_t first, pgoff_t last)
{
	return llc_plan_note_run(f->tail, &f->nr_tail, LLC_TAIL_SPANS, first, last - first + 1) >= 0;
}

void llc_tail_kick(void)
{
	if (!delayed_work_pending(&llc_tail_work))
		schedule_delayed_work(&llc_tail_work, msecs_to_jiffies(LLC_TAIL_TICK_MS));
}

/* Do f's LOOP blocks that are not pinned outnumber the cache the kernel could give them? */
static bool llc_tail_wanted(struct llc_file *f)
{
	const struct llc_seq *s;
	unsigned long flags;
	u64 loop = 0, pinned;
	u16 id;

	if ((READ_ONCE(f->flags) & LLMCACHE_FILE_NO_DROP) || !READ_ONCE(llc.enabled))
		return false;
	spin_lock_irqsave(&llc.lock, flags);
	for (id = llc_first(llc.core, LLMCACHE_CLASS_LOOP); id != LLC_SEQ_NONE; id = llc_next(llc.core, id)) {
		s = llc_seq_get(llc.core, id);
		if (s->file == f->id)
			loop += s->end - s->start + 1;
	}
	pinned = READ_ONCE(f->pinned);
	spin_unlock_irqrestore(&llc.lock, flags);
	return llc_plan_drop_tails(loop, pinned, llc_cache_room());
}

static unsigned long llc_tail_drop_run(struct llc_file *f, pgoff_t a, pgoff_t b)
{
	if (mapping_mapped(f->mapping))
		unmap_mapping_pages(f->mapping, a, b - a + 1, false);
	return invalidate_mapping_pages(f->mapping, a, b);
}

/*
 * Drop f's resident LOOP folios that start in [a, b] and are not held. A run to drop extends over
 * pages that are not resident (they have nothing to unmap or invalidate), so a sweep past the pins costs
 * one unmap and one invalidation per tick. Returns the pages dropped.
 */
static unsigned long llc_tail_drop(struct llc_file *f, pgoff_t a, pgoff_t b)
{
	struct folio_batch fb;
	pgoff_t start[ARRAY_SIZE(fb.folios)], end[ARRAY_SIZE(fb.folios)], index = a, run = ULONG_MAX, run_end = 0;
	bool drop[ARRAY_SIZE(fb.folios)];
	unsigned long dropped = 0, flags;
	const struct llc_seq *s;
	u32 i, nr;
	u16 id;

	folio_batch_init(&fb);
	while (index <= b && filemap_get_folios(f->mapping, &index, b, &fb)) {
		nr = folio_batch_count(&fb);
		for (i = 0; i < nr; i++) {
			start[i] = fb.folios[i]->index;
			end[i] = start[i] + folio_nr_pages(fb.folios[i]) - 1;
			/* A folio goes whole with the run it starts in; one that starts before a stays. */
			drop[i] = start[i] >= a && !xa_load(&f->pins, start[i]) && !xa_load(&f->hot, start[i]);
		}
		spin_lock_irqsave(&llc.lock, flags);
		for (i = 0; i < nr; i++) {
			id = drop[i] ? llc_lookup(llc.core, f->id, start[i]) : LLC_SEQ_NONE;
			s = id != LLC_SEQ_NONE ? llc_seq_get(llc.core, id) : NULL;
			drop[i] = s && s->cls == LLMCACHE_CLASS_LOOP;
		}
		spin_unlock_irqrestore(&llc.lock, flags);
		folio_batch_release(&fb); /* our references would keep the pages in */
		for (i = 0; i < nr; i++) {
			if (drop[i]) {
				run = min(run, start[i]);
				run_end = end[i];
			} else if (run != ULONG_MAX) {
				dropped += llc_tail_drop_run(f, run, run_end);
				run = ULONG_MAX;
			}
		}
		cond_resched();
	}
	if (run != ULONG_MAX)
		dropped += llc_tail_drop_run(f, run, run_end);
	return dropped;
}

static void llc_tail_worker(struct work_struct *w)
{
	struct llc_span recent[LLC_TAIL_SPANS], drops[LLC_TAIL_SPANS * (LLC_TAIL_SPANS + 1)];
	unsigned long dropped = 0, flags;
	struct llc_file *f;
	bool again = false;
	u32 i, nr, nr_drops;

	mutex_lock(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list) {
		spin_lock_irqsave(&llc.lock, flags);
		nr = f->nr_tail;
		memcpy(recent, f->tail, nr * sizeof(*recent));
		f->nr_tail = 0;
		spin_unlock_irqrestore(&llc.lock, flags);
		if (f->nr_tail_aged && llc_tail_wanted(f)) {
			nr_drops = llc_plan_tail_drops(f->tail_aged, f->nr_tail_aged, recent, nr, drops,
						       ARRAY_SIZE(drops));
			for (i = 0; i < nr_drops; i++)
				dropped += llc_tail_drop(f, drops[i].first, drops[i].first + drops[i].count - 1);
		}
		memcpy(f->tail_aged, recent, nr * sizeof(*recent));
		f->nr_tail_aged = nr;
		again |= nr;
	}
	spin_lock_irqsave(&llc.lock, flags);
	llc.stats[LLMCACHE_STAT_LOOP_DROPPED] += dropped;
	spin_unlock_irqrestore(&llc.lock, flags);
	mutex_unlock(&llc_reg_mutex);
	if (again)
		llc_tail_kick();
}

void llc_tail_exit(void)
{
	cancel_delayed_work_sync(&llc_tail_work);
}
