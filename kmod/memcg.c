// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Pins under a memory cgroup's limit. A pinned page stays charged to the cgroup that read it, and that
 * cgroup's reclaim can neither free it nor reach the module's shrinker (the kernel calls shrinkers that
 * are not memcg-aware for global reclaim only). pin.c therefore lets the files whose pages one cgroup
 * limit binds pin together only what the planner leaves them (llc_memcg_allowance):
 *  - when a process maps them (an mmap engine), the daemon's rule (llc_plan_mapped_budget): nothing
 *    when they fit beside the engine, else the limit less the engine's memory, the code it keeps
 *    (LLC_PLAN_CODE_KEPT), the room its stream needs and a margin of two stream units. The engine's
 *    memory is what the cgroup holds besides page cache (llc_memcg_engine), the most seen since the
 *    cgroup was first met, so that pins left by an engine that exited do not take the room of the next;
 *  - else (read() engines) the daemon's rule for them (llc_plan_read_budget): the limit less the engine's
 *    memory now (not its peak: the release below and the room's regrowth follow it) and three read-ahead
 *    windows. The module does not see an engine's code: what the engine
 *    keeps using of it shares the room of its reads, which the module's drops of passed tails keep
 *    small. (The module gave read() engines half of the limit before.)
 * This file also gives that allowance back when the cgroup needs it: when the engine's own memory (its
 * heap, a KV cache) grows into it, the cgroup's reclaim finds nothing left to free, and the cgroup's OOM
 * killer would take the engine while the module held pages that the engine could have had.
 *
 * Signal: the vmscan tracepoint mm_vmscan_memcg_reclaim_end, which ends every reclaim that a charge
 * over a cgroup's limit (or over memory.high) starts. A reclaim that freed fewer than SWAP_CLUSTER_MAX
 * pages, the least any such reclaim asks for, went through every priority and found nothing left: the
 * streaming part of a loop that does not fit never ends that way, since it is always reclaimable. The
 * tracepoint names no cgroup. The one reclaimed is the current task's or an ancestor whose limit it
 * hit, so the probe presses the nearest of them that binds pins.
 *
 * Action, in two steps. At once, in the probe: up to LLC_MEMCG_NOW pins of that cgroup's files go,
 * the highest blocks of its last planned ranges first (the longest-period loops: Algorithm 1's order),
 * back to the evictable LRU, so that the charge's next reclaim pass (a charge retries reclaim 16 times
 * before it calls the OOM killer) frees them. That step takes only spinlocks, as the probe runs inside
 * the charge; a worker alone, however urgent, started after up to 7 of the 16 retries in runs under
 * TCG and lost the race once in four. Then, in a worker on a high-priority workqueue with a rescuer (it
 * must run while memory is short): the cgroup's room (its allowance at most) drops to half of
 * what the last plan gave its files and the pins beyond it go, so that they do not come back. Pressure
 * that lasts halves the room again at each plan. The room grows back by 1/16 of the allowance per plan
 * once a second has passed without pressure. Releases count in stats/shrinker_released, also
 * when the pin worker's plan is the one that takes the pressure first.
 *
 * The cgroup whose reclaim failed is the current task's or an ancestor's, but for one case: a write of
 * a lower memory.max reclaims in the writer's context, and calls the OOM killer after 16 reclaims that
 * free nothing. When no cgroup of the current task binds pins, the probe presses the cgroups of the
 * table that are over their limit. A reclaim that frees the released pins does not count among those
 * 16, so the release goes on until the cgroup is under its new limit.
 *
 * The probe runs on every memcg reclaim; while no plan binds a cgroup it returns after one load. The
 * table holds LLC_MEMCG_SLOTS cgroups; the pins of files bound by others stay at their allowance
 * without this release. A slot holds a reference to its cgroup's css, dropped when no plan meets the
 * cgroup any more, so that its limit and usage can be read.
 */
#include <linux/backing-dev.h>
#include <linux/memcontrol.h>
#include <linux/swap.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_MEMCG_SLOTS 16
#define LLC_MEMCG_RANGES 4 /* planned ranges per cgroup the probe can release from */
#define LLC_MEMCG_NOW 64   /* pins the probe releases per failed reclaim: a charge batch */
#define LLC_MEMCG_WINDOW 1024 /* blocks; offsets in it fit a u16 */
#define LLC_MEMCG_WINDOWS 16
#define LLC_MEMCG_QUIET_NS NSEC_PER_SEC

/* A planned range of a file bound by the cgroup; top: the probe has released the pins above it. */
struct llc_memcg_range {
	struct address_space *mapping; /* looked up again under RCU: the file may be gone */
	pgoff_t first, top;
};

static struct llc_memcg_slot {
	struct mem_cgroup *memcg;       /* NULL: free; a css reference */
	u64 allowance;                  /* blocks: what the planner left its files at the last plan */
	u64 engine;                     /* blocks: the most llc_memcg_engine() has seen it hold */
	u64 room;                       /* blocks its files may pin now */
	u64 granted;                    /* blocks the last plan gave them */
	u64 window;                     /* blocks read ahead of its mmap engine (stream.c), 0: none */
	u64 pressed_ns;                 /* when its room last shrank */
	bool pressed;                   /* its reclaim found nothing to free since the last plan */
	bool regrow;                    /* quiet for long enough: the plan being computed grows its room */
	bool seen;                      /* met by the plan being computed */
	int nr_ranges;
	struct llc_memcg_range ranges[LLC_MEMCG_RANGES]; /* the last ones in plan order */
} llc_memcg_slots[LLC_MEMCG_SLOTS];
static DEFINE_SPINLOCK(llc_memcg_lock);
static int llc_memcg_bound; /* slots in use; read without the lock by the probe */

static struct workqueue_struct *llc_memcg_wq;
static struct tracepoint *llc_memcg_tp;

/* memcg's slot, or NULL. Caller holds llc_memcg_lock. */
static struct llc_memcg_slot *llc_memcg_slot(const struct mem_cgroup *memcg)
{
	struct llc_memcg_slot *s;

	for (s = llc_memcg_slots; s < llc_memcg_slots + LLC_MEMCG_SLOTS; s++)
		if (s->memcg == memcg)
			return s;
	return NULL;
}

/* n pins went because a cgroup's reclaim found nothing to free. */
void llc_memcg_released(unsigned long n)
{
	unsigned long flags;

	if (!n)
		return;
	spin_lock_irqsave(&llc.lock, flags);
	llc.stats[LLMCACHE_STAT_SHRINKER_RELEASED] += n;
	spin_unlock_irqrestore(&llc.lock, flags);
	pr_info_ratelimited("llmcache: a memory cgroup's reclaim found nothing to free: released %lu pinned blocks\n",
			    n);
}

static void llc_memcg_worker(struct work_struct *w)
{
	llc_memcg_released(llc_pin_trim());
}
static DECLARE_WORK(llc_memcg_work, llc_memcg_worker);

/*
 * Up to LLC_MEMCG_NOW pins of the ranges r[0..n), from the top of the last, looking at no more than
 * LLC_MEMCG_WINDOWS windows of LLC_MEMCG_WINDOW blocks: the probe runs with preemption off, and a
 * planned range can be long and sparsely resident. Caller holds rcu_read_lock(), which keeps the
 * files; llc_unhold() takes only spinlocks.
 */
static unsigned long llc_memcg_release_now(struct llc_memcg_range *r, int n)
{
	u16 found[LLC_MEMCG_NOW]; /* offsets in the window of its highest pins */
	unsigned long released = 0, index;
	int windows = 0, nr, k;
	struct folio *folio;
	struct llc_file *f;
	pgoff_t low;

	while (n-- > 0 && released < LLC_MEMCG_NOW && windows < LLC_MEMCG_WINDOWS) {
		f = llc_file_find_rcu(r[n].mapping);
		while (f && r[n].top > r[n].first && released < LLC_MEMCG_NOW && windows++ < LLC_MEMCG_WINDOWS) {
			low = r[n].top - min_t(pgoff_t, r[n].top - r[n].first, LLC_MEMCG_WINDOW);
			nr = 0;
			xa_for_each_range(&f->pins, index, folio, low, r[n].top - 1)
				found[nr++ % LLC_MEMCG_NOW] = index - low;
			for (k = 1; k <= min(nr, LLC_MEMCG_NOW) && released < LLC_MEMCG_NOW; k++) {
				index = low + found[(nr - k) % LLC_MEMCG_NOW];
				released += llc_unhold(f, false, index);
				r[n].top = index; /* what is above is released */
			}
			if (released < LLC_MEMCG_NOW)
				r[n].top = low;
		}
	}
	return released;
}

static void llc_memcg_reclaimed(void *data, unsigned long nr_reclaimed)
{
	struct llc_memcg_range ranges[LLC_MEMCG_RANGES];
	struct llc_memcg_slot *s = NULL;
	struct mem_cgroup *memcg;
	unsigned long flags;
	int i, n = 0;

	if (nr_reclaimed >= SWAP_CLUSTER_MAX || !READ_ONCE(llc_memcg_bound))
		return;
	rcu_read_lock();
	spin_lock_irqsave(&llc_memcg_lock, flags);
	for (memcg = mem_cgroup_from_task(current); memcg && !s; memcg = parent_mem_cgroup(memcg)) {
		s = llc_memcg_slot(memcg);
		if (s && !s->granted)
			s = NULL;
	}
	for (i = 0; !s && i < LLC_MEMCG_SLOTS; i++) /* a lower memory.max, written from outside */
		if (llc_memcg_slots[i].memcg && llc_memcg_slots[i].granted &&
		    page_counter_read(&llc_memcg_slots[i].memcg->memory) > READ_ONCE(llc_memcg_slots[i].memcg->memory.max))
			s = &llc_memcg_slots[i];
	if (s) {
		s->pressed = true;
		n = s->nr_ranges;
		memcpy(ranges, s->ranges, n * sizeof(*ranges));
	}
	spin_unlock_irqrestore(&llc_memcg_lock, flags);
	if (s) {
		llc_memcg_released(llc_memcg_release_now(ranges, n));
		spin_lock_irqsave(&llc_memcg_lock, flags);
		for (i = 0; i < n && i < s->nr_ranges; i++)
			if (s->ranges[i].mapping == ranges[i].mapping && s->ranges[i].first == ranges[i].first)
				s->ranges[i].top = min(s->ranges[i].top, ranges[i].top);
		spin_unlock_irqrestore(&llc_memcg_lock, flags);
		queue_work(llc_memcg_wq, &llc_memcg_work);
	}
	rcu_read_unlock();
}

/*
 * Before a plan is computed: pressed rooms shrink to half of what the last plan gave, quiet ones are
 * marked to grow back (llc_memcg_allowance), and cgroups the last plan did not meet leave the table. Returns whether a room shrank. Caller
 * holds llc_reg_mutex.
 */
bool llc_memcg_plan_begin(void)
{
	struct llc_memcg_slot *s;
	u64 now = ktime_get_ns();
	bool shrank = false;
	unsigned long flags;
	int bound = 0;

	spin_lock_irqsave(&llc_memcg_lock, flags);
	for (s = llc_memcg_slots; s < llc_memcg_slots + LLC_MEMCG_SLOTS; s++) {
		if (s->memcg && !s->seen) {
			css_put(&s->memcg->css);
			s->memcg = NULL;
		}
		if (!s->memcg)
			continue;
		if (s->pressed) {
			s->room = s->granted / 2;
			s->pressed_ns = now;
			s->pressed = false;
			shrank = true;
		} else {
			s->regrow = now - s->pressed_ns > LLC_MEMCG_QUIET_NS;
		}
		s->seen = false;
		bound++;
	}
	WRITE_ONCE(llc_memcg_bound, bound);
	spin_unlock_irqrestore(&llc_memcg_lock, flags);
	return shrank;
}

/*
 * What memcg holds besides page cache, in blocks: its charge less the file pages on its own LRU lists
 * (the classic lists or MGLRU's generations, whichever the kernel runs, and the unevictable list, where
 * the pins are). That is the engine's anonymous memory and what the kernel holds for it (page tables,
 * slab), all of which the planner counts as the engine's. The charge is hierarchical and the lists are
 * not: a child cgroup's page cache counts as the engine's too, which errs towards fewer pins.
 */
static u64 llc_memcg_engine(struct mem_cgroup *memcg)
{
	unsigned long usage = page_counter_read(&memcg->memory);
	struct mem_cgroup_per_node *mz;
	long file = 0;
	int nid, zone;

	for_each_node(nid) {
		mz = memcg->nodeinfo[nid];
		for (zone = 0; zone < MAX_NR_ZONES; zone++) {
			file += READ_ONCE(mz->lru_zone_size[zone][LRU_INACTIVE_FILE]) +
				READ_ONCE(mz->lru_zone_size[zone][LRU_ACTIVE_FILE]) +
				READ_ONCE(mz->lru_zone_size[zone][LRU_UNEVICTABLE]);
#ifdef CONFIG_LRU_GEN
			{
				int gen;

				for (gen = 0; gen < MAX_NR_GENS; gen++)
					file += READ_ONCE(mz->lruvec.lrugen.nr_pages[gen][LRU_GEN_FILE][zone]);
			}
#endif
		}
	}
	if (file <= 0)
		return usage;
	return usage > file ? usage - file : 0;
}

/* What the planner knows of an engine bound by a limit (blocks) beside engine blocks, in bytes. */
static struct llc_memcg_snapshot llc_memcg_snapshot(u64 limit, u64 engine, u64 unit)
{
	return (struct llc_memcg_snapshot){
		.limit = limit << PAGE_SHIFT,
		.anon = engine << PAGE_SHIFT,
		.code = LLC_PLAN_CODE_KEPT,
		.margin = 2 * unit,
	};
}

/* The stream unit of the files: their devices' read-ahead, a PMD-size folio at least. */
static u64 llc_memcg_unit(const struct llc_memcg_files *files)
{
	return max_t(u64, files->readahead << PAGE_SHIFT, LLC_PLAN_STREAM_UNIT);
}

/* The planner's allowance, in blocks, for files bound by a limit (blocks) beside engine blocks. */
static u64 llc_memcg_plan(u64 limit, u64 engine, const struct llc_memcg_files *files)
{
	u64 unit = llc_memcg_unit(files);
	struct llc_memcg_snapshot m = llc_memcg_snapshot(limit, engine, unit);

	if (!files->mapped) {
		m.code = m.margin = 0;
		return llc_plan_read_budget(U64_MAX, &m, unit) >> PAGE_SHIFT;
	}
	return llc_plan_mapped_budget(U64_MAX, &m, LLC_PLAN_CODE_KEPT, unit, files->mapped_blocks << PAGE_SHIFT) >>
	       PAGE_SHIFT;
}

/*
 * The blocks read ahead of an mmap engine whose files, bound by a limit beside engine blocks, get an
 * allowance: the planner's window, where its stream has the room for it (what the cgroup leaves besides
 * the engine, its code and the margin, as llc_plan_mapped_budget counts it); none for read() engines
 * (the kernel's read-ahead follows their reads) and where the files fit.
 */
static u64 llc_memcg_stream_window(u64 limit, u64 engine, const struct llc_memcg_files *files, u64 allowance)
{
	u64 unit = llc_memcg_unit(files), own;
	struct llc_memcg_snapshot m = llc_memcg_snapshot(limit, engine, unit);

	own = m.anon + m.code + m.margin;
	if (!files->mapped || !allowance ||
	    !llc_plan_read_ahead(unit, m.limit > own ? m.limit - own : 0))
		return 0;
	return llc_plan_window(unit, m.limit) >> PAGE_SHIFT;
}

/*
 * The blocks the files bound by memcg (limited to limit blocks) may pin: the planner's allowance, less
 * while the cgroup is short of memory; the table learns memcg. Caller holds llc_reg_mutex and
 * rcu_read_lock(), which keeps memcg.
 */
u64 llc_memcg_allowance(struct mem_cgroup *memcg, u64 limit, const struct llc_memcg_files *files)
{
	u64 engine = llc_memcg_engine(memcg), allowance;
	struct llc_memcg_slot *s;
	unsigned long flags;

	spin_lock_irqsave(&llc_memcg_lock, flags);
	s = llc_memcg_slot(memcg);
	if (!s) {
		s = llc_memcg_slot(NULL);
		if (!s) { /* the table is full: the planner's allowance, without the pressure release */
			spin_unlock_irqrestore(&llc_memcg_lock, flags);
			return llc_memcg_plan(limit, engine, files);
		}
		css_get(&memcg->css);
		*s = (struct llc_memcg_slot){ .memcg = memcg, .room = U64_MAX };
		WRITE_ONCE(llc_memcg_bound, llc_memcg_bound + 1);
	}
	s->engine = max(s->engine, engine);
	/* An mmap engine's peak: the next one starts where it did. A read() engine's pins follow its memory. */
	s->allowance = llc_memcg_plan(limit, files->mapped ? s->engine : engine, files);
	s->window = llc_memcg_stream_window(limit, s->engine, files, s->allowance);
	/* Towards this plan's allowance, not the last one's: a read() engine's may have been none. */
	if (s->regrow && s->room < s->allowance)
		s->room = min(s->allowance, s->room + max_t(u64, s->allowance / 16, 1));
	s->regrow = false;
	s->room = min(s->room, s->allowance);
	s->seen = true;
	s->nr_ranges = 0;
	allowance = s->room;
	spin_unlock_irqrestore(&llc_memcg_lock, flags);
	return allowance;
}

/* What the plan being computed gives the files bound by memcg. Caller holds llc_reg_mutex. */
void llc_memcg_granted(const struct mem_cgroup *memcg, u64 blocks)
{
	struct llc_memcg_slot *s;
	unsigned long flags;

	spin_lock_irqsave(&llc_memcg_lock, flags);
	s = llc_memcg_slot(memcg);
	if (s)
		s->granted = blocks;
	spin_unlock_irqrestore(&llc_memcg_lock, flags);
}

/* A range [first, first + count) of f that the plan being computed pins under memcg. */
void llc_memcg_range(const struct mem_cgroup *memcg, struct llc_file *f, pgoff_t first, u64 count)
{
	struct llc_memcg_slot *s;
	unsigned long flags;

	spin_lock_irqsave(&llc_memcg_lock, flags);
	s = llc_memcg_slot(memcg);
	if (s) {
		if (s->nr_ranges == LLC_MEMCG_RANGES)
			memmove(s->ranges, s->ranges + 1, --s->nr_ranges * sizeof(*s->ranges));
		s->ranges[s->nr_ranges++] = (struct llc_memcg_range){ f->mapping, first, first + count };
	}
	spin_unlock_irqrestore(&llc_memcg_lock, flags);
}

/* The blocks read ahead of memcg's mmap engine, as its last plan found them; none while its pressure
 * keeps the pins below the allowance. */
u64 llc_memcg_window(const struct mem_cgroup *memcg)
{
	struct llc_memcg_slot *s;
	unsigned long flags;
	u64 window = 0;

	spin_lock_irqsave(&llc_memcg_lock, flags);
	s = llc_memcg_slot(memcg);
	if (s && s->room >= s->allowance)
		window = s->window;
	spin_unlock_irqrestore(&llc_memcg_lock, flags);
	return window;
}

static void llc_memcg_lookup(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "mm_vmscan_memcg_reclaim_end"))
		llc_memcg_tp = tp;
}

int llc_memcg_init(void)
{
	int err;

	if (mem_cgroup_disabled())
		return 0;
	for_each_kernel_tracepoint(llc_memcg_lookup, NULL);
	if (!llc_memcg_tp) {
		pr_warn("llmcache: no vmscan:mm_vmscan_memcg_reclaim_end tracepoint: pins stay at half a memory cgroup's limit, and its pressure cannot release them\n");
		return 0;
	}
	llc_memcg_wq = alloc_workqueue("llmcache_memcg", WQ_HIGHPRI | WQ_MEM_RECLAIM, 1);
	if (!llc_memcg_wq)
		return -ENOMEM;
	err = tracepoint_probe_register(llc_memcg_tp, llc_memcg_reclaimed, NULL);
	if (err) {
		destroy_workqueue(llc_memcg_wq);
		llc_memcg_wq = NULL;
	}
	return err;
}

/* Before the pin worker goes: the probe queues work that takes pins. */
void llc_memcg_exit(void)
{
	if (!llc_memcg_wq)
		return;
	tracepoint_probe_unregister(llc_memcg_tp, llc_memcg_reclaimed, NULL);
	tracepoint_synchronize_unregister();
	destroy_workqueue(llc_memcg_wq); /* runs what is queued */
	llc_memcg_wq = NULL;
}

/* Once no plan can run any more: the table's references to its cgroups go. */
void llc_memcg_forget(void)
{
	struct llc_memcg_slot *s;

	for (s = llc_memcg_slots; s < llc_memcg_slots + LLC_MEMCG_SLOTS; s++)
		if (s->memcg) {
			css_put(&s->memcg->css);
			s->memcg = NULL;
		}
	llc_memcg_bound = 0;
}
