// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The enforcement planner (plan.h): pure functions over the caller's snapshots. The read-ahead walk goes
 * through a loop's unpinned runs in loop order from the engine's position, wrapping once at the loop's
 * end; it is O(window spans x pinned spans), with both a few hundred at most.
 */
#include "plan.h"

uint64_t llc_plan_budget(uint64_t configured, const struct llc_memcg_snapshot *m)
{
	uint64_t need;

	if (m->limit == UINT64_MAX)
		return configured;
	need = m->anon + m->code + m->window + m->margin;
	if (need >= m->limit)
		return 0;
	return configured < m->limit - need ? configured : m->limit - need;
}

int llc_plan_fits(uint64_t limit, uint64_t engine, uint64_t loop_bytes)
{
	return limit == UINT64_MAX || (engine <= limit && loop_bytes <= limit - engine);
}

uint64_t llc_plan_mapped_budget(uint64_t configured, const struct llc_memcg_snapshot *m, uint64_t kept_code,
				uint64_t readahead, uint64_t loop_bytes)
{
	struct llc_memcg_snapshot with_stream = *m;
	uint64_t engine = m->anon + m->code + m->margin;

	if (llc_plan_fits(m->limit, m->anon + (kept_code < m->code ? kept_code : m->code), loop_bytes))
		return 0;
	with_stream.window = llc_plan_stream_room(readahead, m->limit > engine ? m->limit - engine : 0);
	return llc_plan_budget(configured, &with_stream);
}

/* The room the stream asks for, eight read-ahead windows, and the most it may have (plan.h). */
static uint64_t stream_need(uint64_t readahead)
{
	return 8 * readahead;
}

static uint64_t stream_cap(uint64_t room)
{
	return llc_div_u64(room, 3) * 2;
}

uint64_t llc_plan_stream_room(uint64_t readahead, uint64_t room)
{
	return llc_plan_read_ahead(readahead, room) ? stream_need(readahead) : stream_cap(room);
}

int llc_plan_read_ahead(uint64_t readahead, uint64_t room)
{
	return stream_need(readahead) <= stream_cap(room);
}

uint64_t llc_plan_window(uint64_t readahead, uint64_t limit)
{
	return 4 * readahead < (limit >> 3) ? 4 * readahead : limit >> 3;
}

/* The unpinned run that starts at or after block b, before hi: [*first, *end). 0 when there is none. */
static int unpinned_run(const struct llc_span *p, uint32_t n, uint64_t b, uint64_t hi, uint64_t *first, uint64_t *end)
{
	uint32_t i = 0;

	while (i < n && p[i].first + p[i].count <= b)
		i++;
	while (i < n && p[i].first <= b) { /* b is pinned: go past its run, and the runs that touch it */
		b = p[i].first + p[i].count;
		i++;
	}
	if (b >= hi)
		return 0;
	*first = b;
	*end = i < n && p[i].first < hi ? p[i].first : hi;
	return 1;
}

/* The first unpinned block at or after b in loop order (wrapping at hi); hi when every block is pinned. */
static uint64_t next_unpinned(const struct llc_span *p, uint32_t n, uint64_t b, uint64_t lo, uint64_t hi)
{
	uint64_t first, end;

	if (b >= lo && b < hi && unpinned_run(p, n, b, hi, &first, &end))
		return first;
	return unpinned_run(p, n, lo, hi, &first, &end) ? first : hi;
}

/*
 * One walk of the window: the first `window` unpinned blocks after start in loop order. Writes the spans
 * from the mark on (from the first block when mark is hi) to out, at most max_out (none when out is
 * NULL). *seen: the mark is in the window; *end: where the written spans end (or the window, unwritten).
 */
static uint32_t walk(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned, uint64_t start,
		     uint64_t window, uint64_t mark, struct llc_span *out, uint32_t max_out, int *seen, uint64_t *end)
{
	uint64_t cur = start, left = window, first, stop, take;
	uint32_t n = 0;
	int wrapped = 0, writing = mark == hi;

	*seen = 0;
	while (left) {
		if (!unpinned_run(pinned, n_pinned, cur, hi, &first, &stop)) {
			if (wrapped)
				break;
			wrapped = 1;
			cur = lo;
			continue;
		}
		if (wrapped && first >= start)
			break; /* a whole lap */
		if (wrapped && stop > start)
			stop = start;
		take = stop - first < left ? stop - first : left;
		left -= take;
		cur = first + take;
		if (!*seen && mark >= first && mark < first + take) {
			*seen = 1;
			writing = 1;
			take -= mark - first;
			first = mark;
		}
		if (!writing || !out)
			continue;
		if (n == max_out) {
			cur = first;
			break;
		}
		out[n].first = first;
		out[n].count = take;
		n++;
	}
	*end = cur;
	return n;
}

uint32_t llc_plan_prefetch(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned,
			   uint64_t position, uint64_t window, uint64_t *asked_to, struct llc_span *out,
			   uint32_t max_out)
{
	uint64_t start, mark, end;
	uint32_t n;
	int seen;

	if (hi <= lo || !window || !max_out)
		return 0;
	start = position + 1 >= lo && position + 1 < hi ? position + 1 : lo;
	mark = *asked_to < hi ? next_unpinned(pinned, n_pinned, *asked_to, lo, hi) : hi;
	walk(lo, hi, pinned, n_pinned, start, window, mark, NULL, 0, &seen, &end);
	if (!seen && mark != hi && next_unpinned(pinned, n_pinned, end, lo, hi) == mark)
		return 0; /* the window ends where the last one did: nothing new */
	/* The mark in the window: what follows it. Not in it: the engine passed the last window (or there
	 * was none), so all of it. */
	n = walk(lo, hi, pinned, n_pinned, start, window, seen ? mark : hi, out, max_out, &seen, &end);
	if (n)
		*asked_to = end;
	return n;
}

/* Unpinned blocks in [x, y), x <= y. */
static uint64_t unpinned_count(const struct llc_span *p, uint32_t n, uint64_t x, uint64_t y)
{
	uint64_t count = y - x, a, b;
	uint32_t i;

	for (i = 0; i < n; i++) {
		a = p[i].first > x ? p[i].first : x;
		b = p[i].first + p[i].count < y ? p[i].first + p[i].count : y;
		if (a < b)
			count -= b - a;
	}
	return count;
}

/* Unpinned blocks in (a, b] in loop order, wrapping at hi to lo. */
static uint64_t unpinned_after(const struct llc_span *p, uint32_t n, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b)
{
	if (a < b)
		return unpinned_count(p, n, a + 1, b + 1);
	return unpinned_count(p, n, a + 1, hi) + unpinned_count(p, n, lo, b + 1);
}

uint64_t llc_plan_position(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned,
			   uint64_t position, uint64_t seen, uint64_t window)
{
	if (seen < lo || seen >= hi)
		return position;
	if (position < lo || position >= hi || position == seen)
		return seen;
	if (unpinned_after(pinned, n_pinned, lo, hi, position, seen) <= window ||
	    unpinned_after(pinned, n_pinned, lo, hi, seen, position) > window)
		return seen;
	return position;
}

/* Appends the unpinned runs of [x, y) to out; returns 0 when out is full (*x is then where it stopped). */
static int append_unpinned(const struct llc_span *p, uint32_t n_pinned, uint64_t *x, uint64_t y, struct llc_span *out,
			   uint32_t *n, uint32_t max_out)
{
	uint64_t first, end;

	while (*x < y && unpinned_run(p, n_pinned, *x, y, &first, &end)) {
		if (*n == max_out) {
			*x = first;
			return 0;
		}
		out[*n].first = first;
		out[*n].count = end - first;
		(*n)++;
		*x = end;
	}
	*x = y;
	return 1;
}

uint32_t llc_plan_passed(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned,
			 uint64_t position, uint64_t lag, uint64_t align, uint64_t *dropped_to, struct llc_span *out,
			 uint32_t max_out)
{
	uint64_t from, to;
	uint32_t n = 0;

	if (hi <= lo || position < lo || position >= hi || !align)
		return 0;
	from = *dropped_to >= lo && *dropped_to < hi ? *dropped_to : lo;
	if (position < from) {
		if (!append_unpinned(pinned, n_pinned, &from, hi, out, &n, max_out)) {
			*dropped_to = from;
			return n;
		}
		from = lo;
	}
	to = position >= from + lag ? position - lag : from;
	to = lo + llc_div_u64(to - lo, align) * align;
	if (to > from)
		append_unpinned(pinned, n_pinned, &from, to, out, &n, max_out);
	*dropped_to = from;
	return n;
}

uint64_t llc_plan_read_budget(uint64_t configured, const struct llc_memcg_snapshot *m, uint64_t readahead)
{
	struct llc_memcg_snapshot with_read_ahead = *m;

	with_read_ahead.window = 3 * readahead;
	return llc_plan_budget(configured, &with_read_ahead);
}

int llc_plan_note_run(struct llc_span *runs, uint32_t *n, uint32_t max, uint64_t first, uint64_t count)
{
	uint64_t end = first + count, run_end;
	uint32_t i;

	for (i = 0; i < *n; i++) {
		run_end = runs[i].first + runs[i].count;
		if (first <= run_end && end >= runs[i].first) {
			if (first < runs[i].first)
				runs[i].first = first;
			runs[i].count = (end > run_end ? end : run_end) - runs[i].first;
			return (int)i;
		}
	}
	if (*n >= max)
		return -1;
	runs[*n] = (struct llc_span){ first, count };
	return (int)(*n)++;
}

int llc_plan_drop_tails(uint64_t loop_blocks, uint64_t held_blocks, uint64_t room_blocks)
{
	return loop_blocks > held_blocks && loop_blocks - held_blocks > room_blocks;
}

int64_t llc_plan_spare_file(uint64_t file_lru, uint64_t unclean, uint64_t unevictable, uint64_t mlocked, uint64_t held)
{
	const uint64_t others = mlocked > held ? mlocked - held : 0;
	const uint64_t moved = unevictable > others ? unevictable - others : 0;
	const uint64_t on_lru = held > moved ? held - moved : 0;

	return (int64_t)file_lru - (int64_t)unclean - (int64_t)on_lru;
}

/* The first block at or after b that no recent run covers, or end when there is none before it. */
static uint64_t not_recent(const struct llc_span *recent, uint32_t n, uint64_t b, uint64_t end)
{
	uint32_t i;
	int moved = 1;

	while (moved && b < end) {
		moved = 0;
		for (i = 0; i < n; i++)
			if (b >= recent[i].first && b < recent[i].first + recent[i].count) {
				b = recent[i].first + recent[i].count;
				moved = 1;
			}
	}
	return b < end ? b : end;
}

/* The first block after b that a recent run covers, or end. */
static uint64_t next_recent(const struct llc_span *recent, uint32_t n, uint64_t b, uint64_t end)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (recent[i].first > b && recent[i].first < end)
			end = recent[i].first;
	return end;
}

uint32_t llc_plan_tail_drops(const struct llc_span *aged, uint32_t n_aged, const struct llc_span *recent,
			     uint32_t n_recent, struct llc_span *out, uint32_t max_out)
{
	uint64_t b, e, end;
	uint32_t i, n = 0;

	for (i = 0; i < n_aged; i++) {
		end = aged[i].first + aged[i].count;
		for (b = not_recent(recent, n_recent, aged[i].first, end); b < end;
		     b = not_recent(recent, n_recent, e, end)) {
			e = next_recent(recent, n_recent, b, end);
			if (n == max_out)
				return n;
			out[n++] = (struct llc_span){ b, e - b };
		}
	}
	return n;
}

int llc_plan_scan_finished(int mapped, int written, uint64_t untouched_ns, uint64_t idle_ns)
{
	return !mapped && !written && idle_ns && untouched_ns >= idle_ns;
}

uint32_t llc_plan_heads(const struct llc_pin_range *files, uint32_t n, uint64_t budget, struct llc_pin_range *out,
			uint32_t max)
{
	uint64_t left = budget;
	uint32_t i, k = 0;

	for (i = 0; i < n && k < max; i++) {
		if (files[i].count <= budget)
			continue;
		out[k] = files[i];
		out[k].first = 0;
		out[k].count = files[i].count < left ? files[i].count : left;
		left -= out[k++].count;
	}
	return k;
}

/* The first of kept[0..n) of file that ends after block `from` and starts before `end`, or NULL. */
static const struct llc_pin_range *first_kept_in(const struct llc_pin_range *kept, uint32_t n, uint64_t file,
						 uint64_t from, uint64_t end)
{
	const struct llc_pin_range *best = NULL;
	uint32_t i;

	for (i = 0; i < n; i++)
		if (kept[i].file == file && kept[i].first + kept[i].count > from && kept[i].first < end &&
		    (!best || kept[i].first < best->first))
			best = &kept[i];
	return best;
}

uint32_t llc_plan_pins(const struct llc_pin_range *kept, uint32_t n_kept, const struct llc_pin_range *plan,
		       uint32_t n_plan, uint64_t budget, struct llc_pin_range *out, uint32_t max)
{
	uint64_t held = 0, left;
	uint32_t n = 0, i;

	for (i = 0; i < n_kept && n < max && held < budget; i++) {
		out[n] = kept[i];
		if (out[n].count > budget - held)
			out[n].count = budget - held;
		held += out[n].count;
		if (out[n].count)
			n++;
	}
	n_kept = n; /* what is not held is no longer kept: the plan may take it */
	left = budget - held;
	for (i = 0; i < n_plan && left; i++) {
		uint64_t from = plan[i].first;
		const uint64_t end = plan[i].first + plan[i].count;

		while (from < end && left && n < max) {
			const struct llc_pin_range *k = first_kept_in(out, n_kept, plan[i].file, from, end);
			const uint64_t gap_end = !k ? end : k->first > from ? k->first : from;
			const uint64_t take = gap_end - from < left ? gap_end - from : left;

			if (take) {
				out[n] = plan[i];
				out[n].first = from;
				out[n].count = take;
				n++;
				left -= take;
			}
			from = k ? k->first + k->count : end;
		}
	}
	return n;
}

uint64_t llc_plan_reuse_room(struct llc_reuse_room *r, uint64_t now_vt, uint64_t period_vt, uint64_t faults)
{
	if (!period_vt) {
		r->window_vt = now_vt;
		r->in_window = r->in_last_window = 0;
		return 0;
	}
	if (now_vt - r->window_vt >= period_vt) {
		r->in_last_window = now_vt - r->window_vt < 2 * period_vt ? r->in_window : 0;
		r->in_window = 0;
		r->window_vt = now_vt;
	}
	r->in_window += faults;
	return r->in_window + r->in_last_window;
}

uint32_t llc_plan_pinned_loops(const struct llc_core *c, const struct llc_pin_range *pins, uint32_t n, uint32_t walk,
			       struct llc_pin_range *loops, uint64_t *period_vt)
{
	const struct llc_seq *s;
	uint32_t i, k = 0;
	uint16_t id;

	*period_vt = 0;
	for (i = 0; i < n; i++) {
		s = pins[i].seq ? llc_seq_get(c, pins[i].seq) : NULL;
		if (s && s->cls == LLMCACHE_CLASS_LOOP && s->file == pins[i].file) {
			loops[k++] = (struct llc_pin_range){ s->file, s->start, s->end - s->start + 1, pins[i].seq };
			if (s->period_vt > *period_vt)
				*period_vt = s->period_vt;
		} else if (!pins[i].seq) {
			loops[k++] = (struct llc_pin_range){ pins[i].file, 0, UINT64_MAX, 0 };
		}
	}
	for (id = llc_first(c, LLMCACHE_CLASS_LOOP); id && walk--; id = llc_next(c, id)) {
		s = llc_seq_get(c, id);
		for (i = 0; i < n && (pins[i].seq || pins[i].file != s->file); i++)
			;
		if (i < n) {
			if (s->period_vt > *period_vt)
				*period_vt = s->period_vt;
			break;
		}
	}
	return k;
}

int llc_plan_reuse_counts(const struct llc_verdict *v, uint64_t period_vt, const struct llc_pin_range *loops,
			  uint32_t n, uint64_t file, uint64_t block)
{
	uint32_t i;

	if (v->cls == LLMCACHE_CLASS_LOOP || !llc_reuse_within(v->reuse_vt, period_vt))
		return 0;
	for (i = 0; i < n; i++)
		if (loops[i].file == file && block >= loops[i].first && block - loops[i].first < loops[i].count)
			return 0;
	return 1;
}
