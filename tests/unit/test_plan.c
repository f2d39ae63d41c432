// SPDX-License-Identifier: MIT
/* CMocka tests of the enforcement planner (libllmcache/core/plan.h): the pin budget under a memory
 * cgroup, whether the loops fit beside the engine, the stream's room, the read-ahead window of a loop that does not fit,
 * a read() engine's budget, the tails of a loop, the end of a scan and the pins kept under a new plan, on
 * hand-made snapshots. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "libllmcache/core/plan.h"

#define MiB (1ULL << 20)

static void plan_budget__no_limit__configured(void **state)
{
	struct llc_memcg_snapshot m = { UINT64_MAX, 100 * MiB, 40 * MiB, 32 * MiB, 16 * MiB };

	(void)state;
	assert_int_equal(llc_plan_budget(1024 * MiB, &m), 1024 * MiB);
}

static void plan_budget__limit__what_anon_code_window_and_margin_leave(void **state)
{
	struct llc_memcg_snapshot m = { 650 * MiB, 100 * MiB, 40 * MiB, 32 * MiB, 16 * MiB };

	(void)state;
	assert_int_equal(llc_plan_budget(1024 * MiB, &m), 462 * MiB);
	assert_int_equal(llc_plan_budget(300 * MiB, &m), 300 * MiB); /* the configured budget is a cap too */
	m.anon = 600 * MiB;                                          /* the engine grew: nothing left */
	assert_int_equal(llc_plan_budget(1024 * MiB, &m), 0);
}

static void plan_fits__model_anon_and_code_against_the_limit(void **state)
{
	(void)state;
	assert_true(llc_plan_fits(UINT64_MAX, 100 * MiB, 100000 * MiB)); /* no limit */
	/* 604 MiB of weights beside 84 MiB of context and 15 MiB of code: 725 MiB holds them, 650 does not. */
	assert_true(llc_plan_fits(725 * MiB, 99 * MiB, 604 * MiB));
	assert_true(llc_plan_fits(703 * MiB, 99 * MiB, 604 * MiB));
	assert_false(llc_plan_fits(702 * MiB, 99 * MiB, 604 * MiB));
	assert_false(llc_plan_fits(650 * MiB, 99 * MiB, 604 * MiB));
	/* An engine bigger than its limit leaves room for nothing, without wrapping round. */
	assert_false(llc_plan_fits(650 * MiB, 700 * MiB, 1 * MiB));
	assert_false(llc_plan_fits(650 * MiB, 600 * MiB, UINT64_MAX - 10 * MiB));
}

static void plan_mapped_budget__none_when_it_fits_else_the_stream_room_left_out(void **state)
{
	/* 99 MiB of context, 50 MiB of code mapped of which 16 kept, an 8 MiB margin, 8 MiB read-ahead. */
	struct llc_memcg_snapshot m = { 725 * MiB, 99 * MiB, 50 * MiB, 0, 8 * MiB };

	(void)state;
	/* 604 MiB of weights fit beside the context and the kept code: no pins. */
	assert_int_equal(llc_plan_mapped_budget(1024 * MiB, &m, 16 * MiB, 8 * MiB, 604 * MiB), 0);
	/* At 650 MiB they do not: the room besides the engine is 493 MiB, the stream takes eight windows. */
	m.limit = 650 * MiB;
	assert_int_equal(llc_plan_mapped_budget(1024 * MiB, &m, 16 * MiB, 8 * MiB, 604 * MiB), 493 * MiB - 64 * MiB);
	assert_int_equal(llc_plan_mapped_budget(300 * MiB, &m, 16 * MiB, 8 * MiB, 604 * MiB), 300 * MiB);
	/* The window the caller passes is not read: the planner sets it. */
	m.window = 400 * MiB;
	assert_int_equal(llc_plan_mapped_budget(1024 * MiB, &m, 16 * MiB, 8 * MiB, 604 * MiB), 493 * MiB - 64 * MiB);
	/* An engine that outgrew its limit leaves nothing, without wrapping round. */
	m.anon = 700 * MiB;
	assert_int_equal(llc_plan_mapped_budget(1024 * MiB, &m, 16 * MiB, 8 * MiB, 604 * MiB), 0);
}

static void plan_stream_room__eight_windows_at_most_two_thirds(void **state)
{
	(void)state;
	/* Eight 8 MiB read-ahead windows (four ahead of the engine, the read-around of its fault, two of
	 * drop lag and one in flight), whether the loops nearly fit or half of them is streamed. */
	assert_int_equal(llc_plan_stream_room(8 * MiB, 538 * MiB), 64 * MiB);
	assert_int_equal(llc_plan_stream_room(8 * MiB, 270 * MiB), 64 * MiB);
	assert_int_equal(llc_plan_stream_room(4 * MiB, 178 * MiB), 32 * MiB);
	/* Never more than two thirds of the room: the head keeps the rest. */
	assert_int_equal(llc_plan_stream_room(8 * MiB, 90 * MiB), 60 * MiB);
	assert_int_equal(llc_plan_stream_room(8 * MiB, 30 * MiB), 20 * MiB);
	assert_int_equal(llc_plan_stream_room(8 * MiB, 0), 0);
}

static void plan_read_ahead__only_with_eight_windows_in_two_thirds_of_the_room(void **state)
{
	(void)state;
	/* 107%, 80% and 50% of a 604 MiB model beside a 100 MiB engine: read ahead. */
	assert_true(llc_plan_read_ahead(8 * MiB, 538 * MiB));
	assert_true(llc_plan_read_ahead(8 * MiB, 354 * MiB));
	assert_true(llc_plan_read_ahead(8 * MiB, 173 * MiB));
	/* The line: 64 MiB are two thirds of 96 MiB. */
	assert_true(llc_plan_read_ahead(8 * MiB, 96 * MiB));
	assert_false(llc_plan_read_ahead(8 * MiB, 95 * MiB));
	assert_false(llc_plan_read_ahead(8 * MiB, 30 * MiB));
	assert_false(llc_plan_read_ahead(8 * MiB, 0));
}

/* Spans returned by one call, compared with the expected ones. */
static void expect(const struct llc_span *got, uint32_t n, const uint64_t (*want)[2], uint32_t n_want)
{
	uint32_t i;

	assert_int_equal(n, n_want);
	for (i = 0; i < n; i++) {
		assert_int_equal(got[i].first, want[i][0]);
		assert_int_equal(got[i].count, want[i][1]);
	}
}

static void plan_window__four_units_at_most_an_eighth_of_the_limit(void **state)
{
	(void)state;
	assert_int_equal(32 * MiB, llc_plan_window(8 * MiB, 646 * MiB));
	assert_int_equal(16 * MiB, llc_plan_window(4 * MiB, 700 * MiB));
	/* A small cgroup: an eighth of it. */
	assert_int_equal(12 * MiB, llc_plan_window(8 * MiB, 96 * MiB));
	assert_int_equal(0, llc_plan_window(4 * MiB, 0));
}

static void plan_prefetch__pinned_head__window_after_position_then_only_what_is_new(void **state)
{
	const struct llc_span pinned[] = { { 0, 60 } };
	struct llc_span out[8];
	uint64_t asked = UINT64_MAX;
	uint32_t n;

	(void)state;
	/* In the pinned head: the window is the first 20 unpinned blocks. */
	n = llc_plan_prefetch(0, 100, pinned, 1, 10, 20, &asked, out, 8);
	expect(out, n, (const uint64_t[][2]){ { 60, 20 } }, 1);
	assert_int_equal(asked, 80);
	/* The engine moved on: only the new part. */
	n = llc_plan_prefetch(0, 100, pinned, 1, 65, 20, &asked, out, 8);
	expect(out, n, (const uint64_t[][2]){ { 80, 6 } }, 1);
	/* Nowhere new to go: nothing. */
	n = llc_plan_prefetch(0, 100, pinned, 1, 65, 20, &asked, out, 8);
	assert_int_equal(n, 0);
	/* Near the end: the window wraps round to the next iteration's first unpinned blocks, and since the
	 * engine passed the last window's end, all of it is asked for. */
	n = llc_plan_prefetch(0, 100, pinned, 1, 95, 20, &asked, out, 8);
	expect(out, n, (const uint64_t[][2]){ { 96, 4 }, { 60, 16 } }, 2);
	assert_int_equal(asked, 76);
}

static void plan_prefetch__scattered_pins__unpinned_runs_only_window_counts_them(void **state)
{
	const struct llc_span pinned[] = { { 10, 10 }, { 30, 10 } };
	struct llc_span out[8];
	uint64_t asked = UINT64_MAX;
	uint32_t n;

	(void)state;
	n = llc_plan_prefetch(0, 50, pinned, 2, 5, 15, &asked, out, 8);
	expect(out, n, (const uint64_t[][2]){ { 6, 4 }, { 20, 10 }, { 40, 1 } }, 3);
	/* A mark inside a run: the part after it only, wrapping round at the end. */
	n = llc_plan_prefetch(0, 50, pinned, 2, 25, 15, &asked, out, 8);
	expect(out, n, (const uint64_t[][2]){ { 41, 9 }, { 0, 1 } }, 2);
	/* Too few spans allowed: cut short, and the next call goes on from the cut. */
	asked = UINT64_MAX;
	n = llc_plan_prefetch(0, 50, pinned, 2, 5, 15, &asked, out, 2);
	expect(out, n, (const uint64_t[][2]){ { 6, 4 }, { 20, 10 } }, 2);
	assert_int_equal(asked, 40); /* the next unpinned block after the cut */
	n = llc_plan_prefetch(0, 50, pinned, 2, 5, 15, &asked, out, 2);
	expect(out, n, (const uint64_t[][2]){ { 40, 1 } }, 1);
}

static void plan_prefetch__everything_pinned_or_empty_loop__nothing(void **state)
{
	const struct llc_span pinned[] = { { 0, 50 } };
	struct llc_span out[4];
	uint64_t asked = UINT64_MAX;

	(void)state;
	assert_int_equal(llc_plan_prefetch(0, 50, pinned, 1, 5, 15, &asked, out, 4), 0);
	assert_int_equal(llc_plan_prefetch(10, 10, NULL, 0, 5, 15, &asked, out, 4), 0);
	/* A window larger than the loop: one lap, from the position round to it. */
	assert_int_equal(llc_plan_prefetch(0, 10, NULL, 0, 4, 100, &asked, out, 4), 2);
	assert_int_equal(out[0].first, 5);
	assert_int_equal(out[0].count, 5);
	assert_int_equal(out[1].first, 0);
	assert_int_equal(out[1].count, 5);
}

static void plan_position__threads_and_wrap__lagging_thread_ignored_restart_followed(void **state)
{
	const struct llc_span pinned[] = { { 0, 600 } };

	(void)state;
	/* Unknown: the first access. */
	assert_int_equal(llc_plan_position(0, 1000, pinned, 1, UINT64_MAX, 700, 100), 700);
	/* The thread ahead moves it; the one 30 blocks behind does not. */
	assert_int_equal(llc_plan_position(0, 1000, pinned, 1, 700, 760, 100), 760);
	assert_int_equal(llc_plan_position(0, 1000, pinned, 1, 760, 730, 100), 760);
	/* The end of the loop is followed by its first unpinned block, across the pinned head. */
	assert_int_equal(llc_plan_position(0, 1000, pinned, 1, 990, 605, 100), 605);
	/* Far behind: a restart. */
	assert_int_equal(llc_plan_position(0, 1000, pinned, 1, 900, 650, 100), 650);
	/* Outside the loop: no change. */
	assert_int_equal(llc_plan_position(0, 1000, pinned, 1, 900, 2000, 100), 900);
}

static void plan_passed__head_loop__a_lag_behind_in_whole_folios_then_the_rest_once_round(void **state)
{
	const struct llc_span pinned[] = { { 0, 600 } };
	struct llc_span out[4];
	uint64_t dropped = UINT64_MAX;

	(void)state;
	/* 830 - lag 100 = 730, down to a folio of 64: [600, 704); the pinned head is never dropped. */
	assert_int_equal(llc_plan_passed(0, 1000, pinned, 1, 830, 100, 64, &dropped, out, 4), 1);
	assert_int_equal(out[0].first, 600);
	assert_int_equal(out[0].count, 104);
		assert_int_equal(dropped, 704);
	/* Not a folio further: nothing new. */
	assert_int_equal(llc_plan_passed(0, 1000, pinned, 1, 850, 100, 64, &dropped, out, 4), 0);
	assert_int_equal(dropped, 704);
	/* Round the end to the first unpinned block: the rest of the last pass, the partial last folio too. */
	assert_int_equal(llc_plan_passed(0, 1000, pinned, 1, 605, 100, 64, &dropped, out, 4), 1);
	assert_int_equal(out[0].first, 704);
	assert_int_equal(out[0].count, 296);
	assert_int_equal(llc_plan_passed(0, 1000, pinned, 1, 900, 100, 64, &dropped, out, 4), 1);
	assert_int_equal(out[0].first, 600);
	assert_int_equal(out[0].count, 168);
	/* Outside the loop, or an empty one: nothing, and the mark stays. */
	assert_int_equal(llc_plan_passed(0, 1000, pinned, 1, 2000, 100, 64, &dropped, out, 4), 0);
	assert_int_equal(llc_plan_passed(10, 10, NULL, 0, 10, 1, 1, &dropped, out, 4), 0);
	assert_int_equal(dropped, 768);
}

static void plan_passed__scattered_pins_and_full_out__unpinned_runs_and_resumes_where_cut(void **state)
{
	const struct llc_span pinned[] = { { 10, 10 }, { 30, 10 }, { 50, 10 } };
	struct llc_span out[2];
	uint64_t dropped = UINT64_MAX;

	(void)state;
	assert_int_equal(llc_plan_passed(0, 100, pinned, 3, 80, 10, 1, &dropped, out, 2), 2);
	assert_int_equal(out[0].first, 0);
	assert_int_equal(out[0].count, 10);
	assert_int_equal(out[1].first, 20);
	assert_int_equal(out[1].count, 10);
	assert_int_equal(dropped, 40);
	assert_int_equal(llc_plan_passed(0, 100, pinned, 3, 80, 10, 1, &dropped, out, 2), 2);
	assert_int_equal(out[0].first, 40);
	assert_int_equal(out[0].count, 10);
	assert_int_equal(out[1].first, 60);
	assert_int_equal(out[1].count, 10);
	assert_int_equal(dropped, 70);
}

static void plan_read_budget__three_read_ahead_windows_beside_the_engine(void **state)
{
	struct llc_memcg_snapshot m = { 650 * MiB, 100 * MiB, 40 * MiB, 999 * MiB, 16 * MiB };

	(void)state;
	/* 650 - 100 - 40 - 16 - 3 x 8: the window the caller passed is not read. */
	assert_int_equal(llc_plan_read_budget(1024 * MiB, &m, 8 * MiB), 470 * MiB);
	assert_int_equal(llc_plan_read_budget(200 * MiB, &m, 8 * MiB), 200 * MiB);
	m.limit = 170 * MiB; /* nothing left for pins */
	assert_int_equal(llc_plan_read_budget(1024 * MiB, &m, 8 * MiB), 0);
	m.limit = UINT64_MAX;
	assert_int_equal(llc_plan_read_budget(1024 * MiB, &m, 8 * MiB), 1024 * MiB);
}

static void plan_note_run__merges_what_overlaps_or_touches_else_a_new_run_until_full(void **state)
{
	struct llc_span runs[2];
	uint32_t n = 0;

	(void)state;
	assert_int_equal(0, llc_plan_note_run(runs, &n, 2, 100, 10));
	assert_int_equal(0, llc_plan_note_run(runs, &n, 2, 110, 5)); /* touches the end */
	assert_int_equal(0, llc_plan_note_run(runs, &n, 2, 95, 5));  /* touches the start */
	assert_int_equal(0, llc_plan_note_run(runs, &n, 2, 98, 4));  /* inside */
	assert_int_equal(1, llc_plan_note_run(runs, &n, 2, 300, 1)); /* apart: a second run */
	assert_int_equal(-1, llc_plan_note_run(runs, &n, 2, 500, 8)); /* no room: left to reclaim */
	assert_int_equal(n, 2);
	assert_int_equal(runs[0].first, 95);
	assert_int_equal(runs[0].count, 20);
	assert_int_equal(runs[1].first, 300);
	assert_int_equal(runs[1].count, 1);
}

static void plan_drop_tails__only_while_the_unheld_blocks_outnumber_the_room(void **state)
{
	(void)state;
	assert_true(llc_plan_drop_tails(1000, 600, 300));
	assert_false(llc_plan_drop_tails(1000, 600, 400)); /* the rest fits the room exactly */
	assert_false(llc_plan_drop_tails(1000, 1000, 0));  /* all held */
	assert_false(llc_plan_drop_tails(100, 600, 0));    /* more held than the loop has */
}

static void plan_spare_file__held_folios_on_the_file_lru_are_not_spare(void **state)
{
	(void)state;
	/* 1 000 file LRU pages, 100 dirty, 300 held, none moved to the unevictable list yet. */
	assert_int_equal(llc_plan_spare_file(1000, 100, 0, 300, 300), 600);
	/* Reclaim moved 200 of them: they left the file LRU count, 100 are still on it. */
	assert_int_equal(llc_plan_spare_file(800, 100, 200, 300, 300), 600);
	/* A process mlocked 5 000 pages (unevictable at once): the 300 held are still on the file LRU. */
	assert_int_equal(llc_plan_spare_file(1000, 100, 5000, 5300, 300), 600);
	/* ... and once reclaim has moved all 300, none is. */
	assert_int_equal(llc_plan_spare_file(700, 100, 5300, 5300, 300), 600);
	/* Other unevictable pages (ramfs) count as held folios moved, never more than held. */
	assert_int_equal(llc_plan_spare_file(1000, 100, 9000, 300, 300), 900);
	/* Nothing held: all the clean file pages are spare; more unclean than on the LRU: negative. */
	assert_int_equal(llc_plan_spare_file(1000, 100, 50, 50, 0), 900);
	assert_int_equal(llc_plan_spare_file(100, 300, 0, 0, 0), -200);
}

static void plan_tail_drops__aged_runs_less_the_recent_ones_cut_at_max_out(void **state)
{
	const struct llc_span aged[] = { { 0, 100 }, { 200, 50 } };
	const struct llc_span recent[] = { { 90, 30 }, { 10, 5 }, { 210, 10 }, { 215, 10 } };
	const uint64_t all[][2] = { { 0, 100 }, { 200, 50 } };
	const uint64_t less[][2] = { { 0, 10 }, { 15, 75 }, { 200, 10 }, { 225, 25 } };
	struct llc_span out[8];

	(void)state;
	expect(out, llc_plan_tail_drops(aged, 2, recent, 0, out, 8), all, 2);
	/* The engine is still on [90, 120), back at [10, 15), and at [210, 225) in two overlapping runs. */
	expect(out, llc_plan_tail_drops(aged, 2, recent, 4, out, 8), less, 4);
	expect(out, llc_plan_tail_drops(aged, 2, recent, 4, out, 3), less, 3);
	assert_int_equal(0, llc_plan_tail_drops(aged, 0, recent, 4, out, 8));
	assert_int_equal(1, llc_plan_tail_drops(recent, 1, aged, 1, out, 8)); /* [90, 120) less [0, 100) */
	assert_int_equal(out[0].first, 100);
	assert_int_equal(out[0].count, 20);
}

static void plan_scan_finished__idle_long_enough_never_mapped_never_when_off(void **state)
{
	(void)state;
	assert_true(llc_plan_scan_finished(0, 0, 1000, 1000));
	assert_false(llc_plan_scan_finished(0, 0, 999, 1000));
	assert_false(llc_plan_scan_finished(1, 0, 5000, 1000)); /* an mmap engine's loop looks like one scan */
	assert_false(llc_plan_scan_finished(0, 1, 5000, 1000)); /* written pages may be dirty */
	assert_false(llc_plan_scan_finished(0, 0, 5000, 0));    /* 0 turns it off */
}

/* out[0..n) must be exactly want[0..n) as {file, first, count, seq}. */
static void expect_pins(const struct llc_pin_range *out, uint32_t n, const struct llc_pin_range *want, uint32_t n_want)
{
	uint32_t i;

	assert_int_equal(n, n_want);
	for (i = 0; i < n; i++) {
		assert_int_equal(out[i].file, want[i].file);
		assert_int_equal(out[i].first, want[i].first);
		assert_int_equal(out[i].count, want[i].count);
		assert_int_equal(out[i].seq, want[i].seq);
	}
}

static void plan_pins__kept_stay_the_plan_fills_the_rest_around_them(void **state)
{
	/* Pinned now and still in a loop: file 1 [0, 100) and [300, 350), file 2 [0, 50). */
	const struct llc_pin_range kept[] = { { 1, 0, 100, 7 }, { 1, 300, 50, 8 }, { 2, 0, 50, 9 } };
	/* The new plan: file 1 [0, 400) (its loop seen whole again), then file 3 [0, 1000). */
	const struct llc_pin_range plan[] = { { 1, 0, 400, 4 }, { 3, 0, 1000, 5 } };
	const struct llc_pin_range all[] = { { 1, 0, 100, 7 },	 { 1, 300, 50, 8 }, { 2, 0, 50, 9 },
					     { 1, 100, 200, 4 }, { 1, 350, 50, 4 }, { 3, 0, 150, 5 } };
	struct llc_pin_range out[8];

	(void)state;
	/* 600 blocks: the 200 kept, the plan's file 1 around them (250), file 3 the last 150. */
	expect_pins(out, llc_plan_pins(kept, 3, plan, 2, 600, out, 8), all, 6);
	/* Nothing kept: the plan exactly, cut to the budget. */
	expect_pins(out, llc_plan_pins(kept, 0, plan, 2, 450, out, 8), (const struct llc_pin_range[]){ { 1, 0, 400, 4 }, { 3, 0, 50, 5 } }, 2);
	/* No plan: the kept pins alone. */
	expect_pins(out, llc_plan_pins(kept, 3, plan, 0, 600, out, 8), kept, 3);
	/* max cuts the plan's part first: what is kept comes first. */
	expect_pins(out, llc_plan_pins(kept, 3, plan, 2, 600, out, 4), all, 4);
}

static void plan_pins__budget_below_the_kept__the_last_go_first_from_their_highest_block(void **state)
{
	const struct llc_pin_range kept[] = { { 1, 0, 100, 7 }, { 1, 300, 50, 8 }, { 2, 0, 50, 9 } };
	const struct llc_pin_range plan[] = { { 1, 0, 400, 4 } };
	const struct llc_pin_range cut[] = { { 1, 0, 100, 7 }, { 1, 300, 20, 8 } };
	struct llc_pin_range out[8];

	(void)state;
	/* 120 blocks: the first range whole, 20 of the second, none of the third; nothing left for the plan. */
	expect_pins(out, llc_plan_pins(kept, 3, plan, 1, 120, out, 8), cut, 2);
	assert_int_equal(0, llc_plan_pins(kept, 3, plan, 1, 0, out, 8));
	/* The blocks a trimmed kept range gave up are the plan's again, in plan order: [100, 300) then [320, 350). */
	expect_pins(out, llc_plan_pins(cut, 2, plan, 1, 300, out, 8),
		    (const struct llc_pin_range[]){ { 1, 0, 100, 7 }, { 1, 300, 20, 8 }, { 1, 100, 180, 4 } }, 3);
}

static void plan_heads__files_larger_than_the_budget_from_block_0_in_order_until_spent(void **state)
{
	/* A 30-block library, a 600-block model, a 200-block second model, as an engine maps them. */
	const struct llc_pin_range files[] = { { 1, 0, 30, 0 }, { 2, 0, 600, 3 }, { 3, 0, 200, 0 } };
	struct llc_pin_range out[4];

	(void)state;
	/* 150 blocks: the library fits (the core's plan pins it when it loops); the model takes them all,
	 * the second model is a head file with nothing left. */
	expect_pins(out, llc_plan_heads(files, 3, 150, out, 4),
		    (const struct llc_pin_range[]){ { 2, 0, 150, 3 }, { 3, 0, 0, 0 } }, 2);
	/* 250: the second model fits in the budget, the first takes it whole. */
	expect_pins(out, llc_plan_heads(files, 3, 250, out, 4), (const struct llc_pin_range[]){ { 2, 0, 250, 3 } }, 1);
	/* Every file fits in the budget: no head, the core's plan. None: every file is a head file. */
	assert_int_equal(0, llc_plan_heads(files, 3, 600, out, 4));
	expect_pins(out, llc_plan_heads(files, 3, 0, out, 4),
		    (const struct llc_pin_range[]){ { 1, 0, 0, 0 }, { 2, 0, 0, 3 }, { 3, 0, 0, 0 } }, 3);
	/* max cuts the last. */
	expect_pins(out, llc_plan_heads(files, 3, 0, out, 1), (const struct llc_pin_range[]){ { 1, 0, 0, 0 } }, 1);
}

static void plan_reuse_room__faults_of_this_window_and_the_last_then_none(void **state)
{
	struct llc_reuse_room r = { 0 };

	assert_int_equal(llc_plan_reuse_room(&r, 10, 100, 1), 1);
	assert_int_equal(llc_plan_reuse_room(&r, 50, 100, 2), 3);
	assert_int_equal(llc_plan_reuse_room(&r, 109, 100, 0), 3); /* still the first window */
	assert_int_equal(llc_plan_reuse_room(&r, 110, 100, 1), 4); /* the second: the first's 3 stay */
	assert_int_equal(llc_plan_reuse_room(&r, 215, 100, 0), 1); /* the third: the second's 1 */
	assert_int_equal(llc_plan_reuse_room(&r, 320, 100, 0), 0); /* they stopped two periods ago */
	assert_int_equal(llc_plan_reuse_room(&r, 330, 100, 5), 5);
	assert_int_equal(llc_plan_reuse_room(&r, 600, 100, 0), 0); /* idle for more than two windows at once */
	assert_int_equal(llc_plan_reuse_room(&r, 610, 100, 2), 2);
	assert_int_equal(llc_plan_reuse_room(&r, 620, 0, 3), 0); /* no loop holds pins: nothing */
	assert_int_equal(llc_plan_reuse_room(&r, 630, 100, 1), 1);
}

/* Sweep blocks [0, n) of file `iterations` times: a loop of period n from the second sweep on. */
static uint16_t loop_of(struct llc_core *c, uint64_t file, uint64_t n, int iterations)
{
	struct llc_verdict v = { 0 };

	while (iterations--)
		for (uint64_t b = 0; b < n; b++)
			v = llc_access(c, file, b, llc_vtime(c) * 1000);
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	return v.seq;
}

static void plan_pinned_loops__ranges_own_loops_and_heads_files_whole_longest_period(void **state)
{
	const struct llc_verdict fault = { 1, LLMCACHE_CLASS_HOT, LLC_EV_HOT_TOUCH, 150 };
	struct llc_pin_range loops[4];
	struct llc_config cfg;
	uint64_t size, period;
	struct llc_core *c;
	void *mem;

	llc_config_default(&cfg);
	size = llc_core_size(&cfg);
	mem = aligned_alloc(8, (size + 7) & ~7ULL);
	c = llc_core_init(mem, size, &cfg);
	assert_non_null(c);
	uint16_t short_loop = loop_of(c, 1, 100, 3), long_loop = loop_of(c, 2, 300, 3);
	assert_int_equal(llc_seq_get(c, short_loop)->period_vt, 100);
	assert_int_equal(llc_seq_get(c, long_loop)->period_vt, 300);

	/* A range's own loop: its whole range, pinned or not, and its period. */
	const struct llc_pin_range own[] = { { 1, 0, 50, short_loop } };
	assert_int_equal(llc_plan_pinned_loops(c, own, 1, 64, loops, &period), 1);
	assert_int_equal(period, 100);
	assert_int_equal(loops[0].file, 1);
	assert_int_equal(loops[0].first, 0);
	assert_int_equal(loops[0].count, 100);
	assert_false(llc_plan_reuse_counts(&fault, 100, loops, 1, 1, 70)); /* in the loop, above its pins */
	assert_true(llc_plan_reuse_counts(&fault, 100, loops, 1, 1, 100));
	assert_true(llc_plan_reuse_counts(&fault, 100, loops, 1, 2, 70));
	/* The fault must pass llc_reuse_within, and not be a loop's. */
	assert_false(llc_plan_reuse_counts(&fault, 70, loops, 1, 2, 70));
	const struct llc_verdict loop_fault = { 1, LLMCACHE_CLASS_LOOP, LLC_EV_EXTEND, 150 };
	assert_false(llc_plan_reuse_counts(&loop_fault, 100, loops, 1, 2, 70));

	/* A head of file 2 (no seq): the whole file, and file 2's longest-period loop. */
	const struct llc_pin_range with_head[] = { { 1, 0, 50, short_loop }, { 2, 0, 10, 0 } };
	assert_int_equal(llc_plan_pinned_loops(c, with_head, 2, 64, loops, &period), 2);
	assert_int_equal(period, 300);
	assert_false(llc_plan_reuse_counts(&fault, 100, loops, 2, 2, 1000000));
	assert_int_equal(llc_plan_pinned_loops(c, with_head, 2, 0, loops, &period), 2);
	assert_int_equal(period, 100); /* no walk: the head's loop not seen */

	/* A seq that is no longer one of the range's file's loops counts for nothing; nor do no pins. */
	const struct llc_pin_range stale[] = { { 3, 0, 50, long_loop } };
	assert_int_equal(llc_plan_pinned_loops(c, stale, 1, 64, loops, &period), 0);
	assert_int_equal(period, 0);
	assert_true(llc_plan_reuse_counts(&fault, 100, loops, 0, 3, 10));
	assert_int_equal(llc_plan_pinned_loops(c, NULL, 0, 64, loops, &period), 0);
	assert_int_equal(period, 0);
	free(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_budget__no_limit__configured),
		cmocka_unit_test(plan_budget__limit__what_anon_code_window_and_margin_leave),
		cmocka_unit_test(plan_fits__model_anon_and_code_against_the_limit),
		cmocka_unit_test(plan_mapped_budget__none_when_it_fits_else_the_stream_room_left_out),
		cmocka_unit_test(plan_stream_room__eight_windows_at_most_two_thirds),
		cmocka_unit_test(plan_read_ahead__only_with_eight_windows_in_two_thirds_of_the_room),
		cmocka_unit_test(plan_window__four_units_at_most_an_eighth_of_the_limit),
		cmocka_unit_test(plan_prefetch__pinned_head__window_after_position_then_only_what_is_new),
		cmocka_unit_test(plan_prefetch__scattered_pins__unpinned_runs_only_window_counts_them),
		cmocka_unit_test(plan_prefetch__everything_pinned_or_empty_loop__nothing),
		cmocka_unit_test(plan_position__threads_and_wrap__lagging_thread_ignored_restart_followed),
		cmocka_unit_test(plan_passed__head_loop__a_lag_behind_in_whole_folios_then_the_rest_once_round),
		cmocka_unit_test(plan_passed__scattered_pins_and_full_out__unpinned_runs_and_resumes_where_cut),
		cmocka_unit_test(plan_read_budget__three_read_ahead_windows_beside_the_engine),
		cmocka_unit_test(plan_note_run__merges_what_overlaps_or_touches_else_a_new_run_until_full),
		cmocka_unit_test(plan_drop_tails__only_while_the_unheld_blocks_outnumber_the_room),
		cmocka_unit_test(plan_spare_file__held_folios_on_the_file_lru_are_not_spare),
		cmocka_unit_test(plan_tail_drops__aged_runs_less_the_recent_ones_cut_at_max_out),
		cmocka_unit_test(plan_scan_finished__idle_long_enough_never_mapped_never_when_off),
		cmocka_unit_test(plan_pins__kept_stay_the_plan_fills_the_rest_around_them),
		cmocka_unit_test(plan_pins__budget_below_the_kept__the_last_go_first_from_their_highest_block),
		cmocka_unit_test(plan_heads__files_larger_than_the_budget_from_block_0_in_order_until_spent),
		cmocka_unit_test(plan_reuse_room__faults_of_this_window_and_the_last_then_none),
		cmocka_unit_test(plan_pinned_loops__ranges_own_loops_and_heads_files_whole_longest_period),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
