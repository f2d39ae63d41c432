// SPDX-License-Identifier: MIT
/* CMocka tests of the policy core: every branch of the classification, the table-full rules, the
 * eviction order, the pin plan and the sizing rule with the paper's worked examples. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "libllmcache/core/core.h"

#define FILE_A 1
#define FILE_B 2
#define FILE_C 3

static struct llc_core *make_core(uint32_t max_seqs, uint32_t max_chunks, uint32_t hot_promote)
{
	struct llc_config cfg = { max_seqs, max_chunks, hot_promote, 65536 };
	uint64_t size = llc_core_size(&cfg);
	void *mem;

	assert_int_not_equal(size, 0);
	mem = aligned_alloc(8, (size + 7) & ~7ULL);
	assert_non_null(mem);
	return llc_core_init(mem, size, &cfg);
}

static struct llc_core *default_core(void)
{
	struct llc_config cfg;

	llc_config_default(&cfg);
	return make_core(cfg.max_seqs, cfg.max_chunks, cfg.hot_promote_blocks);
}

/* Access blocks [first, first + n) of a file in order; returns the verdict of the last one. */
static struct llc_verdict sweep(struct llc_core *c, uint64_t file, uint64_t first, uint64_t n)
{
	struct llc_verdict v = { 0 };

	for (uint64_t b = first; b < first + n; b++)
		v = llc_access(c, file, b, llc_vtime(c) * 1000);
	return v;
}

static const struct llc_seq *seq_of(struct llc_core *c, uint64_t file, uint64_t block)
{
	return llc_seq_get(c, llc_lookup(c, file, block));
}

static void core_init__bad_config__rejected(void **state)
{
	struct llc_config cfg = { 1, 16, 4, 0 };
	static uint64_t mem[64];

	assert_int_equal(llc_core_size(&cfg), 0);
	cfg.max_seqs = 70000;
	assert_int_equal(llc_core_size(&cfg), 0);
	cfg.max_seqs = 16;
	cfg.max_chunks = 1;
	assert_int_equal(llc_core_size(&cfg), 0);
	assert_null(llc_core_init(mem, sizeof(mem), &cfg));
	cfg.max_chunks = 16;
	assert_null(llc_core_init(mem, 8, &cfg)); /* too small */
	assert_null(llc_core_init((char *)mem + 4, sizeof(mem), &cfg));
}

static void core_access__first_touch__new_hot(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v = llc_access(c, FILE_A, 100, 0);

	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
	assert_int_equal(v.event, LLC_EV_NEW_HOT);
	assert_int_equal(llc_lookup(c, FILE_A, 100), v.seq);
	assert_int_equal(llc_lookup(c, FILE_A, 101), LLC_SEQ_NONE);
	assert_int_equal(llc_lookup(c, FILE_B, 100), LLC_SEQ_NONE);
	free(c);
}

static void core_access__sequential_run__hot_then_seq(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v = sweep(c, FILE_A, 0, 4);

	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT); /* 4 blocks: still within hot_promote_blocks */
	v = llc_access(c, FILE_A, 4, 0);
	assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	v = sweep(c, FILE_A, 5, 95);
	assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	assert_int_equal(seq_of(c, FILE_A, 0)->end, 99);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_SEQ), 1);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_HOT), 0);
	assert_int_equal(llc_stats(c)[LLMCACHE_STAT_SEQS_CREATED], 1);
	free(c);
}

static void core_access__hot_rereference__touch_moves_to_lru_tail(void **state)
{
	struct llc_core *c = default_core();
	uint16_t a = llc_access(c, FILE_A, 10, 0).seq;
	uint16_t b = llc_access(c, FILE_A, 20, 0).seq;
	struct llc_verdict v;

	assert_int_equal(llc_first(c, LLMCACHE_CLASS_HOT), a);
	v = llc_access(c, FILE_A, 10, 0);
	assert_int_equal(v.event, LLC_EV_HOT_TOUCH);
	assert_int_equal(v.seq, a);
	assert_int_equal(llc_first(c, LLMCACHE_CLASS_HOT), b);
	assert_int_equal(llc_next(c, b), a);
	assert_int_equal(llc_lru_first(c), b); /* all sequences by last access too */
	assert_int_equal(llc_seq_get(c, b)->lru_next, a);
	assert_int_equal(llc_seq_get(c, a)->lru_next, LLC_SEQ_NONE);
	free(c);
}

static void core_access__hot_neighbour_outside_window__stays_separate(void **state)
{
	struct llc_core *c = default_core();
	uint16_t first = llc_access(c, FILE_A, 10, 0).seq;
	struct llc_verdict v;

	sweep(c, FILE_B, 0, 100); /* 100 unrelated accesses: beyond the adjacency window */
	v = llc_access(c, FILE_A, 11, 0);
	assert_int_equal(v.event, LLC_EV_NEW_HOT);
	assert_int_not_equal(v.seq, first);
	/* Right after a HOT access, the next block does join. */
	v = llc_access(c, FILE_A, 12, 0);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	free(c);
}

static void core_access__seq_reread_from_start__becomes_loop(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	const struct llc_seq *s;

	sweep(c, FILE_A, 0, 100);
	v = llc_access(c, FILE_A, 0, 0);
	assert_int_equal(v.event, LLC_EV_TO_LOOP);
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	s = llc_seq_get(c, v.seq);
	assert_int_equal(s->start, 0);
	assert_int_equal(s->end, 99);
	assert_int_equal(s->period_vt, 100);
	assert_int_equal(s->iterations, 1);
	v = sweep(c, FILE_A, 1, 99);
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_SEQ), 0);
	free(c);
}

/* A loop that stops is keyed by the age of its iteration once that passes twice its period: the
 * start-up code's loops must not keep their place ahead of the loops that still run. */
static void core_loop_order__stopped_loop__keyed_by_its_age(void **state)
{
	struct llc_core *c = default_core();
	const struct llc_seq *a;
	uint16_t loop_a, loop_b;

	sweep(c, FILE_B, 0, 100);
	sweep(c, FILE_B, 0, 100); /* B: a loop of period 100 */
	for (int i = 0; i < 3; i++)
		sweep(c, FILE_A, 0, 10); /* A: period 10 */
	loop_a = llc_lookup(c, FILE_A, 0);
	loop_b = llc_lookup(c, FILE_B, 0);
	a = llc_seq_get(c, loop_a);
	assert_int_equal(a->period_vt, 10);
	assert_int_equal(llc_first(c, LLMCACHE_CLASS_LOOP), loop_b); /* longest period first */
	assert_int_equal(llc_next(c, loop_b), loop_a);
	for (int i = 0; i < 30; i++)
		sweep(c, FILE_B, 0, 100); /* A stops for 3000 accesses, past two aging intervals */
	assert_int_equal(a->period_vt, 10); /* the measured period is kept */
	assert_true(a->order_vt > 2000 && a->order_vt <= 3000);
	assert_int_equal(llc_seq_get(c, loop_b)->order_vt, 100); /* a loop that runs is not aged */
	assert_int_equal(llc_first(c, LLMCACHE_CLASS_LOOP), loop_a); /* released first, pinned last */
	assert_int_equal(llc_next(c, loop_a), loop_b);
	sweep(c, FILE_A, 0, 10); /* A runs again: its next iteration's measured period is its key again */
	assert_int_equal(a->period_vt, 3010);
	assert_int_equal(a->order_vt, 3010);
	free(c);
}

/*
 * The HOT idleness limit: 0 before any loop; twice the period of the biggest loop that still runs, not of
 * the longest-period one: B (100 blocks) read three times for each read of C (10 blocks, period 310).
 */
static void core_hot_idle_limit__twice_the_biggest_running_loops_period(void **state)
{
	struct llc_core *c = default_core();
	uint64_t limit;

	sweep(c, FILE_B, 0, 100);
	assert_int_equal(llc_hot_idle_limit(c), 0);
	for (int i = 0; i < 10; i++) { /* B: period 100 or 110, running at the aging of access 1024 */
		sweep(c, FILE_B, 0, 100);
		sweep(c, FILE_B, 0, 100);
		sweep(c, FILE_B, 0, 100);
		sweep(c, FILE_C, 0, 10);
	}
	assert_int_equal(llc_seq_get(c, llc_lookup(c, FILE_C, 0))->period_vt, 310);
	limit = llc_hot_idle_limit(c);
	assert_true(limit == 200 || limit == 220);
	for (int i = 0; i < 150; i++)
		sweep(c, FILE_A, 0, 10); /* A: period 10; by the aging of access 4096, B and C have stopped */
	assert_int_equal(llc_hot_idle_limit(c), 20); /* A's: the stopped loops no longer count */
	free(c);
}

/* The biggest loop accessed since a virtual time: none before any loop; B (100 blocks) while it was read
 * since, else A (10 blocks); nothing at all after both. */
static void core_biggest_loop_since__biggest_loop_accessed_at_or_after_vt(void **state)
{
	struct llc_core *c = default_core();
	uint64_t first_of_a;

	sweep(c, FILE_B, 0, 100);
	assert_int_equal(llc_biggest_loop_since(c, 0), 0);
	sweep(c, FILE_B, 0, 100); /* B: a loop */
	first_of_a = llc_vtime(c) + 1; /* the virtual time of B's last access is llc_vtime() */
	sweep(c, FILE_A, 0, 10);
	sweep(c, FILE_A, 0, 10); /* A: a loop, read after B */
	assert_int_equal(llc_biggest_loop_since(c, 0), 100);
	assert_int_equal(llc_biggest_loop_since(c, first_of_a - 1), 100);
	assert_int_equal(llc_biggest_loop_since(c, first_of_a), 10);
	assert_int_equal(llc_biggest_loop_since(c, llc_vtime(c) + 1), 0);
	free(c);
}

static void core_access__loop_restart__new_iteration_with_period(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	const struct llc_seq *s;

	sweep(c, FILE_A, 0, 50);
	sweep(c, FILE_A, 0, 50);
	llc_access(c, FILE_B, 7, 0); /* one unrelated access lengthens the period by one */
	v = llc_access(c, FILE_A, 0, 123456789);
	assert_int_equal(v.event, LLC_EV_ITERATION);
	v = llc_access(c, FILE_A, 0, 123456790); /* a moment later: the fault-around that maps the same page */
	assert_int_equal(v.event, LLC_EV_NOISE);
	s = llc_seq_get(c, v.seq);
	assert_int_equal(s->iterations, 2);
	assert_int_equal(s->period_vt, 51);
	assert_true(s->period_ns > 0);
	assert_int_equal(llc_stats(c)[LLMCACHE_STAT_LOOP_ITERATIONS], 2);
	free(c);
}

/*
 * An engine idle between two prompts: one iteration lasts the pause (100 ms against 1 ms). The tokens
 * after it are iterations, each restart a millisecond after the last, and the loop keeps running.
 */
static void core_access__loop_after_pause__next_tokens_are_iterations(void **state)
{
	struct llc_core *c = default_core();
	const struct llc_seq *s;
	uint64_t t = 0;

	for (int token = 0; token < 3; token++, t += 1000000)
		for (uint64_t b = 0; b < 50; b++)
			llc_access(c, FILE_A, b, t);
	t += 100000000;
	for (int token = 0; token < 10; token++, t += 1000000) {
		struct llc_verdict v = llc_access(c, FILE_A, 0, t);

		assert_int_equal(v.event, LLC_EV_ITERATION);
		for (uint64_t b = 1; b < 50; b++)
			llc_access(c, FILE_A, b, t);
	}
	s = seq_of(c, FILE_A, 0);
	assert_int_equal(s->iterations, 12);
	assert_int_equal(s->period_ns, 1000000);
	assert_int_equal(s->order_vt, s->period_vt);
	free(c);
}

static void core_access__seq_reread_from_middle__run_on_becomes_loop_and_cuts_scan(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;

	sweep(c, FILE_A, 0, 100); /* a file scanned whole at start-up: header + weights */
	v = llc_access(c, FILE_A, 60, 0);
	assert_int_equal(v.event, LLC_EV_REREAD);
	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
	assert_int_equal(seq_of(c, FILE_A, 0)->end, 99); /* not cut yet: it may be a random lookup */
	v = sweep(c, FILE_A, 61, 3);
	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
	v = llc_access(c, FILE_A, 64, 0); /* past hot_promote_blocks: a re-read that runs on is a loop */
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	assert_int_equal(seq_of(c, FILE_A, 0)->end, 59);
	assert_int_equal(seq_of(c, FILE_A, 0)->cls, LLMCACHE_CLASS_SEQ);
	assert_int_equal(llc_seq_get(c, v.seq)->iterations, 1);
	/* The rest of the old tail is claimed by the loop as it is re-read. */
	v = sweep(c, FILE_A, 65, 35);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(seq_of(c, FILE_A, 99)->start, 60);
	assert_int_equal(seq_of(c, FILE_A, 99)->end, 99);
	/* The next pass restarts at the loop's first block, not the file's. */
	v = llc_access(c, FILE_A, 60, 0);
	assert_int_equal(v.event, LLC_EV_ITERATION);
	assert_int_equal(llc_seq_get(c, v.seq)->period_vt, 40);
	free(c);
}

/*
 * A file read in requests that are not block-aligned (tensors at 32-byte offsets): each request begins in
 * the block the last one ended in. The scan goes on; re-reading its last block is no re-read of a loop.
 */
static void core_access__request_begins_in_scans_last_block__scan_goes_on(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	uint64_t first;

	for (first = 0; first < 90; first += 9) {
		v = sweep(c, FILE_A, first, 10); /* blocks first..first+9, the next request from first+9 */
		assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	}
	v = llc_access(c, FILE_A, 90, 0);
	assert_int_equal(v.event, LLC_EV_NOISE); /* the scan's last block again */
	assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	assert_int_equal(seq_of(c, FILE_A, 0)->end, 90);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_LOOP), 0);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_SEQ), 1);
	free(c);
}

static void core_access__random_rereads_of_scanned_file__stay_hot(void **state)
{
	struct llc_core *c = default_core();
	static const uint64_t lookups[] = { 17, 3, 200, 17, 90, 3, 201, 17 };

	sweep(c, FILE_B, 0, 256); /* the tokenizer is loaded whole */
	for (unsigned i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
		struct llc_verdict v = llc_access(c, FILE_B, lookups[i], 0);

		assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
		sweep(c, FILE_A, i * 1000, 100); /* weights in between */
	}
	assert_int_equal(llc_access(c, FILE_B, 17, 0).event, LLC_EV_HOT_TOUCH);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_LOOP), 0);
	free(c);
}

/* Blocks [first, first + n) of a request of req blocks (a fault and its fault-around window). */
static struct llc_verdict request(struct llc_core *c, uint64_t file, uint64_t first, uint64_t n, uint64_t req)
{
	struct llc_verdict v = { 0 };

	for (uint64_t b = first; b < first + n; b++)
		v = llc_access_req(c, file, b, req, llc_vtime(c) * 1000);
	return v;
}

static void core_access_req__window_faulted_again__stays_hot(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;

	for (uint64_t w = 0; w < 8; w++) /* code faulted in 16-block windows: a scan, as before */
		v = request(c, FILE_A, w * 16, 16, 16);
	assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	sweep(c, FILE_B, 0, 200); /* the kernel reclaims the window; the engine faults it again */
	v = llc_access_req(c, FILE_A, 48, 16, llc_vtime(c) * 1000);
	assert_int_equal(v.event, LLC_EV_REREAD);
	v = request(c, FILE_A, 49, 15, 16); /* the rest of the same request: one access, no loop */
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
	assert_int_equal(seq_of(c, FILE_A, 0)->end, 127); /* the scan is not cut */
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_LOOP), 0);
	/* The next window runs the re-read on past its request: now it is a loop, and the scan is cut. */
	v = llc_access_req(c, FILE_A, 64, 16, llc_vtime(c) * 1000);
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	assert_int_equal(seq_of(c, FILE_A, 0)->end, 47);
	free(c);
}

static void core_access_req__window_reread_block_by_block__loop_past_hot_promote(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;

	sweep(c, FILE_A, 0, 128);
	sweep(c, FILE_B, 0, 200);
	v = sweep(c, FILE_A, 48, 5); /* the same 16 blocks as one-block requests: the rule of llc_access() */
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	free(c);
}

static void core_access_req__new_window__seq_past_hot_promote(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;

	v = request(c, FILE_A, 0, 4, 4);
	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
	v = request(c, FILE_A, 100, 16, 16); /* never seen: a window faulted once is a scan's */
	assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	assert_int_equal(seq_of(c, FILE_A, 100)->cls, LLMCACHE_CLASS_SEQ);
	free(c);
}

static void core_access__back_to_back_loops__both_iterate(void **state)
{
	struct llc_core *c = default_core();
	uint16_t first, second;

	sweep(c, FILE_A, 0, 100);
	llc_access(c, FILE_A, 50, 0); /* the second half is re-read alone: a loop of its own */
	sweep(c, FILE_A, 51, 49);
	first = llc_access(c, FILE_A, 0, 0).seq; /* now both halves are read every token */
	sweep(c, FILE_A, 1, 49);
	second = llc_access(c, FILE_A, 50, 0).seq;
	assert_int_not_equal(first, second);
	assert_int_equal(llc_seq_get(c, second)->start, 50);
	assert_int_equal(llc_seq_get(c, first)->end, 49);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_LOOP), 2);
	free(c);
}

static void core_access__loop_forward_jump__skip_keeps_loop(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;

	sweep(c, FILE_A, 0, 100);
	sweep(c, FILE_A, 0, 10);
	v = llc_access(c, FILE_A, 50, 0); /* the engine skips tensors 10..49 this token */
	assert_int_equal(v.event, LLC_EV_SKIP);
	v = llc_access(c, FILE_A, 51, 0);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(llc_seq_get(c, v.seq)->iterations, 1);
	free(c);
}

static void core_access__loop_noise_behind_cursor__changes_nothing(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	uint16_t loop;

	sweep(c, FILE_A, 0, 100);
	loop = sweep(c, FILE_A, 0, 40).seq;
	v = llc_access(c, FILE_A, 7, 0); /* a header re-read in the middle of the sweep */
	assert_int_equal(v.event, LLC_EV_NOISE);
	assert_int_equal(llc_seq_get(c, loop)->cursor, 39);
	v = llc_access(c, FILE_A, 40, 0); /* the sweep goes on undisturbed */
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(v.seq, loop);
	assert_int_equal(llc_seq_get(c, loop)->iterations, 1);
	free(c);
}

/* A loop is marked retouch by noise at most LLC_RETOUCH_BLOCKS behind its cursor (an mmap fault-around
 * mapping again the window a fault just read), not by noise further back nor by clean sweeps. */
static void core_access__loop_retouch_just_behind_cursor__marked(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	uint16_t loop;

	sweep(c, FILE_A, 0, 1000);
	sweep(c, FILE_A, 0, 1000);
	loop = sweep(c, FILE_A, 0, 500).seq;
	assert_int_equal(llc_seq_get(c, loop)->retouch, 0); /* two clean iterations */
	v = llc_access(c, FILE_A, 499 - LLC_RETOUCH_BLOCKS, 0);
	assert_int_equal(v.event, LLC_EV_NOISE);
	assert_int_equal(llc_seq_get(c, loop)->retouch, 0); /* too far behind */
	v = llc_access(c, FILE_A, 500 - LLC_RETOUCH_BLOCKS, 0);
	assert_int_equal(v.event, LLC_EV_NOISE);
	assert_int_equal(llc_seq_get(c, loop)->retouch, 1);
	assert_int_equal(llc_seq_get(c, loop)->cursor, 499); /* still noise: nothing else changes */
	v = llc_access(c, FILE_A, 500, 0);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(v.seq, loop);
	free(c);
}

/* An mmap engine does not fault on pinned pages: once the head is pinned, each token faults from block 2000. */
static void core_access__loop_head_unseen__jump_back_from_end_is_iteration(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	const struct llc_seq *s;

	sweep(c, FILE_A, 0, 4000);
	sweep(c, FILE_A, 0, 4000);
	for (int token = 0; token < 3; token++) {
		v = llc_access(c, FILE_A, 2000, llc_vtime(c) * 1000);
		assert_int_equal(v.event, LLC_EV_ITERATION);
		sweep(c, FILE_A, 2001, 1999);
	}
	s = llc_seq_get(c, v.seq);
	assert_int_equal(s->start, 0);
	assert_int_equal(s->iterations, 4);
	assert_int_equal(s->period_vt, 2000);
	assert_int_equal(s->period_ns, 2000000);
	free(c);
}

/* Jumps back that are not a restart: far behind mid-iteration, a large folio mapped again at the end, a
 * second jump right after the first. */
static void core_access__loop_jump_back_not_restart__noise(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;
	uint16_t loop;
	uint64_t t;

	sweep(c, FILE_A, 0, 4000);
	loop = sweep(c, FILE_A, 0, 3000).seq;
	v = llc_access(c, FILE_A, 100, llc_vtime(c) * 1000); /* the cursor is not in the last eighth */
	assert_int_equal(v.event, LLC_EV_NOISE);
	sweep(c, FILE_A, 3000, 1000);
	v = llc_access(c, FILE_A, 3488, llc_vtime(c) * 1000); /* a 2 MiB folio mapped again */
	assert_int_equal(v.event, LLC_EV_NOISE);
	t = llc_vtime(c) * 1000;
	v = llc_access(c, FILE_A, 2000, t); /* the next token, past a pinned head */
	assert_int_equal(v.event, LLC_EV_ITERATION);
	for (uint64_t b = 2001; b < 4000; b++)
		llc_access(c, FILE_A, b, t + 1);
	v = llc_access(c, FILE_A, 2000, t + 2); /* a moment later: not a token */
	assert_int_equal(v.event, LLC_EV_NOISE);
	assert_int_equal(v.seq, loop);
	assert_int_equal(llc_seq_get(c, loop)->iterations, 2);
	free(c);
}

/* Without a clock (every time 0), the fault and the fault-around on a loop's first block are one restart. */
static void core_access__loop_start_twice_without_clock__one_iteration(void **state)
{
	struct llc_core *c = default_core();
	struct llc_verdict v;

	for (int pass = 0; pass < 2; pass++)
		for (uint64_t b = 0; b < 50; b++)
			llc_access(c, FILE_A, b, 0);
	v = llc_access(c, FILE_A, 0, 0);
	assert_int_equal(v.event, LLC_EV_ITERATION);
	v = llc_access(c, FILE_A, 0, 0);
	assert_int_equal(v.event, LLC_EV_NOISE);
	v = llc_access(c, FILE_A, 1, 0);
	assert_int_equal(v.event, LLC_EV_EXTEND);
	assert_int_equal(llc_seq_get(c, v.seq)->iterations, 2);
	free(c);
}

static void core_access__interleaved_streams__each_run_extends(void **state)
{
	struct llc_core *c = default_core();
	uint16_t a, b;

	/* Two threads sweeping two halves of one file, interleaved access by access. */
	for (uint64_t i = 0; i < 50; i++) {
		llc_access(c, FILE_A, i, 0);
		llc_access(c, FILE_A, 1000 + i, 0);
	}
	a = llc_lookup(c, FILE_A, 0);
	b = llc_lookup(c, FILE_A, 1000);
	assert_int_not_equal(a, b);
	assert_int_equal(llc_seq_get(c, a)->end, 49);
	assert_int_equal(llc_seq_get(c, b)->end, 1049);
	assert_int_equal(llc_class_count(c, LLMCACHE_CLASS_SEQ), 2);
	free(c);
}

static void core_access__run_into_next_sequence__takes_its_blocks(void **state)
{
	struct llc_core *c = default_core();
	uint16_t later, run;

	later = sweep(c, FILE_A, 10, 2).seq; /* a short HOT run at 10..11 */
	sweep(c, FILE_B, 0, 100);
	run = sweep(c, FILE_A, 0, 11).seq; /* a scan from 0 reaches 10: block 10 changes hands */
	assert_int_equal(llc_lookup(c, FILE_A, 10), run);
	assert_int_equal(llc_seq_get(c, later)->start, 11);
	sweep(c, FILE_A, 11, 1); /* and 11: the short run is empty and freed */
	assert_null(llc_seq_get(c, later));
	assert_int_equal(llc_seq_get(c, run)->end, 11);
	free(c);
}

static void core_access__writes_loop__classified_like_reads(void **state)
{
	struct llc_core *c = default_core();

	/* The core sees blocks, not operations: a write loop is a loop (the paper's Text Embedder). */
	sweep(c, FILE_A, 1500, 500);
	assert_int_equal(llc_access(c, FILE_A, 1500, 0).event, LLC_EV_TO_LOOP);
	free(c);
}

static void core_table_full__least_recent_sequence__recycled(void **state)
{
	struct llc_core *c = make_core(4, 64, 4);
	struct llc_verdict v;

	for (uint64_t i = 0; i < 4; i++)
		llc_access(c, FILE_A, i * 100, 0);
	llc_access(c, FILE_A, 0, 0); /* block 0's sequence is now the most recent */
	v = llc_access(c, FILE_A, 500, 0);
	assert_int_equal(v.event, LLC_EV_NEW_HOT);
	assert_int_equal(llc_stats(c)[LLMCACHE_STAT_SEQS_RECYCLED], 1);
	assert_int_equal(llc_lookup(c, FILE_A, 100), LLC_SEQ_NONE); /* the least recent one went */
	assert_int_not_equal(llc_lookup(c, FILE_A, 0), LLC_SEQ_NONE);
	/* Block 100 was seen: coming back, it counts as a re-reference. */
	v = llc_access(c, FILE_A, 100, 0);
	assert_int_equal(v.event, LLC_EV_SEEN_AGAIN);
	assert_int_equal(v.cls, LLMCACHE_CLASS_HOT);
	/* ... a re-read: running on, it is a loop, not a scan. */
	v = sweep(c, FILE_A, 101, 4);
	assert_int_equal(v.cls, LLMCACHE_CLASS_LOOP);
	free(c);
}

static void core_index_full__least_recent_chunk__forgotten(void **state)
{
	struct llc_core *c = make_core(64, 2, 4);

	llc_access(c, FILE_A, 0, 0);                       /* chunk 0 */
	llc_access(c, FILE_A, LLC_CHUNK_BLOCKS, 0);        /* chunk 1 */
	llc_access(c, FILE_A, 0, 0);                       /* chunk 0 is now more recent */
	llc_access(c, FILE_A, 5 * LLC_CHUNK_BLOCKS, 0);    /* a third chunk: chunk 1 is recycled */
	assert_int_equal(llc_stats(c)[LLMCACHE_STAT_CHUNKS_RECYCLED], 1);
	assert_int_equal(llc_lookup(c, FILE_A, LLC_CHUNK_BLOCKS), LLC_SEQ_NONE);
	assert_int_not_equal(llc_lookup(c, FILE_A, 0), LLC_SEQ_NONE);
	assert_int_not_equal(llc_lookup(c, FILE_A, 5 * LLC_CHUNK_BLOCKS), LLC_SEQ_NONE);
	/* A forgotten block is never-seen again: HOT, not a re-reference. */
	assert_int_equal(llc_access(c, FILE_A, LLC_CHUNK_BLOCKS, 0).event, LLC_EV_NEW_HOT);
	free(c);
}

static void core_index__many_chunks_recycled__lookups_stay_correct(void **state)
{
	struct llc_core *c = make_core(1024, 8, 4);

	/* Churn the hash table through many insertions and backward-shift deletions. */
	for (uint64_t i = 0; i < 2000; i++)
		llc_access(c, (i * 7) % 5, (i * 13 % 97) * LLC_CHUNK_BLOCKS, 0);
	for (uint64_t i = 1992; i < 2000; i++) { /* the last 8 chunks touched */
		uint64_t file = (i * 7) % 5, block = (i * 13 % 97) * LLC_CHUNK_BLOCKS;

		assert_int_not_equal(llc_lookup(c, file, block), LLC_SEQ_NONE);
	}
	free(c);
}

static void core_evict_order__seq_oldest_first_loop_longest_period_first(void **state)
{
	struct llc_core *c = default_core();
	uint16_t scan1, scan2, short_loop, long_loop;

	scan1 = sweep(c, FILE_A, 0, 10).seq;
	scan2 = sweep(c, FILE_A, 100, 10).seq;
	assert_int_equal(llc_first(c, LLMCACHE_CLASS_SEQ), scan1);
	assert_int_equal(llc_next(c, scan1), scan2);

	long_loop = sweep(c, FILE_B, 0, 200).seq;
	short_loop = sweep(c, FILE_B, 1000, 20).seq;
	sweep(c, FILE_B, 1000, 20); /* period 20 */
	sweep(c, FILE_B, 0, 200);   /* period 240 */
	assert_int_equal(llc_first(c, LLMCACHE_CLASS_LOOP), long_loop);
	assert_int_equal(llc_next(c, long_loop), short_loop);
}

static void core_loop_order__period_jitter__order_kept(void **state)
{
	struct llc_core *c = default_core();
	uint16_t weights, scratch;

	/* Two loops once per token; a few extra accesses alternate between them, as hot-set traffic does. */
	for (int token = 0; token < 12; token++) {
		sweep(c, FILE_A, 0, 100);
		sweep(c, FILE_B, 10000 + token * 100, 2 + 3 * (token % 2)); /* 2 or 5 fresh blocks */
		sweep(c, FILE_B, 0, 100);
	}
	weights = llc_lookup(c, FILE_A, 0);
	scratch = llc_lookup(c, FILE_B, 0);
	assert_int_equal(llc_seq_get(c, weights)->cls, LLMCACHE_CLASS_LOOP);
	assert_int_equal(llc_seq_get(c, scratch)->cls, LLMCACHE_CLASS_LOOP);
	/* Periods differ by a few accesses and swap which is longer every token: the order stays put. */
	uint16_t first = llc_first(c, LLMCACHE_CLASS_LOOP);
	for (int token = 0; token < 4; token++) {
		sweep(c, FILE_A, 0, 100);
		sweep(c, FILE_B, 20000 + token * 100, 2 + 3 * (token % 2));
		sweep(c, FILE_B, 0, 100);
		assert_int_equal(llc_first(c, LLMCACHE_CLASS_LOOP), first);
	}
	/* A real change of period (the scratch loop now runs every other token) does reorder. */
	for (int token = 0; token < 3; token++) {
		sweep(c, FILE_A, 0, 100);
		sweep(c, FILE_A, 0, 100);
		sweep(c, FILE_B, 0, 100);
	}
	assert_int_equal(llc_first(c, LLMCACHE_CLASS_LOOP), scratch);
	free(c);
}

static void core_evict_class__by_residency_and_reserve(void **state)
{
	uint64_t r[LLMCACHE_NR_CLASSES] = { 0 };

	r[LLMCACHE_CLASS_SEQ] = 1;
	r[LLMCACHE_CLASS_HOT] = 100;
	r[LLMCACHE_CLASS_LOOP] = 100;
	assert_int_equal(llc_evict_class(r, 10), LLMCACHE_CLASS_SEQ);
	r[LLMCACHE_CLASS_SEQ] = 0;
	assert_int_equal(llc_evict_class(r, 10), LLMCACHE_CLASS_HOT);  /* HOT over its reserve */
	assert_int_equal(llc_evict_class(r, 100), LLMCACHE_CLASS_LOOP); /* HOT within its reserve */
	r[LLMCACHE_CLASS_LOOP] = 0;
	assert_int_equal(llc_evict_class(r, 100), LLMCACHE_CLASS_HOT);  /* nothing else left */
}

static void core_pin_plan__shorter_period_loops_first_from_lowest_block(void **state)
{
	struct llc_core *c = default_core();
	struct llc_pin_range plan[4], smaller[4];
	uint32_t n;

	sweep(c, FILE_A, 0, 300); /* weights: 300 blocks */
	sweep(c, FILE_B, 50, 40); /* tokenizer: 40 blocks */
	sweep(c, FILE_B, 50, 40);
	sweep(c, FILE_A, 0, 300);
	sweep(c, FILE_B, 50, 40);

	n = llc_pin_plan(c, 100, plan, 4);
	assert_int_equal(n, 2);
	assert_int_equal(plan[0].file, FILE_B);
	assert_int_equal(plan[0].first, 50);
	assert_int_equal(plan[0].count, 40);
	assert_int_equal(plan[1].file, FILE_A);
	assert_int_equal(plan[1].first, 0);
	assert_int_equal(plan[1].count, 60);

	/* Shrinking the budget releases the longest-period loop's highest blocks first. */
	n = llc_pin_plan(c, 50, smaller, 4);
	assert_int_equal(n, 2);
	assert_int_equal(smaller[0].count, 40);
	assert_int_equal(smaller[1].first, 0);
	assert_int_equal(smaller[1].count, 10);
	n = llc_pin_plan(c, 30, smaller, 4);
	assert_int_equal(n, 1);
	assert_int_equal(smaller[0].file, FILE_B);
	assert_int_equal(smaller[0].count, 30);

	assert_int_equal(llc_pin_plan(c, 0, smaller, 4), 0);
	assert_int_equal(llc_pin_plan(c, 1000, smaller, 1), 1); /* never more than max ranges */
	free(c);
}

/*
 * A model file's loop: its first 256 blocks (the token embedding) are read one block an iteration, the
 * rest whole. Once chunks 1-3 have gone untouched for two periods they are cold: the plan leaves them out
 * and spends their budget on the weights.
 */
static void core_pin_plan__chunks_cold_for_two_periods__left_out(void **state)
{
	struct llc_core *c = default_core();
	struct llc_pin_range plan[4];
	uint16_t loop;
	uint32_t n;
	int i;

	sweep(c, FILE_A, 0, 640);
	sweep(c, FILE_A, 0, 640); /* a loop of 640 blocks */
	loop = llc_lookup(c, FILE_A, 0);
	n = llc_pin_plan(c, 1000, plan, 4);
	assert_int_equal(n, 1);
	assert_int_equal(plan[0].count, 640); /* nothing cold yet */
	sweep(c, FILE_A, 0, 1);
	sweep(c, FILE_A, 256, 384); /* an iteration: one embedding row, then the weights */
	assert_false(llc_block_cold(c, loop, 100)); /* untouched for 1.4 periods of 640 */
	for (i = 0; i < 3; i++) {
		sweep(c, FILE_A, 0, 1);
		sweep(c, FILE_A, 256, 384);
	}
	assert_int_equal(llc_seq_get(c, loop)->period_vt, 385);
	assert_true(llc_block_cold(c, loop, 64));
	assert_true(llc_block_cold(c, loop, 255));
	assert_false(llc_block_cold(c, loop, 0)); /* the row read every iteration keeps its chunk */
	assert_false(llc_block_cold(c, loop, 256));
	assert_false(llc_block_cold(c, loop, 640)); /* not in the loop */

	n = llc_pin_plan(c, 1000, plan, 4);
	assert_int_equal(n, 2);
	assert_int_equal(plan[0].first, 0);
	assert_int_equal(plan[0].count, 64);
	assert_int_equal(plan[1].first, 256);
	assert_int_equal(plan[1].count, 384);
	assert_int_equal(plan[1].seq, loop);
	n = llc_pin_plan(c, 100, plan, 4); /* the budget goes past the cold chunks */
	assert_int_equal(n, 2);
	assert_int_equal(plan[1].first, 256);
	assert_int_equal(plan[1].count, 36);
	assert_int_equal(llc_pin_plan(c, 1000, plan, 1), 1); /* never more than max ranges */
	assert_int_equal(plan[0].count, 64);

	sweep(c, FILE_B, 0, 3000); /* the loop stops: judged at its last iteration's start, nothing changes */
	assert_true(llc_block_cold(c, loop, 64));
	assert_false(llc_block_cold(c, loop, 256));
	assert_int_equal(llc_pin_plan(c, 100, plan, 4), 2);

	sweep(c, FILE_A, 64, 192); /* the embedding read whole again: warm */
	n = llc_pin_plan(c, 1000, plan, 4);
	assert_int_equal(n, 1);
	assert_int_equal(plan[0].count, 640);
	free(c);
}

/* 4 KiB blocks per second of a decimal MB/s figure, as llmcachectl converts them. */
#define MBPS(x) ((uint64_t)(x) * 1000000 / 4096)
#define MIB_BLOCKS(x) ((uint64_t)(x) * 256)
#define MS(x) ((uint64_t)(x) * 1000000)

static void sizing__watch_example__about_70MB_loop(void **state)
{
	/* 64 MiB cache, 4 MiB hot set, eMMC 100 MB/s, T = 0.1 s. */
	uint64_t n = llc_size_max_loop(MIB_BLOCKS(64 - 4), MBPS(100), MS(100));

	assert_int_equal(n, 15360 + 2441);
	assert_in_range(n * 4096, 69000000, 73000000); /* the paper's "~70 MB" */
	/* The inverse rule gives back (within rounding) the cache the loop needs. */
	assert_int_equal(llc_size_min_blocks(n, MBPS(100), MS(100)), 15360 - 1);
	assert_int_equal(llc_stall_ns(n, MIB_BLOCKS(60), MBPS(100), MS(100)), 0);
}

static void sizing__phone_example__356_to_612MB(void **state)
{
	/* 256-512 MiB for loops, UFS 1 GB/s, T = 0.1 s: 256 + 100 and 512 + 100 in the paper's units. */
	uint64_t lo = llc_size_max_loop(MIB_BLOCKS(256), MBPS(1000), MS(100));
	uint64_t hi = llc_size_max_loop(MIB_BLOCKS(512), MBPS(1000), MS(100));

	assert_int_equal(lo - MIB_BLOCKS(256), 24414); /* 100 MB of fetch in 0.1 s */
	assert_int_equal(hi - MIB_BLOCKS(512), 24414);
	assert_in_range(lo * 4096 / 1048576, 350, 360);
	assert_in_range(hi * 4096 / 1048576, 606, 616);
}

static void sizing__min_blocks__floor_and_clamp(void **state)
{
	assert_int_equal(llc_size_min_blocks(1000, 1000, MS(100)), 900);
	assert_int_equal(llc_size_min_blocks(1000, 1001, MS(100)), 899); /* floor(1000 - 100.1) */
	assert_int_equal(llc_size_min_blocks(50, 1000, MS(100)), 0);
	assert_int_equal(llc_size_min_blocks(1000, 0, MS(100)), 1000);
}

static void sizing__stall__deficit_over_bandwidth_minus_t(void **state)
{
	assert_int_equal(llc_stall_ns(1000, 0, 1000, MS(100)), MS(900));
	assert_int_equal(llc_stall_ns(1000, 500, 1000, MS(100)), MS(400));
	assert_int_equal(llc_stall_ns(1000, 900, 1000, MS(100)), 0);
	assert_int_equal(llc_stall_ns(1000, 1000, 1000, MS(100)), 0);
	assert_int_equal(llc_stall_ns(3, 0, 2, 0), 1500000000ULL);
	assert_int_equal(llc_stall_ns(1000, 0, 0, MS(100)), ~0ULL);
}

static uint64_t next_random(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Requests of three files (sweeps continued, loops restarted, lookups, jumps) fed to a and b, a block at a
 * time to a and with llc_access_extend() to b: the verdicts' classes and the two cores stay identical. */
static void check_extend_equivalence(struct llc_core *a, struct llc_core *b, uint32_t max_seqs)
{
	uint64_t x = 88172645463325252ULL, cursor[4] = { 0 }, extended = 0;

	for (int r = 0; r < 20000; r++) {
		uint64_t file = 1 + next_random(&x) % 3, kind = next_random(&x) % 100, first, len;
		uint64_t cls_a[LLMCACHE_NR_CLASSES] = { 0 }, cls_b[LLMCACHE_NR_CLASSES] = { 0 }, reuse_a[300];

		if (kind < 50)
			first = cursor[file], len = 1 + next_random(&x) % 200;
		else if (kind < 65)
			first = 0, len = 1 + next_random(&x) % 200;
		else if (kind < 85)
			first = next_random(&x) % 5000, len = 1 + next_random(&x) % 3;
		else
			first = next_random(&x) % 5000, len = 1 + next_random(&x) % 300;
		cursor[file] = first + len < 5000 ? first + len : 0;
		for (uint64_t blk = first; blk < first + len; blk++) {
			struct llc_verdict v = llc_access(a, file, blk, llc_vtime(a) * 1000);

			cls_a[v.cls]++;
			reuse_a[blk - first] = v.reuse_vt;
		}
		for (uint64_t blk = first; blk < first + len;) {
			struct llc_verdict v = llc_access(b, file, blk, llc_vtime(b) * 1000);
			uint64_t k = llc_access_extend(b, file, blk + 1, first + len - blk - 1, v.seq);

			/* The extended blocks were written into the recent-access table as llc_access() writes them. */
			assert_int_equal(v.reuse_vt, reuse_a[blk - first]);

			cls_b[v.cls] += 1 + k;
			extended += k;
			blk += 1 + k;
		}
		assert_memory_equal(cls_a, cls_b, sizeof(cls_a));
		assert_int_equal(llc_vtime(a), llc_vtime(b));
		assert_memory_equal(llc_stats(a), llc_stats(b), LLMCACHE_NR_STATS * sizeof(uint64_t));
	}
	assert_true(extended > 100000); /* the fast path did most of the work */
	for (uint16_t id = 1; id <= max_seqs; id++) {
		const struct llc_seq *p = llc_seq_get(a, id), *q = llc_seq_get(b, id);

		assert_true((p == NULL) == (q == NULL));
		if (!p)
			continue;
		assert_int_equal(p->file, q->file);
		assert_int_equal(p->start, q->start);
		assert_int_equal(p->end, q->end);
		assert_int_equal(p->cursor, q->cursor);
		assert_int_equal(p->last_vt, q->last_vt);
		assert_int_equal(p->period_vt, q->period_vt);
		assert_int_equal(p->iterations, q->iterations);
		assert_int_equal(p->cls, q->cls);
		assert_int_equal(p->list_next, q->list_next);
		assert_int_equal(p->lru_next, q->lru_next);
	}
}

static void access_extend__request_traces__same_as_per_block(void **state)
{
	struct llc_config cfg;

	llc_config_default(&cfg);
	check_extend_equivalence(default_core(), default_core(), cfg.max_seqs);
	/* Small tables: sequences and index chunks are recycled all along. */
	check_extend_equivalence(make_core(64, 16, 4), make_core(64, 16, 4), 64);
}

static void core_stats__classified_accesses__counted_per_class(void **state)
{
	struct llc_core *c = default_core();
	const uint64_t *st;

	sweep(c, FILE_A, 0, 10); /* 4 HOT (growing), then 6 SEQ */
	sweep(c, FILE_A, 0, 10); /* 10 LOOP */
	llc_access(c, FILE_B, 3, 0);
	st = llc_stats(c);
	assert_int_equal(st[LLMCACHE_STAT_ACCESSES], 21);
	assert_int_equal(st[LLMCACHE_STAT_HOT_BLOCKS], 4 + 1);
	assert_int_equal(st[LLMCACHE_STAT_SEQ_BLOCKS], 6);
	assert_int_equal(st[LLMCACHE_STAT_LOOP_BLOCKS], 10);
	free(c);
}

static void core_reuse__recent_table__accesses_since_the_previous_one(void **state)
{
	struct llc_core *c = default_core();
	struct llc_config cfg = { 16, 16, 4, 1 };
	struct llc_verdict v;
	uint64_t size = llc_core_size(&cfg);
	void *mem = aligned_alloc(8, (size + 7) & ~7ULL);
	struct llc_core *one;

	assert_int_equal(llc_access(c, FILE_A, 7, 0).reuse_vt, 0); /* never seen */
	sweep(c, FILE_B, 0, 10);
	assert_int_equal(llc_access(c, FILE_A, 7, 0).reuse_vt, 11);
	assert_int_equal(llc_access(c, FILE_A, 7, 0).reuse_vt, 1);
	assert_int_equal(llc_access(c, FILE_B, 3, 0).reuse_vt, 9);
	assert_int_equal(llc_access(c, FILE_C, 3, 0).reuse_vt, 0); /* the same block of another file */
	/*
	 * A fault-around window is classified but not remembered, nor are the blocks extended after it;
	 * those extended after a remembered access are.
	 */
	sweep(c, 4, 0, 10); /* a scan: SEQ from block 4 */
	v = llc_access_mapped(c, 4, 10, 3, 0);
	assert_int_equal(v.cls, LLMCACHE_CLASS_SEQ);
	assert_int_equal(llc_access_extend(c, 4, 11, 2, v.seq), 2);
	v = llc_access(c, 4, 13, 0);
	assert_int_equal(llc_access_extend(c, 4, 14, 1, v.seq), 1);
	assert_int_equal(llc_access(c, 4, 11, 0).reuse_vt, 0);
	assert_int_equal(llc_access(c, 4, 14, 0).reuse_vt, 2);
	assert_int_equal(llc_access(c, 4, 9, 0).reuse_vt, 8);
	free(c);

	/* One slot: a newer block takes it, and the older one's distance is forgotten. */
	one = llc_core_init(mem, size, &cfg);
	assert_non_null(one);
	llc_access(one, FILE_A, 1, 0);
	llc_access(one, FILE_A, 2, 0);
	assert_int_equal(llc_access(one, FILE_A, 1, 0).reuse_vt, 0);
	assert_int_equal(llc_access(one, FILE_A, 1, 0).reuse_vt, 1);
	free(mem);

	cfg.recent_slots = 3; /* not a power of two */
	assert_int_equal(llc_core_size(&cfg), 0);
	cfg.recent_slots = 0; /* none: nothing is remembered */
	size = llc_core_size(&cfg);
	mem = aligned_alloc(8, (size + 7) & ~7ULL);
	one = llc_core_init(mem, size, &cfg);
	llc_access(one, FILE_A, 1, 0);
	assert_int_equal(llc_access(one, FILE_A, 1, 0).reuse_vt, 0);
	free(mem);
}

static void core_reuse_within__under_two_periods_of_the_loop(void **state)
{
	assert_false(llc_reuse_within(0, 100)); /* not remembered */
	assert_false(llc_reuse_within(80, 0));  /* no period measured */
	assert_false(llc_reuse_within(LLC_REUSE_FLOOR - 1, 100)); /* the same fault's window */
	assert_true(llc_reuse_within(LLC_REUSE_FLOOR, 100));
	assert_true(llc_reuse_within(199, 100));
	assert_false(llc_reuse_within(200, 100));
	assert_false(llc_reuse_within(80, ~0ULL)); /* a loop whose period is unknown */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(core_init__bad_config__rejected),
		cmocka_unit_test(core_access__first_touch__new_hot),
		cmocka_unit_test(core_access__sequential_run__hot_then_seq),
		cmocka_unit_test(core_access__hot_rereference__touch_moves_to_lru_tail),
		cmocka_unit_test(core_access__hot_neighbour_outside_window__stays_separate),
		cmocka_unit_test(core_access__seq_reread_from_start__becomes_loop),
		cmocka_unit_test(core_access__loop_restart__new_iteration_with_period),
		cmocka_unit_test(core_access__loop_after_pause__next_tokens_are_iterations),
		cmocka_unit_test(core_access__seq_reread_from_middle__run_on_becomes_loop_and_cuts_scan),
		cmocka_unit_test(core_access__request_begins_in_scans_last_block__scan_goes_on),
		cmocka_unit_test(core_access__random_rereads_of_scanned_file__stay_hot),
		cmocka_unit_test(core_access_req__window_faulted_again__stays_hot),
		cmocka_unit_test(core_access_req__window_reread_block_by_block__loop_past_hot_promote),
		cmocka_unit_test(core_access_req__new_window__seq_past_hot_promote),
		cmocka_unit_test(core_access__back_to_back_loops__both_iterate),
		cmocka_unit_test(core_access__loop_forward_jump__skip_keeps_loop),
		cmocka_unit_test(core_access__loop_noise_behind_cursor__changes_nothing),
		cmocka_unit_test(core_access__loop_retouch_just_behind_cursor__marked),
		cmocka_unit_test(core_access__loop_head_unseen__jump_back_from_end_is_iteration),
		cmocka_unit_test(core_access__loop_jump_back_not_restart__noise),
		cmocka_unit_test(core_access__loop_start_twice_without_clock__one_iteration),
		cmocka_unit_test(core_access__interleaved_streams__each_run_extends),
		cmocka_unit_test(core_access__run_into_next_sequence__takes_its_blocks),
		cmocka_unit_test(core_access__writes_loop__classified_like_reads),
		cmocka_unit_test(core_table_full__least_recent_sequence__recycled),
		cmocka_unit_test(core_index_full__least_recent_chunk__forgotten),
		cmocka_unit_test(core_index__many_chunks_recycled__lookups_stay_correct),
		cmocka_unit_test(core_evict_order__seq_oldest_first_loop_longest_period_first),
		cmocka_unit_test(core_loop_order__period_jitter__order_kept),
		cmocka_unit_test(core_evict_class__by_residency_and_reserve),
		cmocka_unit_test(core_pin_plan__shorter_period_loops_first_from_lowest_block),
		cmocka_unit_test(core_pin_plan__chunks_cold_for_two_periods__left_out),
		cmocka_unit_test(sizing__watch_example__about_70MB_loop),
		cmocka_unit_test(sizing__phone_example__356_to_612MB),
		cmocka_unit_test(sizing__min_blocks__floor_and_clamp),
		cmocka_unit_test(sizing__stall__deficit_over_bandwidth_minus_t),
		cmocka_unit_test(core_stats__classified_accesses__counted_per_class),
		cmocka_unit_test(access_extend__request_traces__same_as_per_block),
		cmocka_unit_test(core_loop_order__stopped_loop__keyed_by_its_age),
		cmocka_unit_test(core_hot_idle_limit__twice_the_biggest_running_loops_period),
		cmocka_unit_test(core_biggest_loop_since__biggest_loop_accessed_at_or_after_vt),
		cmocka_unit_test(core_reuse__recent_table__accesses_since_the_previous_one),
		cmocka_unit_test(core_reuse_within__under_two_periods_of_the_loop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
