// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Loop pinning. A pinned block is a page-cache folio the module holds an extra reference to: reclaim
 * cannot free a folio with an extra reference, so the block stays resident. A worker applies the core's
 * pin plan (loops by increasing period, each from its lowest block up, within pin_budget); it runs when
 * a loop starts or restarts, when a planned file gains pages and when pin_budget changes. Each file's
 * part of the plan is cut to its pin_limit; files flagged LLMCACHE_FILE_NO_PIN (and files no longer
 * registered) are left out. What is cut goes to the next loops. The pins of a mapped file that has a
 * loop are sticky where only pin_budget bounds them, as the daemon's are (llc_plan_pins): they stay
 * while the budget holds, and the plan's other blocks take what is left.
 *
 * Incremental: the worker remembers the plan it applied. A range found in both plans (same file, same
 * first block) is not walked again: only its growth and the pages its file gained since the last run
 * (the add hook records them in todo_first..todo_last) are pinned, and pins are dropped only from the
 * part of a range that shrank or left the plan. A loop iteration that leaves the plan as it was costs
 * O(plan ranges), not a lookup per pinned block.
 *
 * Pins never push the machine into OOM: the shrinker (shrink.c) releases them through llc_pin_shrink()
 * by capping the budget (the plan for a smaller budget is contained in the larger one's, so the highest
 * blocks of the longest-period loops go first); the cap grows back by 1/16 of the budget per run.
 * Nor into a memory cgroup's OOM: pinned pages stay charged to the cgroup that read them, and that
 * cgroup's reclaim cannot free them (nor reach a shrinker that is not memcg-aware), so the files whose
 * pages one cgroup limit binds get together what the planner leaves them beside the engine, taken when
 * the plan is cut (llc_plan_clamp), and give pins back when the engine's own memory grows into theirs
 * (memcg.c).
 * HOT protection (hot.c) holds folios the same way, in a second xarray per file.
 *
 * Held folios are also marked mlocked, as mlock() marks them (with NR_MLOCK accounted the same way).
 * A reference alone keeps a folio resident but leaves it on the file LRU lists: reclaim then finds it
 * on every pass, unmaps it from mmap users (the rmap walk, TLB flushes and the minor faults that
 * follow), fails to free it and puts it back, which made mmap engines slower with pins than without.
 * A mlocked folio is moved to the unevictable list the first time reclaim meets it and is not scanned
 * again. When the module lets go it clears the mark and asks check_move_unevictable_folios() to put
 * the folio back on an evictable list. The mark is the mlock bit itself, so a folio some process also
 * mlocked loses its bit when the module lets go; reclaim sets it again on its next pass, when it finds
 * the VM_LOCKED mapping (the kernel's own recovery for a stale bit). A folio that leaves the page
 * cache while marked is cleared by the page allocator when it is freed.
 * Marked mlocked, held folios would leave MemAvailable, and an engine that checks it before it
 * allocates (node-llama-cpp) would be refused for room the shrinker gives back on demand: each held
 * page is counted as reclaimable by a shrinker (NR_KERNEL_MISC_RECLAIMABLE, KReclaimable in meminfo),
 * which MemAvailable counts in. Until reclaim has met a held folio it is still on a file LRU list too,
 * and MemAvailable counts it twice meanwhile: room that is there on demand either way.
 *
 * Blocks are 4 KiB and so are pages on the kernels this module supports: a block number is a page index.
 */
#include <linux/memcontrol.h>
#include <linux/pagemap.h>
#include <linux/pagevec.h>
#include <linux/swap.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include "internal.h"

static struct llc_pin_range llc_plan[LLC_PLAN_MAX]; /* under llc_reg_mutex */
static struct llc_pin_range llc_prev[LLC_PLAN_MAX]; /* the plan the pins follow now */
static u32 llc_prev_n;
/*
 * What the plan may pin under each memory cgroup limit met, and what is left of it, while it is
 * cut; under llc_reg_mutex.
 */
static struct llc_memcg_room {
	struct mem_cgroup *memcg;
	u64 room, left;
} llc_memcg_room[LLC_PLAN_MAX];
static u64 llc_cap = U64_MAX;                        /* blocks; lowered by the shrinker */
static bool llc_plan_squeezed; /* the last plan shrank a memory cgroup's room (memcg.c); llc_reg_mutex */
static void llc_pin_worker(struct work_struct *w);
static DECLARE_WORK(llc_pin_work, llc_pin_worker);

struct llc_file *llc_file_by_id(u64 id)
{
	struct llc_file *f;

	lockdep_assert_held(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list)
		if (f->id == id)
			return f;
	return NULL;
}

/* Caller holds llc.hold_lock. */
static void llc_held_count(struct llc_file *f, bool hot, long delta)
{
	if (hot) {
		f->hot_protected += delta;
		llc.stats[LLMCACHE_STAT_HOT_PROTECTED] += delta;
	} else {
		f->pinned += delta;
		llc.stats[LLMCACHE_STAT_PINNED] += delta;
	}
}

static void llc_held_changed(struct llc_file *f, bool hot, long delta)
{
	unsigned long flags;

	spin_lock_irqsave(&llc.hold_lock, flags);
	llc_held_count(f, hot, delta);
	spin_unlock_irqrestore(&llc.hold_lock, flags);
}

/*
 * What the module holds is reclaimable through its shrinker: counted as such (KReclaimable), so that
 * MemAvailable still offers it to an engine that checks before it allocates (one page per held index).
 */
static void llc_count_reclaimable(struct folio *folio, long delta)
{
	mod_node_page_state(folio_pgdat(folio), NR_KERNEL_MISC_RECLAIMABLE, delta);
}

static void llc_mark_unevictable(struct folio *folio)
{
	if (!folio_test_set_mlocked(folio))
		zone_stat_mod_folio(folio, NR_MLOCK, folio_nr_pages(folio));
}

/* Process context only: check_move_unevictable_folios() takes the LRU lock with interrupts enabled. */
static void llc_clear_unevictable(struct folio *folio)
{
	struct folio_batch batch;

	if (!folio_test_clear_mlocked(folio))
		return;
	zone_stat_mod_folio(folio, NR_MLOCK, -folio_nr_pages(folio));
	folio_batch_init(&batch);
	folio_batch_add(&batch, folio);
	check_move_unevictable_folios(&batch);
}

/* Hold a reference to the resident folio at f's page index (a pin, or HOT protection). */
bool llc_hold(struct llc_file *f, bool hot, pgoff_t index)
{
	struct xarray *xa = hot ? &f->hot : &f->pins;
	struct folio *folio;
	bool held = true;

	if (xa_load(xa, index))
		return true;
	folio = filemap_get_folio(f->mapping, index);
	if (IS_ERR_OR_NULL(folio))
		return false;
	/*
	 * Once in the xarray, the reference taken above belongs to whoever erases the entry: the removal
	 * hook (truncation) may put it at any moment, and the folio may then be freed. A second reference
	 * keeps it alive while it is marked and checked here.
	 */
	folio_get(folio);
	llc_held_changed(f, hot, 1); /* before the hook can count it out */
	llc_count_reclaimable(folio, 1);
	if (xa_insert_irq(xa, index, folio, GFP_KERNEL | __GFP_NORETRY | __GFP_NOWARN)) {
		llc_count_reclaimable(folio, -1);
		llc_held_changed(f, hot, -1);
		folio_put(folio);
		folio_put(folio);
		return false;
	}
	llc_mark_unevictable(folio);
	/* Removed from the page cache meanwhile: the removal hook may have missed this reference. */
	if (READ_ONCE(folio->mapping) != f->mapping) {
		llc_unhold(f, hot, index);
		held = false;
	}
	folio_put(folio);
	return held;
}

/* Drop the reference on f's page index, if this caller is the one that takes it out. */
bool llc_unhold(struct llc_file *f, bool hot, pgoff_t index)
{
	struct folio *folio = xa_erase_irq(hot ? &f->hot : &f->pins, index);

	if (!folio)
		return false;
	llc_clear_unevictable(folio);
	llc_count_reclaimable(folio, -1);
	folio_put(folio);
	llc_held_changed(f, hot, -1);
	return true;
}

/* Everything f holds goes (unregistration, unload). Caller holds llc_reg_mutex. */
void llc_unpin_all(struct llc_file *f)
{
	struct folio *folio;
	unsigned long index, flags;

	xa_for_each(&f->pins, index, folio)
		llc_unhold(f, false, index);
	xa_for_each(&f->hot, index, folio)
		llc_unhold(f, true, index);
	spin_lock_irqsave(&llc.lock, flags);
	llc.seq_undropped -= f->seq_undropped;
	f->seq_undropped = 0;
	spin_unlock_irqrestore(&llc.lock, flags);
}

/*
 * A page of a registered file left the page cache (truncation): what the module held on it goes. Its
 * mlock mark stays until the folio is freed (interrupts are off here, see llc_clear_unevictable()).
 * Caller holds llc.hold_lock.
 */
void llc_pin_removed(struct llc_file *f, struct folio *folio)
{
	pgoff_t index, end = folio->index + folio_nr_pages(folio);
	struct folio *old;
	int hot;

	for (hot = 0; hot < 2; hot++) {
		struct xarray *xa = hot ? &f->hot : &f->pins;

		if (xa_empty(xa))
			continue;
		for (index = folio->index; index < end; index++) {
			old = xa_erase(xa, index); /* interrupts are off: the page cache's lock is held */
			if (old) {
				llc_count_reclaimable(old, -1);
				folio_put(old); /* the page cache still holds its own reference */
				llc_held_count(f, hot, -1);
			}
		}
	}
}

/* Blocks of file id the plan may pin: none for a NO_PIN file, else its pin_limit (0: no limit). */
static u64 llc_pin_allowance(u64 id)
{
	struct llc_file *f = llc_file_by_id(id);
	u64 limit;

	if (!f || (READ_ONCE(f->flags) & LLMCACHE_FILE_NO_PIN))
		return 0;
	limit = READ_ONCE(f->pin_limit) >> LLMCACHE_BLOCK_SHIFT;
	return limit ? limit : U64_MAX;
}

/* A reference to the first resident folio of f in [index, end), looking at 64 entries at most. */
static struct folio *llc_resident_from(struct llc_file *f, pgoff_t index, pgoff_t end)
{
	XA_STATE(xas, &f->mapping->i_pages, index);
	struct folio *folio;
	void *entry;
	int tries = 0;

	rcu_read_lock();
	xas_for_each(&xas, entry, end - 1) {
		if (xas_retry(&xas, entry))
			continue;
		if (++tries > 64)
			break;
		if (xa_is_value(entry)) /* the shadow of an evicted page */
			continue;
		index = xas.xa_index;
		rcu_read_unlock();
		folio = filemap_get_folio(f->mapping, index);
		return IS_ERR(folio) ? NULL : folio;
	}
	rcu_read_unlock();
	return NULL;
}

/*
 * The memory cgroup whose limit binds the pages of f's blocks [first, first + count), or NULL when no
 * limit does: the lowest limit among the cgroups (and their ancestors) of 16 resident pages spread over
 * the range, since pages read by an engine under a limit sit beside a few read by others (the writer,
 * a page cache drop's leftovers). *limit gets that limit in blocks. Caller holds rcu_read_lock(), which
 * keeps the cgroup.
 */
struct mem_cgroup *llc_limiting_memcg(struct llc_file *f, pgoff_t first, u64 count, u64 *limit)
{
	struct mem_cgroup *memcg, *binding = NULL;
	unsigned long max = PAGE_COUNTER_MAX;
	struct folio *folio;
	int k;

	if (mem_cgroup_disabled())
		return NULL;
	for (k = 0; k < 16; k++) {
		folio = llc_resident_from(f, first + div_u64(count * k, 16), first + count);
		if (!folio)
			continue;
		for (memcg = folio_memcg(folio); memcg; memcg = parent_mem_cgroup(memcg))
			if (READ_ONCE(memcg->memory.max) < max) {
				max = READ_ONCE(memcg->memory.max);
				binding = memcg;
			}
		folio_put(folio);
	}
	*limit = max;
	return binding;
}

/*
 * The files of ranges[0, n) that memcg's limit binds (memcg_of[]), as the planner counts them: the blocks
 * of those that are mapped, the largest read-ahead among them (in blocks), and whether any is mapped. A
 * file counts once however many of its ranges there are.
 */
static void llc_memcg_files(const struct llc_pin_range *ranges, struct mem_cgroup *const *memcg_of, u32 n,
			    const struct mem_cgroup *memcg, struct llc_memcg_files *files)
{
	struct llc_file *f;
	u32 i, j;

	*files = (struct llc_memcg_files){ 0 };
	for (i = 0; i < n; i++) {
		if (memcg_of[i] != memcg)
			continue;
		for (j = 0; j < i && !(memcg_of[j] == memcg && ranges[j].file == ranges[i].file); j++)
			;
		f = llc_file_by_id(ranges[i].file);
		if (j < i || !f)
			continue;
		files->readahead = max_t(u64, files->readahead, READ_ONCE(f->mapping->host->i_sb->s_bdi->ra_pages));
		if (mapping_mapped(f->mapping)) {
			files->mapped = true;
			files->mapped_blocks += DIV_ROUND_UP(i_size_read(f->mapping->host), PAGE_SIZE);
		}
	}
}

/*
 * The heads of the mapped files that memory cgroup limits bind, as the daemon plans them
 * (llc_plan_heads): per cgroup, in the order its files were registered, those larger than what the
 * planner allows them (none where they fit beside the engine), from their first block, within budget.
 * The cgroup of a file is found from its resident pages, so its head is planned from the engine's
 * first fault (main.c kicks the worker then). Writes them to llc_plan[0..), marks their files as heads,
 * and returns how many; *taken gets their blocks.
 */
static u32 llc_plan_mapped_heads(u64 budget, u64 *taken)
{
	static struct mem_cgroup *memcg_of[LLC_PLAN_MAX]; /* under llc_reg_mutex */
	static struct llc_pin_range files[LLC_PLAN_MAX], group[LLC_PLAN_MAX];
	static u64 limit_of[LLC_PLAN_MAX];
	struct llc_memcg_files bound;
	u32 n = 0, nr_heads = 0, i, j, k, nr_group;
	u64 allowance, blocks;
	struct llc_file *f;

	*taken = 0;
	rcu_read_lock();
	list_for_each_entry(f, &llc_files_list, list) {
		WRITE_ONCE(f->head, false);
		if (n == LLC_PLAN_MAX || !mapping_mapped(f->mapping) || !llc_pin_allowance(f->id))
			continue;
		blocks = DIV_ROUND_UP(i_size_read(f->mapping->host), PAGE_SIZE);
		memcg_of[n] = llc_limiting_memcg(f, 0, blocks, &limit_of[n]);
		if (memcg_of[n])
			files[n++] = (struct llc_pin_range){ .file = f->id, .first = 0, .count = blocks };
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && memcg_of[j] != memcg_of[i]; j++)
			;
		if (j < i) /* its cgroup's files were planned with the first of them */
			continue;
		for (k = i, nr_group = 0; k < n; k++)
			if (memcg_of[k] == memcg_of[i])
				group[nr_group++] = files[k];
		llc_memcg_files(files, memcg_of, n, memcg_of[i], &bound);
		allowance = min(llc_memcg_allowance(memcg_of[i], limit_of[i], &bound), budget - *taken);
		if (!allowance) /* they fit beside the engine, or nothing is left */
			continue;
		k = llc_plan_heads(group, nr_group, allowance, llc_plan + nr_heads, LLC_PLAN_MAX - nr_heads);
		for (j = nr_heads; j < nr_heads + k; j++) {
			WRITE_ONCE(llc_file_by_id(llc_plan[j].file)->head, true);
			*taken += llc_plan[j].count;
		}
		nr_heads += k;
	}
	rcu_read_unlock();
	return nr_heads;
}

/*
 * Cut each file's ranges, in plan order, to its allowance, and the ranges of the files whose pages one
 * memory cgroup limit binds to what the planner leaves them beside the engine (memcg.c), or less while
 * the cgroup is short of memory. Returns the blocks cut.
 */
static u64 llc_plan_clamp(u32 n)
{
	static struct mem_cgroup *memcg_of[LLC_PLAN_MAX]; /* under llc_reg_mutex */
	static u64 limit_of[LLC_PLAN_MAX];
	struct llc_memcg_room *room = llc_memcg_room;
	struct llc_memcg_files files;
	u32 i, j, nr_room = 0;
	struct mem_cgroup *memcg;
	u64 cut = 0, left, allowed;
	struct llc_file *f;

	rcu_read_lock();
	for (i = 0; i < n; i++) {
		f = llc_file_by_id(llc_plan[i].file);
		memcg_of[i] = f ? llc_limiting_memcg(f, llc_plan[i].first, llc_plan[i].count, &limit_of[i]) : NULL;
	}
	for (i = 0; i < n; i++) {
		left = llc_pin_allowance(llc_plan[i].file);
		for (j = 0; j < i && left; j++)
			if (llc_plan[j].file == llc_plan[i].file)
				left -= min(left, llc_plan[j].count);
		memcg = memcg_of[i];
		if (memcg) {
			for (j = 0; j < nr_room && room[j].memcg != memcg; j++)
				;
			if (j == nr_room) {
				llc_memcg_files(llc_plan, memcg_of, n, memcg, &files);
				allowed = llc_memcg_allowance(memcg, limit_of[i], &files);
				room[nr_room++] = (struct llc_memcg_room){ memcg, allowed, allowed };
			}
			left = min(left, room[j].left);
			room[j].left -= min(room[j].left, min(left, llc_plan[i].count));
		}
		if (llc_plan[i].count > left) {
			cut += llc_plan[i].count - left;
			llc_plan[i].count = left;
		}
		if (memcg && llc_plan[i].count)
			llc_memcg_range(memcg, llc_file_by_id(llc_plan[i].file), llc_plan[i].first, llc_plan[i].count);
	}
	for (j = 0; j < nr_room; j++)
		llc_memcg_granted(room[j].memcg, room[j].room - room[j].left);
	rcu_read_unlock();
	return cut;
}

/*
 * The plan for budget blocks: the heads of the mapped files that memory cgroup limits bind, then the
 * core's plan for the other files, each file cut to its allowance (pin_limit, NO_PIN). The blocks cut
 * are added to the budget until the plan is stable, so that the budget goes to the next loops and the
 * plan's pinnable part never exceeds budget (what is cut grows with the budget).
 */
static u32 llc_plan_compute(u64 budget)
{
	u64 cut = 0, extra, taken;
	unsigned long flags;
	struct llc_file *f;
	u32 n = 0, heads, i, j, round;

	llc_plan_squeezed = llc_memcg_plan_begin();
	for (round = 0; budget && round < 8; round++) {
		heads = llc_plan_mapped_heads(budget + cut, &taken);
		spin_lock_irqsave(&llc.lock, flags);
		n = heads + llc_pin_plan(llc.core, budget + cut - taken, llc_plan + heads, LLC_PLAN_MAX - heads);
		spin_unlock_irqrestore(&llc.lock, flags);
		for (i = j = heads; i < n; i++) { /* a head file's loops are its head */
			f = llc_file_by_id(llc_plan[i].file);
			if (!f || !f->head)
				llc_plan[j++] = llc_plan[i];
		}
		n = j;
		extra = llc_plan_clamp(n);
		if (extra == cut)
			break;
		cut = extra;
	}
	for (i = j = 0; i < n; i++)
		if (llc_plan[i].count)
			llc_plan[j++] = llc_plan[i];
	return j;
}

/* Whether file id has a LOOP sequence. */
static bool llc_file_looping(u64 id)
{
	unsigned long flags;
	bool looping = false;
	u16 seq;

	spin_lock_irqsave(&llc.lock, flags);
	for (seq = llc_first(llc.core, LLMCACHE_CLASS_LOOP); seq && !looping; seq = llc_next(llc.core, seq))
		looping = llc_seq_get(llc.core, seq)->file == id;
	spin_unlock_irqrestore(&llc.lock, flags);
	return looping;
}

/*
 * Keep the pins of mapped files that have a loop beside the new plan llc_plan[0..n) (llc_plan_pins):
 * the ranges of the plan the pins follow now, where only the pin budget bounds their file (no
 * pin_limit, not NO_PIN, no memory cgroup limit). Files read with read() follow the plan exactly.
 * Rewrites llc_plan; returns its length.
 */
static u32 llc_pin_keep(u32 n, u64 budget)
{
	static struct llc_pin_range kept[LLC_PLAN_MAX], plan[LLC_PLAN_MAX]; /* under llc_reg_mutex */
	const struct llc_pin_range *o;
	struct mem_cgroup *memcg;
	struct llc_file *f;
	u32 i, nr_kept = 0;
	u64 limit;

	for (i = 0; i < llc_prev_n; i++) {
		o = &llc_prev[i];
		f = llc_file_by_id(o->file);
		if (!f || !mapping_mapped(f->mapping) || llc_pin_allowance(o->file) != U64_MAX ||
		    !llc_file_looping(o->file))
			continue;
		rcu_read_lock();
		memcg = llc_limiting_memcg(f, o->first, o->count, &limit);
		rcu_read_unlock();
		if (!memcg)
			kept[nr_kept++] = *o;
	}
	memcpy(plan, llc_plan, n * sizeof(*plan));
	return llc_plan_pins(kept, nr_kept, plan, n, budget, llc_plan, LLC_PLAN_MAX);
}

static bool llc_planned(u32 n, u64 id, pgoff_t index)
{
	u32 i;

	for (i = 0; i < n; i++)
		if (llc_plan[i].file == id && index >= llc_plan[i].first &&
		    index < llc_plan[i].first + llc_plan[i].count)
			return true;
	return false;
}

static const struct llc_pin_range *llc_range_find(const struct llc_pin_range *p, u32 n,
						  const struct llc_pin_range *r)
{
	u32 i;

	for (i = 0; i < n; i++)
		if (p[i].file == r->file && p[i].first == r->first)
			return &p[i];
	return NULL;
}

/* Drop f's pins on pages [a, b) that the new plan (llc_plan[0..n)) does not cover. */
static unsigned long llc_unpin_range(struct llc_file *f, u32 n, pgoff_t a, pgoff_t b)
{
	unsigned long index, released = 0;
	struct folio *folio;

	if (a >= b)
		return 0;
	xa_for_each_range(&f->pins, index, folio, a, b - 1)
		if (!llc_planned(n, f->id, index) && llc_unhold(f, false, index))
			released++;
	return released;
}

static void llc_pin_pages(struct llc_file *f, pgoff_t a, pgoff_t b)
{
	for (; a < b; a++) {
		llc_hold(f, false, a);
		cond_resched();
	}
}

/*
 * Make the pins follow the plan for budget blocks; with release_only, only drop pins. Returns the pins
 * dropped. Caller holds llc_reg_mutex.
 */
static unsigned long llc_pin_apply(u64 budget, bool release_only)
{
	const struct llc_pin_range *o, *r;
	unsigned long released = 0, flags;
	struct llc_file *f;
	pgoff_t a, b;
	u32 n, i, kept;

	lockdep_assert_held(&llc_reg_mutex);
	n = llc_pin_keep(llc_plan_compute(budget), budget);
	for (i = 0; i < llc_prev_n; i++) {
		o = &llc_prev[i];
		f = llc_file_by_id(o->file);
		r = llc_range_find(llc_plan, n, o);
		if (f)
			released += llc_unpin_range(f, n, o->first + (r ? min(r->count, o->count) : 0),
						    o->first + o->count);
	}
	if (release_only) {
		/* The pins follow what both plans share. */
		for (i = kept = 0; i < n; i++) {
			o = llc_range_find(llc_prev, llc_prev_n, &llc_plan[i]);
			if (o) {
				llc_plan[kept] = llc_plan[i];
				llc_plan[kept++].count = min(o->count, llc_plan[i].count);
			}
		}
		memcpy(llc_prev, llc_plan, kept * sizeof(*llc_plan));
		llc_prev_n = kept;
		return released;
	}

	/* Planned files record the pages they gain from now on; then take what they gained so far. */
	for (i = 0; i < n; i++) {
		f = llc_file_by_id(llc_plan[i].file);
		WRITE_ONCE(f->planned, true);
	}
	list_for_each_entry(f, &llc_files_list, list) {
		spin_lock_irqsave(&llc.lock, flags);
		f->pin_first = f->todo_first;
		f->pin_last = f->todo_last;
		f->todo_first = ULONG_MAX;
		f->todo_last = 0;
		spin_unlock_irqrestore(&llc.lock, flags);
		for (i = 0; i < n && llc_plan[i].file != f->id; i++)
			;
		if (i == n)
			WRITE_ONCE(f->planned, false);
	}
	for (i = 0; i < n; i++) {
		r = &llc_plan[i];
		f = llc_file_by_id(r->file);
		o = llc_range_find(llc_prev, llc_prev_n, r);
		if (!o) {
			llc_pin_pages(f, r->first, r->first + r->count);
			continue;
		}
		if (r->count > o->count)
			llc_pin_pages(f, r->first + o->count, r->first + r->count);
		a = max_t(pgoff_t, r->first, f->pin_first);
		b = min_t(pgoff_t, r->first + min(r->count, o->count) - 1, f->pin_last);
		if (a <= b)
			llc_pin_pages(f, a, b + 1);
	}
	memcpy(llc_prev, llc_plan, n * sizeof(*llc_plan));
	llc_prev_n = n;
	llc_stream_plan(llc_plan, n);
	return released;
}

/*
 * The blocks the pins may hold: the budget, capped by the shrinker, less the pins given up to pages
 * faulted again within two periods of the longest-period loop holding pins (llc_plan_reuse_room).
 */
static u64 llc_pin_blocks(u64 budget)
{
	unsigned long flags;
	u64 room;

	budget = min(budget, llc_cap);
	spin_lock_irqsave(&llc.lock, flags);
	room = llc_plan_reuse_room(&llc.reuse_room, llc_vtime(llc.core), llc.reuse_period_vt, 0);
	llc.reuse_room_planned = room;
	room = min(room, budget);
	llc.stats[LLMCACHE_STAT_REUSE_ROOM] = room;
	spin_unlock_irqrestore(&llc.lock, flags);
	return budget - room;
}

static void llc_pin_worker(struct work_struct *w)
{
	u64 budget = READ_ONCE(llc.pin_budget) >> LLMCACHE_BLOCK_SHIFT;
	unsigned long released, flags;

	mutex_lock(&llc_reg_mutex);
	if (READ_ONCE(llc.enabled)) {
		if (llc_cap < budget)
			llc_cap += max_t(u64, budget / 16, 1);
		released = llc_pin_apply(llc_pin_blocks(budget), false);
		if (llc_plan_squeezed) /* this run took a cgroup's pressure before memcg.c's worker did */
			llc_memcg_released(released);
		spin_lock_irqsave(&llc.lock, flags);
		llc.nr_reuse_loops = llc_plan_pinned_loops(llc.core, llc_prev, llc_prev_n, LLC_PLAN_MAX, llc.reuse_loops,
							   &llc.reuse_period_vt);
		spin_unlock_irqrestore(&llc.lock, flags);
	}
	mutex_unlock(&llc_reg_mutex);
}

/* Drop the pins the plan no longer allows (a memory cgroup short of memory, memcg.c); returns them. */
unsigned long llc_pin_trim(void)
{
	u64 budget = READ_ONCE(llc.pin_budget) >> LLMCACHE_BLOCK_SHIFT;
	unsigned long released = 0;

	mutex_lock(&llc_reg_mutex);
	if (READ_ONCE(llc.enabled))
		released = llc_pin_apply(llc_pin_blocks(budget), true);
	mutex_unlock(&llc_reg_mutex);
	return released;
}

void llc_pin_kick(void)
{
	schedule_work(&llc_pin_work);
}

/* Release every pin and every HOT protection now (enable=0). Caller holds llc_reg_mutex. */
void llc_pin_release(void)
{
	struct llc_file *f;
	struct folio *folio;
	unsigned long index;

	lockdep_assert_held(&llc_reg_mutex);
	list_for_each_entry(f, &llc_files_list, list) {
		xa_for_each(&f->pins, index, folio)
			llc_unhold(f, false, index);
		WRITE_ONCE(f->planned, false);
	}
	llc_prev_n = 0;
	llc_hot_release();
}

/* The shrinker's LOOP step: release about nr pins, the highest blocks of the longest-period loops. */
unsigned long llc_pin_shrink(unsigned long nr)
{
	u64 pinned = READ_ONCE(llc.stats[LLMCACHE_STAT_PINNED]);

	lockdep_assert_held(&llc_reg_mutex);
	llc_cap = pinned > nr ? pinned - nr : 0;
	return llc_pin_apply(llc_cap, true);
}

int llc_pin_init(void)
{
	int err;

	BUILD_BUG_ON(PAGE_SHIFT != LLMCACHE_BLOCK_SHIFT);
	err = llc_shrink_init();
	if (err)
		return err;
	err = llc_memcg_init();
	if (err)
		llc_shrink_exit();
	return err;
}

/* After the hooks are gone and every file is unregistered: nothing schedules the workers any more. */
void llc_pin_exit(void)
{
	llc_memcg_exit();
	cancel_work_sync(&llc_pin_work);
	llc_memcg_forget();
	llc_hot_exit();
	llc_seq_exit();
	llc_tail_exit();
	llc_shrink_exit();
}
