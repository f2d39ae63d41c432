/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The enforcement planner: pure decisions over snapshots, next to the classifier (core.h), for the
 * kernel module, the daemon (llmcached --mode=bpf) and the simulator, which only execute them. Nothing
 * here touches a page or keeps state of its own: the caller passes what it knows and applies the answer.
 *
 * - The pin budget of an engine in a memory cgroup (llc_plan_budget): the limit less what the engine
 *   needs besides the pins (its anonymous memory, its own hot code and libraries, the streaming window
 *   of the blocks it reads ahead, and a margin), never more than the configured budget.
 * - Whether the loops an engine maps fit beside its own memory (llc_plan_fits): then the kernel's LRU
 *   keeps them, and a pinned head, a window read ahead and the drop of what the engine passed would
 *   only re-read what it would have kept. When they do not, the budget leaves the stream its room
 *   (llc_plan_mapped_budget).
 * - The room an mmap engine's stream needs beside the pins (llc_plan_stream_room): what its faults read
 *   around, what is read ahead and what it passed before it is dropped; and whether anything is
 *   read ahead, which it is not when that room cannot be had (llc_plan_read_ahead).
 * - The read-ahead of a loop that does not fit (llc_plan_prefetch): the unpinned blocks that follow the
 *   engine's position, taken in loop order and wrapping round at the loop's end to its first unpinned
 *   blocks (an iteration ends where the next begins, so the next iteration's first unpinned blocks are
 *   read while the engine computes on its pinned head), at most a window of them. Only what was not
 *   asked for by the previous call is returned.
 * - What such an engine has passed (llc_plan_passed): its unpinned blocks more than a lag behind its
 *   position, and the rest of its last pass once it went round, to be dropped before reclaim has to find
 *   them.
 * - The pin budget of a read() engine (llc_plan_read_budget): the same as an mmap engine's, with the room
 *   of its read-ahead as the stream's.
 * - The tails of a loop that does not fit (llc_plan_note_run, llc_plan_drop_tails, llc_plan_tail_drops):
 *   the runs an engine accessed, noted as it goes, and dropped one call later unless it is still on
 *   them, while the loop's unheld blocks outnumber the room the cache has for them; part of that room
 *   is the clean file LRU pages the module does not hold (llc_plan_spare_file).
 * - Whether a file's scans are finished (llc_plan_scan_finished).
 * - The heads of the files an mmap engine maps under a limit they do not fit (llc_plan_heads): pinned
 *   from the engine's first fault, before any loop is seen.
 * - The pins to hold under a new pin plan (llc_plan_pins): those of mapped files in a loop stay while
 *   the budget holds, and the plan's other blocks take what is left.
 * - The pins the loops give up to blocks that come back within their periods (llc_plan_reuse_room),
 *   measured against the loops the pins hold (llc_plan_pinned_loops, llc_plan_reuse_counts).
 * Documentation/design/planner.md has the reasons and the figures.
 */
#ifndef LLC_PLAN_H
#define LLC_PLAN_H

#include "compat.h"
#include "core.h"

/*
 * The code an engine keeps using of what it maps (its binary, libraries), counted before it is known:
 * node maps about 50 MiB of its binary and llama.cpp keeps 11-15 MiB in use.
 */
#define LLC_PLAN_CODE_KEPT (16ull << 20)

/*
 * The least an mmap engine's stream moves at a time, whatever its device's read-ahead: PMD-size folios,
 * and matrices of several MiB.
 */
#define LLC_PLAN_STREAM_UNIT (4ull << 20)

/* A run of blocks [first, first + count). */
struct llc_span {
	uint64_t first, count;
};

/* What the engine's memory cgroup holds besides the pins, in bytes. */
struct llc_memcg_snapshot {
	uint64_t limit;  /* the cgroup's limit; UINT64_MAX: none */
	uint64_t anon;   /* its anonymous memory: heap, context, compute buffers */
	uint64_t code;   /* the engine's mapped file pages outside the managed files: binary, libraries */
	uint64_t window; /* the blocks read ahead of the engine and not yet passed */
	uint64_t margin; /* slack for what grows between two snapshots */
};

/* The pin budget in bytes: configured, capped to what the cgroup leaves (0 when it leaves nothing). */
uint64_t llc_plan_budget(uint64_t configured, const struct llc_memcg_snapshot *m);

/*
 * Whether loops of loop_bytes fit under limit (bytes; UINT64_MAX: none) beside engine bytes of the
 * engine's own memory (its anonymous memory and the code it keeps mapped). No margin: what overflows by
 * a little, the kernel's LRU handles as it would without llmcache.
 */
int llc_plan_fits(uint64_t limit, uint64_t engine, uint64_t loop_bytes);

/*
 * The pin budget of an mmap engine whose mapped loops are loop_bytes, read in units of readahead bytes:
 * none when they fit beside its anonymous memory and kept_code of its code (what it keeps using of what
 * it mapped; llc_plan_fits), else llc_plan_budget with the room the stream needs (llc_plan_stream_room
 * of what the cgroup leaves besides the engine and the margin) as the window; m->window is not read.
 */
uint64_t llc_plan_mapped_budget(uint64_t configured, const struct llc_memcg_snapshot *m, uint64_t kept_code,
				uint64_t readahead, uint64_t loop_bytes);

/*
 * The room, unlocked, that an mmap engine's stream needs in a cgroup that leaves room bytes for the pins
 * and the stream together: eight read-ahead windows of readahead bytes (four read ahead of the engine,
 * the read-around of its fault, two of passed blocks not dropped yet and one in flight), whatever part
 * of the loops the pins leave out: the stream is read a window ahead and dropped two units behind the
 * engine, so it holds no more of a token's reads at once where more of them are streamed. At most two
 * thirds of room: the pinned head keeps a third.
 */
uint64_t llc_plan_stream_room(uint64_t readahead, uint64_t room);

/*
 * Whether the blocks ahead of such an engine are read ahead of it (llc_plan_prefetch): only when the
 * stream has its eight windows within two thirds of room. Where it has not, the cgroup's reclaim runs
 * all the time and takes the pages read ahead, not mapped and not used yet, before the ones the engine
 * passed, young in its page tables: the engine's own read-around does better.
 */
int llc_plan_read_ahead(uint64_t readahead, uint64_t room);

/*
 * How far ahead of such an engine its stream is read, in bytes, for stream units of readahead bytes
 * under a limit: four units (a matrix or two of the engine's, read while it computes on the one
 * before), an eighth of the limit at most, so that a small cgroup's stream room is not all read ahead.
 */
uint64_t llc_plan_window(uint64_t readahead, uint64_t limit);

/*
 * The blocks to read ahead in a loop over blocks [lo, hi) whose pinned blocks are pinned[0..n_pinned)
 * (sorted, disjoint), for an engine whose last access was at block position: the first `window` unpinned
 * blocks after position in loop order, wrapping at hi to lo. *asked_to is where the previous call's
 * window ended (hi or beyond: none yet); when the new window passes it, only the part from there on is
 * returned, else the whole window. It is set to the new window's end. Writes at most max_out spans to
 * out and returns how many; a window that needs more is cut short (and *asked_to set where it was cut).
 */
uint32_t llc_plan_prefetch(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned,
			   uint64_t position, uint64_t window, uint64_t *asked_to, struct llc_span *out,
			   uint32_t max_out);

/*
 * Where the engine is in that loop after an access at block seen, when it was at position (UINT64_MAX:
 * unknown). An engine's threads split each matrix by rows, so its accesses alternate between places a
 * fraction of a window apart: an access less than a window behind the position (in unpinned blocks) is
 * a thread that lags, and the position stays. An access ahead (the end of the loop is followed by its
 * first unpinned block) or more than a window behind (a restart) moves it.
 */
uint64_t llc_plan_position(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned,
			   uint64_t position, uint64_t seen, uint64_t window);

/*
 * The blocks of a loop over [lo, hi) that an engine at block position has passed since the last call:
 * the unpinned blocks from *dropped_to (where the last call stopped; outside [lo, hi): none yet) to lag
 * blocks behind the position (its threads work up to a lag apart), in whole runs of align blocks (the
 * page cache's folios; a run that ends at hi is whole too). When the position is below *dropped_to, the
 * engine went round: the rest of its last pass, up to hi, comes first. Writes at most max_out spans to
 * out, returns how many, and sets *dropped_to to where they end.
 */
uint32_t llc_plan_passed(uint64_t lo, uint64_t hi, const struct llc_span *pinned, uint32_t n_pinned,
			 uint64_t position, uint64_t lag, uint64_t align, uint64_t *dropped_to, struct llc_span *out,
			 uint32_t max_out);

/*
 * The pin budget of a read() engine (llc_plan_read_budget): llc_plan_budget with three read-ahead windows
 * of readahead bytes as the stream's room (the window being read, the next one, and one for everything
 * else: with 8 MiB windows, 12 MiB of room thrashed and 24 MiB did not); m->window is not read.
 */
uint64_t llc_plan_read_budget(uint64_t configured, const struct llc_memcg_snapshot *m, uint64_t readahead);

/*
 * Note an engine's access to blocks [first, first + count) of a loop among the runs runs[0..*n) noted
 * since the last llc_plan_tail_drops: merged into the first run it overlaps or touches, else a new run
 * when fewer than max are noted. Returns the run's index, or -1 when there was no room (the kernel's
 * reclaim then takes those blocks, as it would without llmcache).
 */
int llc_plan_note_run(struct llc_span *runs, uint32_t *n, uint32_t max, uint64_t first, uint64_t count);

/*
 * Whether a loop's tails are dropped: while its blocks that are not held (pinned) outnumber the room the
 * cache can give them (loop_blocks > held_blocks + room_blocks). A loop that fits is never touched.
 */
int llc_plan_drop_tails(uint64_t loop_blocks, uint64_t held_blocks, uint64_t room_blocks);

/*
 * The clean file LRU pages that reclaim could free instead of the held ones (all counts in pages; it may
 * be negative): file_lru less unclean (dirty and under writeback) less the held folios still on the file
 * LRU. Held folios are marked mlocked, and reclaim moves each to the unevictable list when it first
 * meets it; only then does it leave the file LRU. How many it has moved is the unevictable pages less
 * the mlocked ones that are not held (a process's mlock() moves its pages there at once), at most held:
 * an estimate that counts the other unevictable pages (ramfs, SHM_LOCK) as held folios moved.
 */
int64_t llc_plan_spare_file(uint64_t file_lru, uint64_t unclean, uint64_t unevictable, uint64_t mlocked, uint64_t held);

/*
 * The tails that go: the runs noted before the last call (aged[0..n_aged)) less the blocks noted since
 * (recent[0..n_recent)), where the engine still is, or may still be reading. A block goes one to two
 * calls after its last access. Writes at most max_out spans to out (more are cut: their blocks are left
 * to reclaim) and returns how many. The caller then ages the recent runs.
 */
uint32_t llc_plan_tail_drops(const struct llc_span *aged, uint32_t n_aged, const struct llc_span *recent,
			     uint32_t n_recent, struct llc_span *out, uint32_t max_out);

/*
 * Whether a file's scans are finished and go: its SEQ blocks untouched for idle_ns (0: never). Never a
 * mapped file's: an engine re-reads a mapped page without a fault, so its loop looks like one scan,
 * which must not be dropped while the engine runs, nor when its mappings go. Nor a scan a write brought
 * blocks to: its pages may still be dirty, and dropping them would only start their writeback early
 * (Documentation/design/policy-core.md, "Written blocks").
 */
int llc_plan_scan_finished(int mapped, int written, uint64_t untouched_ns, uint64_t idle_ns);

/*
 * The heads to pin of the files that mmap engines map under a memory cgroup limit they do not fit beside
 * the engines (llc_plan_fits), files[0..n), each given as its blocks [0, blocks) and in the caller's
 * order. An mmap engine reads such a file whole at every token, in file order, and its first pass fills
 * the cgroup with pages that the next ones re-read: the pins are the file's head, planned from the first
 * fault, not the classifier's loop pieces, which come from later passes (and in pieces: the engine does
 * not fault on the pages that stay mapped). Each file larger than budget is a head file: written to out
 * as [0, min(blocks, what is left of budget)) with its seq, in order, a count of 0 once the budget is
 * spent (the caller still reads and drops it as a head). A file that fits in budget is left to the
 * core's plan (llc_pin_plan), which pins a loop whole. Writes at most max ranges and returns how many.
 */
uint32_t llc_plan_heads(const struct llc_pin_range *files, uint32_t n, uint64_t budget, struct llc_pin_range *out,
			uint32_t max);

/*
 * The pins to hold under a new pin plan. kept[0..n_kept) are the pins that stay, in the order they were
 * pinned: the callers keep those of a mapped file that has a LOOP sequence, where only the pin budget
 * bounds them. An mmap engine does not fault on its pinned pages, so a feed sees its loop in pieces
 * whose periods, order and classes change from one iteration to the next, and following each plan
 * exactly would unpin and read the same blocks again and again. Pins under a memory cgroup limit or a
 * file's own pin limit (that budget moves with the engine, and an mmap engine's plan is its file's
 * head) and the pins of files read with read() (every access is seen) follow the plan exactly. The
 * kept pins stay while the budget holds; when it does not, the last ones go first, from their highest
 * block (in the plan's order: the longest-period loops' highest blocks). The plan's blocks that are not
 * kept take what is left of the budget, in plan order. Writes at most max ranges to out (the kept ones
 * first; what does not fit is not pinned) and returns how many: their blocks never exceed budget, and
 * no two overlap when the kept ranges do not.
 */
uint32_t llc_plan_pins(const struct llc_pin_range *kept, uint32_t n_kept, const struct llc_pin_range *plan,
		       uint32_t n_plan, uint64_t budget, struct llc_pin_range *out, uint32_t max);

/*
 * The pins the loops give up to blocks faulted again within two periods of the longest-period loop that
 * holds pins (llc_reuse_within, core.h), where the simulator's miss of such a block takes that loop's
 * highest block. The module and the daemon cannot hand one page's room to another: they count such
 * faults and lower the pin budget by those of the current window and the one before, windows of one
 * period_vt each (the plan for a smaller budget gives up the longest-period loops' highest blocks
 * first), so that the room stays while such blocks keep coming back and returns to the loop two
 * periods after they stop.
 */
struct llc_reuse_room {
	uint64_t window_vt;         /* virtual time the current window began */
	uint64_t in_window, in_last_window; /* faults counted in it and in the one before */
};

/*
 * Count faults (0: none, only the time moves) at virtual time now_vt, in windows of period_vt (0: no
 * loop holds pins, and nothing is counted); returns the blocks given up: in_window + in_last_window.
 */
uint64_t llc_plan_reuse_room(struct llc_reuse_room *r, uint64_t now_vt, uint64_t period_vt, uint64_t faults);

/*
 * The loops pins[0..n) hold, for the faults' test: written to loops[0..) as their whole ranges (a range's
 * own loop, its seq while that sequence is still one of the file's loops: [start, end]; a range without
 * one, a head (llc_plan_heads), the whole file), at most one per pin range, and returned; *period_vt
 * gets the longest of their periods (a head's: its file's longest-period loop among the first `walk`
 * loops of the core's order), 0 when none. O(n + walk * n).
 */
uint32_t llc_plan_pinned_loops(const struct llc_core *c, const struct llc_pin_range *pins, uint32_t n, uint32_t walk,
			       struct llc_pin_range *loops, uint64_t *period_vt);

/*
 * Whether a fault at block of file, which the core classified v, counts (llc_plan_reuse_room): when the
 * block is not a loop's, was last accessed within two periods of period_vt (llc_reuse_within), and lies
 * in no loop the pins hold (loops[0..n), llc_plan_pinned_loops): a piece of such a loop that the core
 * took for HOT or SEQ (an mmap engine faults on its weights in fragments) is the loop's own.
 */
int llc_plan_reuse_counts(const struct llc_verdict *v, uint64_t period_vt, const struct llc_pin_range *loops,
			  uint32_t n, uint64_t file, uint64_t block);

#endif
