// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * SEQ invalidation. Algorithm 1 gives one-time scans (configuration and setup files read once at
 * start-up) the lowest priority: caching them brings nothing and pollutes the cache. A file's scans
 * have passed when it has seen no SEQ access for seq_drop_ns (default 1 s; 0 turns this off; the
 * planner's llc_plan_scan_finished, the daemon's rule with --scan-idle): a
 * worker then invalidates the file's resident blocks whose sequence is SEQ, run by run, with
 * POSIX_FADV_DONTNEED (which also catches pages still in other CPUs' LRU batches).
 * - A scan re-read from its start within seq_drop_ns has become a LOOP and is kept, and HOT blocks
 *   inside a scanned range (tokenizer lookups after the tokenizer was loaded) stay: every resident
 *   block's class is checked in the core's block index before it goes.
 * - Pages that are mapped, dirty, locked or held by the module (pins, HOT protection) are never
 *   invalidated: the kernel's invalidation skips them. SEQ blocks seen through mappings (faults and
 *   fault-around) are not counted at all: a mapped page is re-read without a fault, so an mmap engine's
 *   loop looks like one scan, which must not be dropped when the engine's mappings go.
 * - Per file rather than per sequence: the core keeps no wall time of a sequence's last access, and
 *   in practice a scan finishes with its file (configuration, setup, a model's first load).
 * Under memory pressure the shrinker drops SEQ blocks first, before anything the module holds,
 * without waiting for seq_drop_ns, the file whose scan ended first first (llc_seq_shrink, with
 * invalidate_mapping_pages only: reclaim must not wait for other CPUs).
 * Files flagged LLMCACHE_FILE_NO_DROP are left alone (the hooks do not even count their SEQ blocks).
 */
#include <linux/fadvise.h>
#include <linux/fs.h>
#include <linux/pagemap.h>
#include <linux/pagevec.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_SEQ_MAX_DELAY_NS (3600ULL * NSEC_PER_SEC)

static void llc_seq_worker(struct work_struct *w);
static DECLARE_DELAYED_WORK(llc_seq_work, llc_seq_worker);

static void llc_seq_schedule(u64 delay_ns)
{
	schedule_delayed_work(&llc_seq_work, nsecs_to_jiffies(min(delay_ns, LLC_SEQ_MAX_DELAY_NS)) + 1);
}

/* A registered file saw SEQ accesses: look again once seq_drop_ns has passed. */
void llc_seq_kick(void)
{
	u64 delay = READ_ONCE(llc.seq_drop_ns);

	if (delay && !delayed_work_pending(&llc_seq_work))
		llc_seq_schedule(delay);
}

/* The block span that f's SEQ sequences cover. Caller holds llc.lock. */
static bool llc_seq_span(u64 file, pgoff_t *first, pgoff_t *last)
{
	const struct llc_seq *s;
	u16 id;

	*first = ULONG_MAX;
	*last = 0;
	for (id = llc_first(llc.core, LLMCACHE_CLASS_SEQ); id != LLC_SEQ_NONE; id = llc_next(llc.core, id)) {
		s = llc_seq_get(llc.core, id);
		if (s->file != file)
			continue;
		*first = min_t(pgoff_t, *first, s->start);
		*last = max_t(pgoff_t, *last, s->end);
	}
	return *first <= *last;
}

/* Invalidate f's pages [a, b]; in reclaim without waiting on anything. Returns the pages dropped. */
static unsigned long llc_seq_invalidate(struct llc_file *f, pgoff_t a, pgoff_t b, unsigned long resident,
					bool reclaim)
{
	unsigned long n = invalidate_mapping_pages(f->mapping, a, b), before;

	if (n >= resident || reclaim)
		return n;
	/* Some pages are still in an LRU batch (they hold a reference): fadvise drains those and retries. */
	before = READ_ONCE(f->mapping->nrpages);
	vfs_fadvise(f->file, (loff_t)a << PAGE_SHIFT, (loff_t)(b - a + 1) << PAGE_SHIFT, POSIX_FADV_DONTNEED);
	return n + min(resident - n, before - min(before, READ_ONCE(f->mapping->nrpages)));
}

/* Drop f's resident SEQ blocks. Caller holds llc_reg_mutex. */
static unsigned long llc_seq_drop_file(struct llc_file *f, bool reclaim)
{
	struct folio_batch fb;
	pgoff_t start[ARRAY_SIZE(fb.folios)], end[ARRAY_SIZE(fb.folios)], index, last;
	bool seq[ARRAY_SIZE(fb.folios)];
	unsigned long dropped = 0, flags, resident;
	const struct llc_seq *s;
	u64 pending;
	u32 i, j, nr;
	u16 id;
	bool any;

	spin_lock_irqsave(&llc.lock, flags);
	pending = f->seq_undropped;
	any = llc_seq_span(f->id, &index, &last);
	spin_unlock_irqrestore(&llc.lock, flags);

	folio_batch_init(&fb);
	while (any && index <= last && filemap_get_folios(f->mapping, &index, last, &fb)) {
		nr = folio_batch_count(&fb);
		for (i = 0; i < nr; i++) {
			start[i] = fb.folios[i]->index;
			end[i] = start[i] + folio_nr_pages(fb.folios[i]) - 1;
		}
		spin_lock_irqsave(&llc.lock, flags);
		for (i = 0; i < nr; i++) {
			id = llc_lookup(llc.core, f->id, start[i]);
			s = id != LLC_SEQ_NONE ? llc_seq_get(llc.core, id) : NULL;
			seq[i] = s && s->cls == LLMCACHE_CLASS_SEQ;
		}
		spin_unlock_irqrestore(&llc.lock, flags);
		folio_batch_release(&fb); /* our references would keep the pages in */
		for (i = 0; i < nr; i = j) { /* runs of consecutive SEQ folios */
			j = i + 1;
			if (!seq[i])
				continue;
			for (resident = end[i] - start[i] + 1; j < nr && seq[j] && start[j] == end[j - 1] + 1; j++)
				resident += end[j] - start[j] + 1;
			dropped += llc_seq_invalidate(f, start[i], end[j - 1], resident, reclaim);
		}
		cond_resched();
	}

	spin_lock_irqsave(&llc.lock, flags);
	pending = min(pending, f->seq_undropped);
	f->seq_undropped -= pending;
	llc.seq_undropped -= pending;
	llc.stats[LLMCACHE_STAT_SEQ_DROPPED] += dropped;
	spin_unlock_irqrestore(&llc.lock, flags);
	return dropped;
}

static void llc_seq_worker(struct work_struct *w)
{
	u64 grace = READ_ONCE(llc.seq_drop_ns), now = llc_clock_ns(), next = U64_MAX, pending, last;
	unsigned long flags;
	struct llc_file *f;

	mutex_lock(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list) {
		spin_lock_irqsave(&llc.lock, flags);
		pending = f->seq_undropped;
		last = f->seq_last_ns;
		if (pending && (READ_ONCE(f->flags) & LLMCACHE_FILE_NO_DROP)) {
			llc.seq_undropped -= pending; /* flagged after its SEQ blocks were counted */
			f->seq_undropped = pending = 0;
		}
		spin_unlock_irqrestore(&llc.lock, flags);
		if (!pending || !grace || !READ_ONCE(llc.enabled))
			continue;
		/*
		 * Not mapped (SEQ blocks seen through mappings are never counted as pending), not written
		 * (the hooks see no writes).
		 */
		if (llc_plan_scan_finished(0, 0, now > last ? now - last : 0, grace))
			llc_seq_drop_file(f, false);
		else
			next = min(next, last + grace - now);
	}
	mutex_unlock(&llc_reg_mutex);
	if (next != U64_MAX)
		llc_seq_schedule(next);
}

/*
 * The shrinker's first step: drop resident SEQ blocks, the files whose last scan ended first first,
 * until about nr pages went. Each file at most once per call. Caller holds llc_reg_mutex.
 */
unsigned long llc_seq_shrink(unsigned long nr)
{
	unsigned long freed = 0, rounds;
	struct llc_file *f, *pick;

	lockdep_assert_held(&llc_reg_mutex);
	for (rounds = llc.nr_files; freed < nr && rounds; rounds--) {
		pick = NULL;
		list_for_each_entry(f, &llc_files_list, list)
			if (READ_ONCE(f->seq_undropped) && !(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_DROP) &&
			    (!pick || READ_ONCE(f->seq_last_ns) < READ_ONCE(pick->seq_last_ns)))
				pick = f;
		if (!pick)
			break;
		freed += llc_seq_drop_file(pick, true);
	}
	return freed;
}

void llc_seq_exit(void)
{
	cancel_delayed_work_sync(&llc_seq_work);
}
