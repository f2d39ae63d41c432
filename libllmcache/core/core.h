/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The llmcache policy core: Algorithm 1 of Kim, Lee and Bahn (block-sequence classification into SEQ,
 * LOOP and HOT), its eviction order, the loop pin plan and the sizing rule. Freestanding C compiled both
 * into llmcache.ko and into userspace (simulator, daemon, tests), so the simulator replays exactly what
 * the kernel runs. See Documentation/design/policy-core.md for the decisions on the cases the paper leaves
 * open.
 *
 * Memory: the caller allocates llc_core_size(cfg) bytes and passes them to llc_core_init(); nothing is
 * allocated afterwards. All operations are O(1) per block access except where noted.
 * Concurrency: none; the caller serialises calls on one core.
 */
#ifndef LLC_CORE_H
#define LLC_CORE_H

#include "compat.h"
#include "../../include/uapi/llmcache.h"

#define LLC_SEQ_NONE 0 /* sequence ids are 1..max_seqs */
#define LLC_CHUNK_BLOCKS 64 /* the block index groups blocks of a file in aligned runs of this size */

struct llc_config {
	uint32_t max_seqs;           /* sequence table size, at most 65535 */
	uint32_t max_chunks;         /* block-index chunks of LLC_CHUNK_BLOCKS blocks: footprint it remembers */
	uint32_t hot_promote_blocks; /* a HOT sequence that grows past this many blocks becomes SEQ */
	uint32_t recent_slots;       /* the recent-access table: a power of two, or 0 for none */
};

/*
 * Defaults: 16384 sequences, 64 Ki chunks (16 GiB of remembered footprint), HOT up to 4 blocks, 64 Ki
 * recent-access slots (1 MiB).
 */
void llc_config_default(struct llc_config *cfg);

/* One block sequence: consecutive blocks [start, end] of one file, in one class. */
struct llc_seq {
	uint64_t file;          /* caller's file key (llmcache_file_key(), or the module's registration id) */
	uint64_t start, end;    /* inclusive block range */
	uint64_t cursor;        /* last block accessed in this sequence */
	uint64_t created_vt;    /* virtual time (block accesses) when created */
	uint64_t created_ns;
	uint64_t last_vt;       /* virtual time of the last access */
	uint64_t iter_start_vt; /* virtual time at which the current iteration began */
	uint64_t iter_start_ns;
	uint64_t period_vt;     /* LOOP: accesses between the last two iteration starts */
	uint64_t period_ns;     /* LOOP: nanoseconds between the last two iteration starts */
	uint64_t prev_period_ns; /* LOOP: the period before that one (restarts(): a pause lengthens one) */
	uint64_t order_vt;      /* LOOP: its key in the period order: period_vt, or the age of its current
				 * iteration once that is over twice the period (a loop that stopped) */
	uint32_t iterations;    /* LOOP: iteration starts seen after the first pass */
	uint16_t lru_prev, lru_next;   /* all live sequences, least recently used first */
	uint16_t list_prev, list_next; /* the class list: SEQ by age, HOT by recency, LOOP by period */
	uint16_t scan;          /* a re-read: the SEQ sequence it re-reads, cut when the re-read runs on */
	uint8_t cls;            /* enum llmcache_class */
	uint8_t live;
	uint8_t reread;         /* HOT that grows into LOOP, not SEQ: it re-reads blocks seen before */
	uint8_t retouch;        /* LOOP: came back to a block at most LLC_RETOUCH_BLOCKS behind its cursor */
};

/*
 * A LOOP whose accesses come back to blocks just behind the cursor (an mmap fault stream: the fault-around
 * that maps a window the fault has just read, two threads sweeping one matrix) is marked retouch: a block
 * of it that the pin plan leaves out is still accessed again within a few dozen accesses, so a cache
 * should hold it briefly rather than refuse it (Documentation/design/policy-core.md, "Retouching loops").
 */
#define LLC_RETOUCH_BLOCKS 64

/* What one block access did, for the caller's cache and statistics. */
struct llc_verdict {
	uint16_t seq;       /* the sequence the block now belongs to */
	uint8_t cls;        /* its class after the access */
	uint8_t event;      /* enum llc_event */
	uint64_t reuse_vt;  /* accesses since the block's previous access (this one included), as far as the
			     * recent-access table remembers it; 0: not remembered */
};

enum llc_event {
	LLC_EV_EXTEND = 0,   /* joined the sequence of block - 1 */
	LLC_EV_NEW_HOT,      /* never seen: a new HOT sequence */
	LLC_EV_HOT_TOUCH,    /* re-reference of a HOT sequence */
	LLC_EV_TO_LOOP,      /* a SEQ was re-read from its start and became a LOOP */
	LLC_EV_REREAD,       /* a SEQ re-read from the middle: a HOT re-read that is a LOOP if it runs on */
	LLC_EV_ITERATION,    /* a LOOP restarted from its first block, or jumped back from its end: a new iteration */
	LLC_EV_SKIP,         /* a forward jump inside a SEQ or LOOP */
	LLC_EV_NOISE,        /* a backward re-reference inside a LOOP that is not a restart, or a scan's last
			      * block again (a request that begins where the last one ended) */
	LLC_EV_SEEN_AGAIN,   /* a block seen before whose sequence was recycled: a HOT re-read */
};

struct llc_core;

/* Bytes needed for a core with this configuration; 0 when the configuration is invalid. */
uint64_t llc_core_size(const struct llc_config *cfg);

/* Lay a core out in mem (llc_core_size(cfg) bytes, 8-byte aligned). Returns it, or NULL on a bad cfg. */
struct llc_core *llc_core_init(void *mem, uint64_t mem_size, const struct llc_config *cfg);

/* Classify one access to one block. now_ns is the access time (for loop periods in wall time). */
struct llc_verdict llc_access(struct llc_core *c, uint64_t file, uint64_t block, uint64_t now_ns);

/*
 * llc_access() of one block of a request of req_blocks blocks that the caller counts as one access (a
 * read request, the range a fault and its fault-around mapped). A re-read of a scan from the middle
 * becomes a LOOP only once it runs past max(hot_promote_blocks, req_blocks), so that a 16-block
 * fault-around window faulted again stays one HOT re-reference. Pass the same req_blocks for every block
 * of the request; llc_access() is llc_access_req() with req_blocks 1. llc_access_extend() needs no
 * length: it only extends SEQ and LOOP sequences.
 */
struct llc_verdict llc_access_req(struct llc_core *c, uint64_t file, uint64_t block, uint64_t req_blocks,
				  uint64_t now_ns);

/*
 * llc_access_req() of a block that fault-around mapped (the range of mm_filemap_map_pages, a fault-around
 * record): classified the same, but not written into the recent-access table. Fault-around maps pages
 * that did not fault, and its hook sees the whole window whatever it mapped, at its entry (a kprobe) or
 * once it mapped any page (the tracepoint), just before a fault in that window: written, it would hide
 * the page's own last fault or read from the fault (llc_reuse_within).
 */
struct llc_verdict llc_access_mapped(struct llc_core *c, uint64_t file, uint64_t block, uint64_t req_blocks,
				     uint64_t now_ns);

/*
 * A request's next blocks at once: right after llc_access() of block - 1 returned seq, the accesses to
 * block, block + 1, ... (at most max) that only extend seq, a SEQ or LOOP sequence, by one block each,
 * inside block - 1's index chunk, are done as llc_access() would do them, each with the verdict
 * { seq, its class, LLC_EV_EXTEND }, and written into the recent-access table if that access was. Returns
 * how many; the caller goes on with llc_access() from there.
 */
uint64_t llc_access_extend(struct llc_core *c, uint64_t file, uint64_t block, uint64_t max, uint16_t seq);

/*
 * The recent-access table: every access writes its block's virtual time into a direct-mapped slot of
 * recent_slots, the file's offset in the table plus the block (a file's consecutive blocks never share a
 * slot; a newer block takes the slot of an older one), so that a block's reuse distance is known as long
 * as nothing else took its slot: with 64 Ki slots, the last tens of thousands of distinct blocks an
 * engine touched. It is what tells a page of an engine's code faulted again within a token from a
 * page of a scan, which sequences cannot: both are short runs that look new each time.
 *
 * Whether a missed block that is not a loop's takes a pin of the longest-period loop that holds some
 * (llc_reuse_within): when it was last accessed fewer than LLC_REUSE_PERIODS periods of that loop ago,
 * and at least LLC_REUSE_FLOOR accesses ago (closer, that access is part of the same fault: the
 * fault-around window a kernel traces before the fault in it).
 * Kept, it will be accessed again sooner than that loop's highest pinned block, within one or two of the
 * loop's iterations; LIRS keeps a block whose reuse distance is under the recency of its oldest protected
 * block on the same ground (Documentation/design/policy-core.md, "Reuse distance against the longest
 * loop").
 */
#define LLC_REUSE_PERIODS 2
#define LLC_REUSE_FLOOR 64
bool llc_reuse_within(uint64_t reuse_vt, uint64_t loop_period_vt);

/* The sequence a block belongs to, or LLC_SEQ_NONE. */
uint16_t llc_lookup(const struct llc_core *c, uint64_t file, uint64_t block);

const struct llc_seq *llc_seq_get(const struct llc_core *c, uint16_t id);
uint64_t llc_vtime(const struct llc_core *c);
const uint64_t *llc_stats(const struct llc_core *c); /* LLMCACHE_NR_STATS counters */
uint32_t llc_class_count(const struct llc_core *c, enum llmcache_class cls); /* sequences per class */

/*
 * Eviction order of Algorithm 1, by sequence. The class lists are walked with llc_first / llc_next:
 * SEQ oldest first (evict its highest blocks first), HOT least recently used first, LOOP longest period
 * first (evict its highest blocks first). llc_evict_class() says which list the next victim comes from,
 * given how many blocks the caller holds per class and the HOT reserve.
 */
uint16_t llc_first(const struct llc_core *c, enum llmcache_class cls);
uint16_t llc_next(const struct llc_core *c, uint16_t id);
/* All live sequences, least recently accessed first: llc_lru_first, then each one's lru_next. */
uint16_t llc_lru_first(const struct llc_core *c);
enum llmcache_class llc_evict_class(const uint64_t resident[LLMCACHE_NR_CLASSES], uint64_t hot_reserve);

/*
 * The HOT reserve's idleness limit, in accesses: twice the period of the biggest loop (most blocks) that
 * still runs (not stopped, "Loops that stopped"), as of the last aging; 0 when no loop runs. That loop is
 * an engine's weights, read once a token: a HOT block idle for longer has gone unused for two tokens, so
 * the reserve does not protect it: the module does not hold it, and a simulated cache gives it up to a
 * loop's block that would otherwise be refused (Documentation/design/policy-core.md, "The HOT reserve
 * against a loop's period").
 */
uint64_t llc_hot_idle_limit(const struct llc_core *c);

/*
 * The blocks of the biggest loop accessed at or after virtual time vt (0: none). With vt a cache's size
 * of accesses ago, it tells whether that cache holds an engine's per-token working set: its weights
 * loop fits and was read within the cache's reach, whatever the loop's measured period (which can be
 * far shorter than a token, and the aging then takes the loop for stopped). O(loops).
 * Documentation/design/policy-core.md, "When the working set fits".
 */
uint64_t llc_biggest_loop_since(const struct llc_core *c, uint64_t vt);

/*
 * A loop's period in ns as a token's time: the shorter of its last two periods, since an engine idle
 * between two prompts measures one iteration as long as the pause. 0 before one was measured.
 */
uint64_t llc_loop_period_ns(const struct llc_seq *s);

/*
 * Pin plan: loops in order of increasing period, each pinned from its lowest block up, until the budget
 * is spent, leaving out the chunks of a loop that no access reached in the two periods before its
 * current iteration began (cold: a part its iterations pass over, such as a model's token embedding;
 * core.c, LLC_COLD_PERIODS). Writes at most max ranges [first, first + count) and returns how many it
 * wrote. A smaller budget always yields a plan contained in the larger one's, so shrinking releases the
 * highest blocks of the longest-period loops first. O(loops + the index chunks of the loops walked), the
 * chunks at most max_chunks (past that, none is cold).
 */
struct llc_pin_range {
	uint64_t file;
	uint64_t first;
	uint64_t count;
	uint16_t seq;
};
uint32_t llc_pin_plan(const struct llc_core *c, uint64_t budget_blocks, struct llc_pin_range *out,
		      uint32_t max);

/* Whether block lies in a cold chunk of LOOP seq, one that the pin plan leaves out. */
bool llc_block_cold(const struct llc_core *c, uint16_t seq, uint64_t block);

/*
 * Sizing rule, in integers. N and S in blocks, bandwidth in blocks per second, T in nanoseconds.
 * llc_size_min_blocks: S = max(0, floor(N - BW*T)), the cached blocks a loop of N needs for no stall.
 * llc_size_max_loop:   the largest N that S cached blocks sustain: S + floor(BW*T).
 * llc_stall_ns:        predicted stall per iteration with S cached: max(0, (N - S)/BW - T).
 */
uint64_t llc_size_min_blocks(uint64_t n_blocks, uint64_t bw_blocks_per_s, uint64_t t_ns);
uint64_t llc_size_max_loop(uint64_t s_blocks, uint64_t bw_blocks_per_s, uint64_t t_ns);
uint64_t llc_stall_ns(uint64_t n_blocks, uint64_t s_blocks, uint64_t bw_blocks_per_s, uint64_t t_ns);

#endif /* LLC_CORE_H */
