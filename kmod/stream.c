// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The stream of an mmap engine, read ahead of it. When the pin plan pins only the head of a mapped
 * file's loop under a memory cgroup's limit, the engine reads the rest at every iteration through its
 * own faults: the disk idles while the engine computes on the pinned head, and each fault waits for
 * its read-around. The module follows the engine instead, as the daemon does (the planner's functions,
 * libllmcache/core/plan.h):
 *  - llc_stream_plan(), after each pin plan: which files are read ahead, the loop (a head file's is
 *    the file), its pinned head and the window (llc_plan_window), only where the stream has the room
 *    for it (llc_plan_read_ahead, through memcg.c's llc_memcg_window);
 *  - the hooks move the engine's position at each LOOP access, and at each access of a head file
 *    (llc_plan_position; its threads, a fraction of a window apart, do not move it back);
 *  - a worker reads the window after the position that was not asked for yet (llc_plan_prefetch, which
 *    wraps round to the next iteration's first unpinned blocks while the engine is on the head) with the
 *    kernel's read-ahead (vfs_fadvise(POSIX_FADV_WILLNEED): the I/O is submitted, not waited for), under
 *    set_active_memcg(), so that the pages are charged to the engine's cgroup as its own faults' are;
 *  - and drops what the engine passed (llc_plan_passed: two stream units behind its position, as its
 *    threads work up to a tensor apart, in 2 MiB runs), unmapped first. Left to the cgroup's reclaim,
 *    the passed pages, mapped and young, would be kept over the window read ahead, unmapped and not used
 *    yet, which reclaim then takes and the engine reads again.
 * The worker holds a reference to the file and the cgroup, not llc_reg_mutex, while it reads and drops:
 * the read-ahead can reclaim in the engine's cgroup, and that reclaim may need the pin worker or
 * memcg.c to let pins go.
 */
#include <linux/fadvise.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/sched/mm.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_STREAM_SPANS 8 /* a window of a head loop is one or two spans */
#define LLC_STREAM_FILES 8 /* files read ahead per worker run; the rest at the next access */
#define LLC_STREAM_DROP_ALIGN 512 /* blocks: what the engine passed goes 2 MiB at a time */

static void llc_stream_worker(struct work_struct *w);
static DECLARE_WORK(llc_stream_work, llc_stream_worker);

/* Stop reading f ahead (and let its cgroup go). Caller holds llc_reg_mutex. */
void llc_stream_forget(struct llc_file *f)
{
	struct mem_cgroup *memcg = f->stream.memcg;
	unsigned long flags;

	if (!memcg)
		return;
	spin_lock_irqsave(&llc.lock, flags);
	f->stream.memcg = NULL;
	spin_unlock_irqrestore(&llc.lock, flags);
	css_put(&memcg->css);
}

/*
 * Follow the plan plan[0..n) that the pins now follow: each mapped file whose first planned range pins
 * less than its loop (a head file's loop is the whole file, as the engine reads it from its first pass),
 * under a cgroup whose stream has its room, is read ahead; every other file is not. Caller holds
 * llc_reg_mutex.
 */
void llc_stream_plan(const struct llc_pin_range *plan, u32 n)
{
	const struct llc_pin_range *r;
	struct mem_cgroup *memcg;
	const struct llc_seq *s;
	unsigned long flags;
	struct llc_file *f;
	u64 lo, hi, window, limit;
	u32 i;

	lockdep_assert_held(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list) {
		for (i = 0; i < n && plan[i].file != f->id; i++)
			;
		r = i < n ? &plan[i] : NULL;
		memcg = NULL;
		window = 0;
		lo = hi = 0;
		if (r && f->head && !(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_READ_AHEAD)) {
			hi = DIV_ROUND_UP(i_size_read(f->mapping->host), PAGE_SIZE); /* the whole file, from its first fault */
		} else if (r && mapping_mapped(f->mapping) && !(READ_ONCE(f->flags) & LLMCACHE_FILE_NO_READ_AHEAD)) {
			spin_lock_irqsave(&llc.lock, flags);
			s = llc_seq_get(llc.core, r->seq);
			if (s && s->file == f->id && s->cls == LLMCACHE_CLASS_LOOP) {
				lo = s->start;
				hi = s->end + 1;
			}
			spin_unlock_irqrestore(&llc.lock, flags);
		}
		if (r && hi > lo && r->first == lo && r->count < hi - lo) {
			rcu_read_lock();
			memcg = llc_limiting_memcg(f, r->first, r->count, &limit);
			window = memcg ? llc_memcg_window(memcg) : 0;
			if (window && memcg != f->stream.memcg && !css_tryget(&memcg->css))
				window = 0;
			rcu_read_unlock();
		}
		if (!window) {
			llc_stream_forget(f);
			continue;
		}
		if (f->stream.memcg && f->stream.memcg != memcg)
			llc_stream_forget(f);
		spin_lock_irqsave(&llc.lock, flags);
		if (!f->stream.memcg || f->stream.lo != lo || f->stream.hi != hi) {
			f->stream.position = U64_MAX;
			f->stream.asked_to = hi;
			f->stream.dropped_to = hi;
		}
		f->stream.memcg = memcg; /* the reference taken above, or the one it held */
		f->stream.lo = lo;
		f->stream.hi = hi;
		f->stream.head = r->count;
		f->stream.window = window;
		f->stream.lag = 2 * (max_t(u64, f->mapping->host->i_sb->s_bdi->ra_pages << PAGE_SHIFT,
					   LLC_PLAN_STREAM_UNIT) >> PAGE_SHIFT);
		spin_unlock_irqrestore(&llc.lock, flags);
	}
}

/*
 * A LOOP access of f's blocks up to last: move the engine's position. Returns true when the worker
 * should look at f. Caller holds llc.lock.
 */
bool llc_stream_note(struct llc_file *f, u64 last)
{
	struct llc_stream *st = &f->stream;
	struct llc_span head;
	u64 was = st->position;

	if (!st->memcg || last < st->lo || last >= st->hi)
		return false;
	head = (struct llc_span){ st->lo, st->head };
	st->position = llc_plan_position(st->lo, st->hi, &head, 1, st->position, last, st->window);
	return st->position != was;
}

void llc_stream_kick(void)
{
	queue_work(system_unbound_wq, &llc_stream_work);
}

struct llc_stream_todo {
	struct file *file;
	struct mem_cgroup *memcg;
	u32 nr_read, nr_passed;
	struct llc_span read[LLC_STREAM_SPANS], passed[LLC_STREAM_SPANS];
};

/* Drop the pages of the spans the engine passed, unmapped first; returns the pages dropped. */
static unsigned long llc_stream_drop(struct address_space *mapping, const struct llc_span *spans, u32 n)
{
	unsigned long dropped = 0;
	u32 k;

	for (k = 0; k < n; k++) {
		unmap_mapping_pages(mapping, spans[k].first, spans[k].count, false);
		dropped += invalidate_mapping_pages(mapping, spans[k].first, spans[k].first + spans[k].count - 1);
	}
	return dropped;
}

static void llc_stream_worker(struct work_struct *w)
{
	static struct llc_stream_todo todo[LLC_STREAM_FILES]; /* only this worker, which does not run twice at once */
	unsigned long flags, dropped = 0;
	struct mem_cgroup *old;
	struct llc_span head;
	struct llc_file *f;
	u64 blocks = 0;
	u32 nr = 0, i, k;

	mutex_lock(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list) {
		struct llc_stream *st = &f->stream;

		if (nr == LLC_STREAM_FILES)
			break;
		if (!st->memcg || !READ_ONCE(llc.enabled) || (READ_ONCE(f->flags) & LLMCACHE_FILE_NO_READ_AHEAD))
			continue;
		todo[nr].nr_read = todo[nr].nr_passed = 0;
		spin_lock_irqsave(&llc.lock, flags);
		head = (struct llc_span){ st->lo, st->head };
		if (st->position != U64_MAX) {
			todo[nr].nr_read = llc_plan_prefetch(st->lo, st->hi, &head, 1, st->position, st->window,
							     &st->asked_to, todo[nr].read, LLC_STREAM_SPANS);
			todo[nr].nr_passed = llc_plan_passed(st->lo, st->hi, &head, 1, st->position, st->lag,
							     LLC_STREAM_DROP_ALIGN, &st->dropped_to, todo[nr].passed,
							     LLC_STREAM_SPANS);
		}
		spin_unlock_irqrestore(&llc.lock, flags);
		if (!todo[nr].nr_read && !todo[nr].nr_passed)
			continue;
		todo[nr].file = get_file(f->file);
		css_get(&st->memcg->css);
		todo[nr++].memcg = st->memcg;
	}
	mutex_unlock(&llc_reg_mutex);

	for (i = 0; i < nr; i++) {
		dropped += llc_stream_drop(todo[i].file->f_mapping, todo[i].passed, todo[i].nr_passed);
		old = set_active_memcg(todo[i].memcg);
		for (k = 0; k < todo[i].nr_read; k++) {
			vfs_fadvise(todo[i].file, (loff_t)todo[i].read[k].first << PAGE_SHIFT,
				    (loff_t)todo[i].read[k].count << PAGE_SHIFT, POSIX_FADV_WILLNEED);
			blocks += todo[i].read[k].count;
		}
		set_active_memcg(old);
		css_put(&todo[i].memcg->css);
		fput(todo[i].file);
	}
	if (blocks || dropped) {
		spin_lock_irqsave(&llc.lock, flags);
		llc.stats[LLMCACHE_STAT_LOOP_READ_AHEAD] += blocks;
		llc.stats[LLMCACHE_STAT_LOOP_DROPPED] += dropped;
		spin_unlock_irqrestore(&llc.lock, flags);
	}
}

/* Once the hooks are gone, the files unregistered and the pin worker stopped. */
void llc_stream_exit(void)
{
	cancel_work_sync(&llc_stream_work);
}
