// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Policy core: Algorithm 1 of Kim, Lee and Bahn, "Rethinking I/O Caching for LLM Inference on
 * Resource-Constrained Mobile Platforms" (2025), restated for a kernel and a simulator.
 *
 * A block sequence is a run [start, end] of 4 KiB blocks of one file in one class: SEQ (a one-time scan),
 * LOOP (re-read every token: model weights) or HOT (small, randomly re-referenced: tokenizer, metadata).
 * On an access to block B of file F:
 *   - if B-1 is the cursor (last block accessed) of its sequence S, B joins S; HOT sequences join only
 *     when S was accessed within the adjacency window, so that random hits on a small hot set do not
 *     glue into runs, and B never joins when it is the first block of another LOOP (that is the loop's
 *     next iteration, even when it directly follows a neighbour's last block). A HOT sequence longer
 *     than hot_promote_blocks becomes SEQ;
 *   - else if B is in a SEQ sequence S: the scan is being re-read. From its start, S becomes a LOOP.
 *     At its cursor, the scan goes on: requests that are not block-aligned begin in the block the last
 *     one ended in (a model's tensors at 32-byte offsets read with read()), which is no re-read.
 *     From the middle, a *re-read* {B} starts: a HOT sequence that becomes a LOOP (not a SEQ) once it
 *     runs on past hot_promote_blocks and past the request that brings the block (llc_access_req(): a
 *     fault-around window faulted again is one access, not a loop), and then cuts S where it began. A
 *     random re-read of a scanned file (tokenizer lookups after the tokenizer was loaded) stays HOT; a
 *     sequential one (the weights region of a file scanned whole at start-up) is the loop;
 *   - else if B is in a LOOP S: at S's first block a new iteration begins (period measured), and so
 *     it does at a jump back from S's end past a head that the accesses no longer show (restarts());
 *     ahead of the cursor it is a forward skip; behind it, noise that changes nothing but, within
 *     LLC_RETOUCH_BLOCKS of the cursor, marks S retouch (an mmap fault stream maps a window again
 *     right after faulting it: a block the pins leave out is read again soon, core.h);
 *   - else if B is in a HOT sequence: an LRU touch;
 *   - else if B was seen but its sequence has since been recycled or cut away: a re-read {B};
 *   - else B was never seen: a new HOT sequence {B}.
 * Interleaved streams of several threads need no stream table: adjacency is judged against each
 * sequence's own cursor. Writes classify exactly as reads (the paper's write loops are loops).
 *
 * Data structures, all inside one caller-provided block of memory, O(1) per access:
 *   - a sequence table (ids 1..max_seqs) with a global LRU list used to recycle the least recently
 *     accessed sequence when the table is full, and one list per class: SEQ in order of becoming SEQ
 *     (oldest first), HOT in LRU order, LOOP sorted by period (longest first; re-sorted once per loop
 *     iteration, O(loops), when the period moved by more than an eighth, and every 1024 accesses for
 *     the loops that stopped: age_loops());
 *   - a block index: chunks of 64 aligned blocks of one file, each holding the 16-bit sequence id of
 *     every block (2 bytes per remembered block), found through an open-addressing hash table and
 *     recycled least recently used first when max_chunks are in use. A block's entry is trusted only if
 *     the sequence it names is live, of the same file, and still covers the block, so stale entries
 *     left by recycling or cutting are harmless: they mean "seen before";
 *   - the recent-access table (core.h): recent_slots direct-mapped slots of (block tag, virtual time),
 *     a file's blocks in consecutive slots from the file's hash, written at every access, the
 *     request's extended blocks included.
 */
#include "core.h"

#define LLC_NONE 0
#define LLC_UNKNOWN_PERIOD (~0ULL)

struct llc_chunk {
	uint64_t file;
	uint64_t base; /* block >> 6 */
	uint64_t touched_vt; /* virtual time of the last access to any of its blocks */
	uint32_t lru_prev, lru_next;
	uint16_t seq[LLC_CHUNK_BLOCKS];
};

struct llc_list {
	uint16_t head, tail;
};

struct llc_recent {
	uint64_t tag; /* recent_tag() of the block; 0: empty */
	uint64_t vt;
};

struct llc_core {
	struct llc_config cfg;
	uint64_t vtime;
	uint64_t next_aging_vt; /* age_loops() */
	uint64_t hot_idle_limit; /* llc_hot_idle_limit(), set by age_loops() */
	uint64_t stats[LLMCACHE_NR_STATS];
	uint32_t class_count[LLMCACHE_NR_CLASSES];
	struct llc_list lists[LLMCACHE_NR_CLASSES];
	struct llc_list seq_lru;
	uint16_t free_seq;
	uint32_t chunks_used;
	uint32_t last_chunk; /* the chunk of the previous access: consecutive accesses mostly share it */
	bool last_noted;     /* the previous access was written into the recent-access table */
	uint32_t chunk_lru_head, chunk_lru_tail;
	uint32_t hash_mask;
	struct llc_seq *seqs;     /* [max_seqs + 1], id 0 unused */
	struct llc_chunk *chunks; /* [max_chunks + 1], id 0 unused */
	uint32_t *hash;           /* [hash_mask + 1] chunk ids, 0 = empty */
	struct llc_recent *recent; /* [cfg.recent_slots] */
};

#define LLC_ADJACENCY_WINDOW 64 /* accesses within which a HOT sequence may still grow */

void llc_config_default(struct llc_config *cfg)
{
	cfg->max_seqs = 16384;
	cfg->max_chunks = 65536;
	cfg->hot_promote_blocks = 4;
	cfg->recent_slots = 65536;
}

static uint64_t align8(uint64_t n)
{
	return (n + 7) & ~7ULL;
}

static uint32_t hash_slots(uint32_t max_chunks)
{
	uint32_t n = 16;

	while (n < 2 * max_chunks)
		n <<= 1;
	return n;
}

uint64_t llc_core_size(const struct llc_config *cfg)
{
	if (!cfg || cfg->max_seqs < 2 || cfg->max_seqs > 65535 || cfg->max_chunks < 2 ||
	    cfg->max_chunks > (1U << 30) || cfg->recent_slots > (1U << 24) ||
	    (cfg->recent_slots & (cfg->recent_slots - 1)))
		return 0;
	return align8(sizeof(struct llc_core)) + align8((uint64_t)(cfg->max_seqs + 1) * sizeof(struct llc_seq)) +
	       align8((uint64_t)(cfg->max_chunks + 1) * sizeof(struct llc_chunk)) +
	       align8((uint64_t)hash_slots(cfg->max_chunks) * sizeof(uint32_t)) +
	       (uint64_t)cfg->recent_slots * sizeof(struct llc_recent);
}

static void zero(void *p, uint64_t n)
{
	unsigned char *b = p;

	while (n--)
		*b++ = 0;
}

struct llc_core *llc_core_init(void *mem, uint64_t mem_size, const struct llc_config *cfg)
{
	uint64_t need = llc_core_size(cfg);
	struct llc_core *c = mem;
	char *p = mem;
	uint32_t i;

	if (!need || !mem || mem_size < need || ((uintptr_t)mem & 7))
		return NULL;
	zero(mem, need);
	c->cfg = *cfg;
	p += align8(sizeof(*c));
	c->seqs = (struct llc_seq *)p;
	p += align8((uint64_t)(cfg->max_seqs + 1) * sizeof(struct llc_seq));
	c->chunks = (struct llc_chunk *)p;
	p += align8((uint64_t)(cfg->max_chunks + 1) * sizeof(struct llc_chunk));
	c->hash = (uint32_t *)p;
	c->hash_mask = hash_slots(cfg->max_chunks) - 1;
	p += align8((uint64_t)hash_slots(cfg->max_chunks) * sizeof(uint32_t));
	c->recent = (struct llc_recent *)p;
	for (i = cfg->max_seqs; i >= 1; i--) {
		c->seqs[i].lru_next = c->free_seq;
		c->free_seq = (uint16_t)i;
	}
	return c;
}

/* ---- block index ---------------------------------------------------------------------------------- */

static uint32_t chunk_hash(uint64_t file, uint64_t base)
{
	uint64_t k = file * 0x9e3779b97f4a7c15ULL ^ base;

	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return (uint32_t)k;
}

/* ---- recent-access table --------------------------------------------------------------------------- */

/* A block's tag: a 64-bit mix of file and block, never 0 (the empty slot's). */
static uint64_t recent_tag(uint64_t file, uint64_t block)
{
	uint64_t k = (file * 0x9e3779b97f4a7c15ULL) ^ (block * 0xc2b2ae3d27d4eb4fULL);

	k ^= k >> 31;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 29;
	return k ? k : 1;
}

/* Record an access to block at virtual time vt; returns vt less the block's previous one, 0 if unknown. */
static uint64_t recent_note(struct llc_core *c, uint64_t file, uint64_t block, uint64_t vt)
{
	uint64_t tag, reuse;
	struct llc_recent *r;

	if (!c->cfg.recent_slots)
		return 0;
	tag = recent_tag(file, block);
	r = &c->recent[(chunk_hash(file, 0) + block) & (c->cfg.recent_slots - 1)];
	reuse = r->tag == tag ? vt - r->vt : 0;
	r->tag = tag;
	r->vt = vt;
	return reuse;
}

bool llc_reuse_within(uint64_t reuse_vt, uint64_t loop_period_vt)
{
	return reuse_vt >= LLC_REUSE_FLOOR && loop_period_vt && loop_period_vt != LLC_UNKNOWN_PERIOD &&
	       reuse_vt < LLC_REUSE_PERIODS * loop_period_vt;
}

static uint32_t *chunk_slot(const struct llc_core *c, uint64_t file, uint64_t base)
{
	uint32_t i = chunk_hash(file, base) & c->hash_mask;

	for (;; i = (i + 1) & c->hash_mask) {
		uint32_t id = c->hash[i];

		if (id == LLC_NONE || (c->chunks[id].file == file && c->chunks[id].base == base))
			return &c->hash[i];
	}
}

/* The id of the chunk holding (file, block), or LLC_NONE. */
static uint32_t chunk_find(const struct llc_core *c, uint64_t file, uint64_t block)
{
	const struct llc_chunk *last = &c->chunks[c->last_chunk];
	uint64_t base = block / LLC_CHUNK_BLOCKS;

	if (c->last_chunk != LLC_NONE && last->file == file && last->base == base)
		return c->last_chunk;
	return *chunk_slot(c, file, base);
}

static void chunk_unhash(struct llc_core *c, uint32_t id)
{
	uint32_t *slot = chunk_slot(c, c->chunks[id].file, c->chunks[id].base);
	uint32_t i = (uint32_t)(slot - c->hash), j;

	/* Backward-shift deletion keeps every remaining probe run unbroken. */
	for (j = (i + 1) & c->hash_mask; c->hash[j] != LLC_NONE; j = (j + 1) & c->hash_mask) {
		const struct llc_chunk *ch = &c->chunks[c->hash[j]];
		uint32_t home = chunk_hash(ch->file, ch->base) & c->hash_mask;

		if (((j - home) & c->hash_mask) >= ((j - i) & c->hash_mask)) {
			c->hash[i] = c->hash[j];
			i = j;
		}
	}
	c->hash[i] = LLC_NONE;
}

static void chunk_lru_unlink(struct llc_core *c, uint32_t id)
{
	struct llc_chunk *ch = &c->chunks[id];

	if (ch->lru_prev)
		c->chunks[ch->lru_prev].lru_next = ch->lru_next;
	else
		c->chunk_lru_head = ch->lru_next;
	if (ch->lru_next)
		c->chunks[ch->lru_next].lru_prev = ch->lru_prev;
	else
		c->chunk_lru_tail = ch->lru_prev;
}

static void chunk_lru_append(struct llc_core *c, uint32_t id)
{
	struct llc_chunk *ch = &c->chunks[id];

	ch->lru_prev = c->chunk_lru_tail;
	ch->lru_next = LLC_NONE;
	if (c->chunk_lru_tail)
		c->chunks[c->chunk_lru_tail].lru_next = id;
	else
		c->chunk_lru_head = id;
	c->chunk_lru_tail = id;
}

/* The chunk holding (file, block), created (recycling the least recently used one) if missing. */
static struct llc_chunk *chunk_get(struct llc_core *c, uint64_t file, uint64_t block)
{
	uint64_t base = block / LLC_CHUNK_BLOCKS;
	uint32_t id = chunk_find(c, file, block);
	uint32_t *slot;

	if (id != LLC_NONE) {
		if (c->chunk_lru_tail != id) {
			chunk_lru_unlink(c, id);
			chunk_lru_append(c, id);
		}
		c->last_chunk = id;
		c->chunks[id].touched_vt = c->vtime;
		return &c->chunks[id];
	}
	slot = chunk_slot(c, file, base);
	if (c->chunks_used < c->cfg.max_chunks) {
		id = ++c->chunks_used;
	} else {
		id = c->chunk_lru_head;
		chunk_lru_unlink(c, id);
		chunk_unhash(c, id);
		c->stats[LLMCACHE_STAT_CHUNKS_RECYCLED]++;
		slot = chunk_slot(c, file, base); /* the deletion may have moved the free slot */
	}
	*slot = id;
	zero(&c->chunks[id], sizeof(c->chunks[id]));
	c->chunks[id].file = file;
	c->chunks[id].base = base;
	c->chunks[id].touched_vt = c->vtime;
	chunk_lru_append(c, id);
	c->last_chunk = id;
	return &c->chunks[id];
}

static bool seq_covers(const struct llc_core *c, uint16_t id, uint64_t file, uint64_t block)
{
	const struct llc_seq *s = &c->seqs[id];

	return id != LLC_NONE && s->live && s->file == file && s->start <= block && block <= s->end;
}

static inline uint16_t lookup(const struct llc_core *c, uint64_t file, uint64_t block)
{
	uint32_t id = chunk_find(c, file, block);
	uint16_t seq;

	if (id == LLC_NONE)
		return LLC_NONE;
	seq = c->chunks[id].seq[block % LLC_CHUNK_BLOCKS];
	return seq_covers(c, seq, file, block) ? seq : LLC_NONE;
}

uint16_t llc_lookup(const struct llc_core *c, uint64_t file, uint64_t block)
{
	return lookup(c, file, block);
}

/* ---- sequence lists ------------------------------------------------------------------------------- */

static void list_unlink(struct llc_core *c, struct llc_list *l, uint16_t id)
{
	struct llc_seq *s = &c->seqs[id];

	if (s->list_prev)
		c->seqs[s->list_prev].list_next = s->list_next;
	else
		l->head = s->list_next;
	if (s->list_next)
		c->seqs[s->list_next].list_prev = s->list_prev;
	else
		l->tail = s->list_prev;
	s->list_prev = s->list_next = LLC_NONE;
}

/* Insert id before `before` (LLC_NONE: at the tail). */
static void list_insert(struct llc_core *c, struct llc_list *l, uint16_t id, uint16_t before)
{
	struct llc_seq *s = &c->seqs[id];

	s->list_next = before;
	s->list_prev = before ? c->seqs[before].list_prev : l->tail;
	if (s->list_prev)
		c->seqs[s->list_prev].list_next = id;
	else
		l->head = id;
	if (before)
		c->seqs[before].list_prev = id;
	else
		l->tail = id;
}

static void lru_unlink(struct llc_core *c, uint16_t id)
{
	struct llc_seq *s = &c->seqs[id];

	if (s->lru_prev)
		c->seqs[s->lru_prev].lru_next = s->lru_next;
	else
		c->seq_lru.head = s->lru_next;
	if (s->lru_next)
		c->seqs[s->lru_next].lru_prev = s->lru_prev;
	else
		c->seq_lru.tail = s->lru_prev;
}

static void lru_append(struct llc_core *c, uint16_t id)
{
	struct llc_seq *s = &c->seqs[id];

	s->lru_prev = c->seq_lru.tail;
	s->lru_next = LLC_NONE;
	if (c->seq_lru.tail)
		c->seqs[c->seq_lru.tail].lru_next = id;
	else
		c->seq_lru.head = id;
	c->seq_lru.tail = id;
}

static void touch(struct llc_core *c, uint16_t id)
{
	c->seqs[id].last_vt = c->vtime;
	if (c->seq_lru.tail != id) {
		lru_unlink(c, id);
		lru_append(c, id);
	}
}

static uint64_t period_key(const struct llc_seq *s)
{
	return s->order_vt ? s->order_vt : LLC_UNKNOWN_PERIOD;
}

/* LOOP list: longest period first; unknown periods count as longest (released first, pinned last). */
static void loop_insert(struct llc_core *c, uint16_t id)
{
	uint64_t key = period_key(&c->seqs[id]);
	uint16_t at = c->lists[LLMCACHE_CLASS_LOOP].head;

	while (at && period_key(&c->seqs[at]) >= key)
		at = c->seqs[at].list_next;
	list_insert(c, &c->lists[LLMCACHE_CLASS_LOOP], id, at);
}

static void class_enter(struct llc_core *c, uint16_t id, enum llmcache_class cls)
{
	c->seqs[id].cls = (uint8_t)cls;
	c->class_count[cls]++;
	if (cls == LLMCACHE_CLASS_LOOP)
		loop_insert(c, id);
	else
		list_insert(c, &c->lists[cls], id, LLC_NONE);
}

static void class_leave(struct llc_core *c, uint16_t id)
{
	enum llmcache_class cls = c->seqs[id].cls;

	list_unlink(c, &c->lists[cls], id);
	c->class_count[cls]--;
}

static void seq_free(struct llc_core *c, uint16_t id)
{
	class_leave(c, id);
	lru_unlink(c, id);
	c->seqs[id].live = 0;
	c->seqs[id].lru_next = c->free_seq;
	c->free_seq = id;
}

static uint16_t seq_new(struct llc_core *c, uint64_t file, uint64_t block, uint64_t now_ns,
			enum llmcache_class cls)
{
	uint16_t id = c->free_seq;
	struct llc_seq *s;

	if (id == LLC_NONE) {
		id = c->seq_lru.head;
		seq_free(c, id);
		c->stats[LLMCACHE_STAT_SEQS_RECYCLED]++;
	}
	c->free_seq = c->seqs[id].lru_next;
	s = &c->seqs[id];
	zero(s, sizeof(*s));
	s->file = file;
	s->start = s->end = s->cursor = block;
	s->created_vt = s->last_vt = s->iter_start_vt = c->vtime;
	s->created_ns = s->iter_start_ns = now_ns;
	s->live = 1;
	lru_append(c, id);
	class_enter(c, id, cls);
	c->stats[LLMCACHE_STAT_SEQS_CREATED]++;
	return id;
}

/* Record that `block` now belongs to `id`, taking it from the sequence that held it before. */
static void claim(struct llc_core *c, struct llc_chunk *ch, uint64_t file, uint64_t block, uint16_t id)
{
	uint16_t *entry = &ch->seq[block % LLC_CHUNK_BLOCKS];
	uint16_t old = *entry;

	if (old != id && seq_covers(c, old, file, block)) {
		struct llc_seq *o = &c->seqs[old];

		if (o->start == o->end)
			seq_free(c, old);
		else if (block == o->start)
			o->start++;
		else if (block == o->end)
			o->end--;
		if (o->live && o->cursor > o->end)
			o->cursor = o->end;
	}
	*entry = id;
}

/*
 * A loop's place in the period order changes only when its period moves by more than an eighth: loops
 * of nearly equal period (weights and a scratch write loop, both once per token) would otherwise swap
 * places with every jitter of the hot-set traffic between them, and each swap hands one's pins to the
 * other. With the hysteresis the order, and so the pin plan, is stable.
 */
static bool period_moved(uint64_t old_vt, uint64_t new_vt)
{
	uint64_t diff = old_vt > new_vt ? old_vt - new_vt : new_vt - old_vt;

	return !old_vt || diff > old_vt / 8;
}

/* An iteration of loop id began at (vt, ns): its period is the time since the previous one began. */
static void new_iteration(struct llc_core *c, struct llc_seq *s, uint16_t id, uint64_t vt, uint64_t ns)
{
	uint64_t old_vt = s->order_vt;

	s->period_vt = s->order_vt = vt - s->iter_start_vt;
	s->prev_period_ns = s->period_ns;
	s->period_ns = ns > s->iter_start_ns ? ns - s->iter_start_ns : 0; /* a kernel's per-CPU clocks may differ */
	s->iter_start_vt = vt;
	s->iter_start_ns = ns;
	s->iterations++;
	c->stats[LLMCACHE_STAT_LOOP_ITERATIONS]++;
	if (period_moved(old_vt, s->period_vt)) {
		list_unlink(c, &c->lists[LLMCACHE_CLASS_LOOP], id);
		loop_insert(c, id);
	}
}

/*
 * A loop that stopped keeps the period it last measured, and with it its place ahead of the loops that
 * still run: the start-up code's loops, iterated once in the first milliseconds, would hold their pins
 * for good. So every LLC_AGING_INTERVAL accesses, a loop whose current iteration has lasted more than
 * twice its period is keyed by that age instead (the period is at least that long, as far as anyone can
 * tell), and moves toward the head of the order: released first, pinned last. Its next iteration puts
 * the measured period back. O(loops) per interval. The same walk sets the HOT idleness limit: twice the
 * period of the biggest loop that still runs (llc_hot_idle_limit()).
 */
#define LLC_AGING_INTERVAL 1024

static void age_loops(struct llc_core *c)
{
	uint16_t id = c->lists[LLMCACHE_CLASS_LOOP].head, next;
	uint64_t biggest = 0;

	c->next_aging_vt = c->vtime + LLC_AGING_INTERVAL;
	c->hot_idle_limit = 0;
	for (; id; id = next) {
		struct llc_seq *s = &c->seqs[id];
		uint64_t age = c->vtime - s->iter_start_vt;

		next = s->list_next;
		if (s->period_vt && age > 2 * s->period_vt && period_moved(s->order_vt, age)) {
			s->order_vt = age;
			list_unlink(c, &c->lists[LLMCACHE_CLASS_LOOP], id);
			loop_insert(c, id);
		}
		if (s->order_vt == s->period_vt && s->end - s->start + 1 > biggest) { /* it still runs */
			biggest = s->end - s->start + 1;
			c->hot_idle_limit = 2 * s->period_vt;
		}
	}
}

/* ---- Algorithm 1 ---------------------------------------------------------------------------------- */

/*
 * Does an access to block at now_ns begin loop s's next iteration? At its first block, or, when the
 * accesses no longer show its head (an mmap engine does not fault on pinned pages), behind an end it
 * has reached, by at least a sixteenth of the loop and further than the 2 MiB a fault on a large folio
 * maps. Not within a quarter of a period of the last start: a burst of faults maps the same pages
 * again and again, and a fault is followed by the fault-around that maps its page. The period is a
 * token's (llc_loop_period_ns()): a quarter of a pause between two prompts would hide the tokens after
 * it for as long, and the loop would look stopped.
 */
#define LLC_RESTART_MIN_JUMP 1024
static bool restarts(const struct llc_seq *s, uint64_t block, uint64_t now_ns)
{
	uint64_t len = s->end - s->start + 1, back = s->cursor > block ? s->cursor - block : 0;

	if (now_ns < s->iter_start_ns + llc_loop_period_ns(s) / 4)
		return false;
	if (block == s->start)
		return s->cursor != block;
	return s->cursor >= s->end - len / 8 && back >= len / 16 && back >= LLC_RESTART_MIN_JUMP;
}

/* Does block join prev, the sequence of block - 1? cur is the live sequence holding block, if any. */
static bool joins(const struct llc_core *c, uint16_t prev, uint16_t cur, uint64_t block)
{
	const struct llc_seq *p = &c->seqs[prev];

	if (prev == LLC_NONE || p->cursor != block - 1)
		return false;
	/* A loop restarting at its first block is an iteration, even right after a neighbour's end. */
	if (cur != prev && cur != LLC_NONE && c->seqs[cur].cls == LLMCACHE_CLASS_LOOP && c->seqs[cur].start == block)
		return false;
	return p->cls != LLMCACHE_CLASS_HOT || c->vtime - p->last_vt <= LLC_ADJACENCY_WINDOW;
}

/* A re-read that ran on is the loop: the scan it re-reads ends where it began. */
static void cut_scan(struct llc_core *c, const struct llc_seq *r)
{
	struct llc_seq *scan = &c->seqs[r->scan];

	if (r->scan == LLC_NONE || !scan->live || scan->file != r->file || scan->created_vt > r->created_vt ||
	    scan->start >= r->start || r->start > scan->end)
		return;
	scan->end = r->start - 1;
	if (scan->cursor > scan->end)
		scan->cursor = scan->end;
}

/* A re-reference inside scan (LLC_NONE: of a forgotten block): a HOT re-read {block}. */
static uint16_t new_reread(struct llc_core *c, struct llc_chunk *ch, uint16_t scan, uint64_t file,
			   uint64_t block, uint64_t now_ns)
{
	uint16_t id = seq_new(c, file, block, now_ns, LLMCACHE_CLASS_HOT);
	struct llc_seq *r = &c->seqs[id];

	r->reread = 1;
	r->scan = scan;
	if (scan != LLC_NONE) {
		/* The first pass over this block happened during the scan: its start bounds the period. */
		r->iter_start_vt = c->seqs[scan].iter_start_vt;
		r->iter_start_ns = c->seqs[scan].iter_start_ns;
	}
	claim(c, ch, file, block, id);
	return id;
}

/*
 * How far a HOT sequence may grow before it is a run. A re-read (the blocks of a scan accessed again from
 * the middle) becomes a LOOP only once it runs past the request that brings the block as well: a request
 * the caller counts as one access is one access however many blocks it covers. An mmap engine's code is
 * faulted in 16-block fault-around windows, and a window the kernel reclaimed and the engine faulted
 * again is one re-reference, a HOT block, not a loop of 16 blocks with a period measured once
 * (Documentation/design/policy-core.md, rule 3). A new HOT sequence still becomes SEQ past
 * hot_promote_blocks, whatever the request: a window faulted once is a scan's.
 */
static uint64_t hot_limit(const struct llc_core *c, const struct llc_seq *s, uint64_t req_blocks)
{
	return s->reread && req_blocks > c->cfg.hot_promote_blocks ? req_blocks : c->cfg.hot_promote_blocks;
}

static struct llc_verdict extend(struct llc_core *c, struct llc_chunk *ch, uint16_t id, uint64_t file,
				 uint64_t block, uint64_t req_blocks)
{
	struct llc_seq *s = &c->seqs[id];
	struct llc_verdict v = { id, 0, LLC_EV_EXTEND, 0 };

	claim(c, ch, file, block, id);
	if (block > s->end)
		s->end = block;
	s->cursor = block;
	if (s->cls == LLMCACHE_CLASS_HOT && s->end - s->start + 1 > hot_limit(c, s, req_blocks)) {
		class_leave(c, id);
		if (s->reread) {
			class_enter(c, id, LLMCACHE_CLASS_LOOP);
			new_iteration(c, s, id, s->created_vt, s->created_ns);
			cut_scan(c, s);
		} else {
			class_enter(c, id, LLMCACHE_CLASS_SEQ);
		}
	}
	v.cls = s->cls;
	return v;
}

static struct llc_verdict rereference(struct llc_core *c, struct llc_chunk *ch, uint16_t id, uint64_t file,
				      uint64_t block, uint64_t now_ns)
{
	struct llc_seq *s = &c->seqs[id];
	struct llc_verdict v = { id, s->cls, LLC_EV_HOT_TOUCH, 0 };

	touch(c, id); /* so that a table-full recycle below cannot pick this sequence */
	switch (s->cls) {
	case LLMCACHE_CLASS_HOT:
		list_unlink(c, &c->lists[LLMCACHE_CLASS_HOT], id);
		list_insert(c, &c->lists[LLMCACHE_CLASS_HOT], id, LLC_NONE);
		s->cursor = block;
		break;
	case LLMCACHE_CLASS_SEQ:
		if (block == s->start) {
			class_leave(c, id);
			class_enter(c, id, LLMCACHE_CLASS_LOOP);
			new_iteration(c, s, id, c->vtime, now_ns);
			s->cursor = block;
			v.cls = LLMCACHE_CLASS_LOOP;
			v.event = LLC_EV_TO_LOOP;
		} else if (block == s->cursor) {
			v.event = LLC_EV_NOISE; /* a request that begins where the last one ended: the scan goes on */
		} else {
			v.seq = new_reread(c, ch, id, file, block, now_ns);
			v.cls = LLMCACHE_CLASS_HOT;
			v.event = LLC_EV_REREAD;
		}
		break;
	case LLMCACHE_CLASS_LOOP:
		if (restarts(s, block, now_ns)) {
			new_iteration(c, s, id, c->vtime, now_ns);
			s->cursor = block;
			v.event = LLC_EV_ITERATION;
		} else if (block > s->cursor) {
			s->cursor = block;
			v.event = LLC_EV_SKIP;
		} else {
			/* Noise; a re-touch just behind the cursor marks the loop (core.h, LLC_RETOUCH_BLOCKS). */
			if (s->cursor - block < LLC_RETOUCH_BLOCKS)
				s->retouch = 1;
			v.event = LLC_EV_NOISE;
		}
		break;
	}
	return v;
}

static struct llc_verdict access_req(struct llc_core *c, uint64_t file, uint64_t block, uint64_t req_blocks,
				     uint64_t now_ns, bool noted)
{
	struct llc_chunk *ch;
	struct llc_verdict v;
	uint16_t prev, entry, cur;

	c->vtime++;
	c->stats[LLMCACHE_STAT_ACCESSES]++;
	prev = block ? lookup(c, file, block - 1) : LLC_NONE;
	ch = chunk_get(c, file, block);
	entry = ch->seq[block % LLC_CHUNK_BLOCKS];
	cur = seq_covers(c, entry, file, block) ? entry : LLC_NONE;
	if (joins(c, prev, cur, block)) {
		v = extend(c, ch, prev, file, block, req_blocks);
	} else {
		if (cur != LLC_NONE) {
			v = rereference(c, ch, cur, file, block, now_ns);
		} else if (entry != LLC_NONE) {
			v.seq = new_reread(c, ch, LLC_NONE, file, block, now_ns);
			v.cls = LLMCACHE_CLASS_HOT;
			v.event = LLC_EV_SEEN_AGAIN;
		} else {
			v.seq = seq_new(c, file, block, now_ns, LLMCACHE_CLASS_HOT);
			v.cls = LLMCACHE_CLASS_HOT;
			v.event = LLC_EV_NEW_HOT;
			ch->seq[block % LLC_CHUNK_BLOCKS] = v.seq;
		}
	}
	touch(c, v.seq);
	v.reuse_vt = noted ? recent_note(c, file, block, c->vtime) : 0;
	c->last_noted = noted;
	c->stats[LLMCACHE_STAT_SEQ_BLOCKS + v.cls]++;
	if (c->vtime >= c->next_aging_vt)
		age_loops(c);
	return v;
}

struct llc_verdict llc_access_req(struct llc_core *c, uint64_t file, uint64_t block, uint64_t req_blocks,
				  uint64_t now_ns)
{
	return access_req(c, file, block, req_blocks, now_ns, true);
}

struct llc_verdict llc_access_mapped(struct llc_core *c, uint64_t file, uint64_t block, uint64_t req_blocks,
				     uint64_t now_ns)
{
	return access_req(c, file, block, req_blocks, now_ns, false);
}

struct llc_verdict llc_access(struct llc_core *c, uint64_t file, uint64_t block, uint64_t now_ns)
{
	return llc_access_req(c, file, block, 1, now_ns);
}

/*
 * The fast path of llc_access() for a run continuing seq: what extend() and touch() do when block - 1
 * was the last access (seq is the most recently used sequence, its chunk the last one looked up), the
 * block lies in that chunk, and its index entry is seq or empty, so that nothing else can claim it.
 * HOT sequences are left to llc_access(): growing one may promote it.
 */
uint64_t llc_access_extend(struct llc_core *c, uint64_t file, uint64_t block, uint64_t max, uint16_t seq)
{
	struct llc_seq *s = &c->seqs[seq];
	struct llc_chunk *ch = &c->chunks[c->last_chunk];
	uint64_t i, k, room = LLC_CHUNK_BLOCKS - block % LLC_CHUNK_BLOCKS;
	uint16_t *entry = &ch->seq[block % LLC_CHUNK_BLOCKS];

	if (seq == LLC_NONE || seq > c->cfg.max_seqs || !s->live || s->file != file ||
	    s->cls == LLMCACHE_CLASS_HOT || c->seq_lru.tail != seq || c->last_chunk == LLC_NONE ||
	    ch->file != file || !block || block / LLC_CHUNK_BLOCKS != ch->base || s->cursor != block - 1)
		return 0;
	if (max > room)
		max = room;
	if (c->vtime + max >= c->next_aging_vt) /* the access that ages the loops goes through llc_access() */
		max = c->next_aging_vt > c->vtime ? c->next_aging_vt - c->vtime - 1 : 0;
	for (k = 0; k < max && (entry[k] == seq || entry[k] == LLC_NONE); k++)
		entry[k] = seq;
	if (k) {
		s->cursor = block + k - 1;
		if (s->cursor > s->end)
			s->end = s->cursor;
	}
	for (i = 0; c->last_noted && i < k; i++)
		recent_note(c, file, block + i, c->vtime + 1 + i);
	c->vtime += k;
	s->last_vt = ch->touched_vt = c->vtime;
	c->stats[LLMCACHE_STAT_ACCESSES] += k;
	c->stats[LLMCACHE_STAT_SEQ_BLOCKS + s->cls] += k;
	return k;
}

/* ---- queries -------------------------------------------------------------------------------------- */

const struct llc_seq *llc_seq_get(const struct llc_core *c, uint16_t id)
{
	if (id == LLC_NONE || id > c->cfg.max_seqs || !c->seqs[id].live)
		return NULL;
	return &c->seqs[id];
}

uint64_t llc_vtime(const struct llc_core *c)
{
	return c->vtime;
}

const uint64_t *llc_stats(const struct llc_core *c)
{
	return c->stats;
}

uint32_t llc_class_count(const struct llc_core *c, enum llmcache_class cls)
{
	return cls < LLMCACHE_NR_CLASSES ? c->class_count[cls] : 0;
}

uint16_t llc_first(const struct llc_core *c, enum llmcache_class cls)
{
	return cls < LLMCACHE_NR_CLASSES ? c->lists[cls].head : LLC_NONE;
}

uint16_t llc_next(const struct llc_core *c, uint16_t id)
{
	return id == LLC_NONE ? LLC_NONE : c->seqs[id].list_next;
}

uint16_t llc_lru_first(const struct llc_core *c)
{
	return c->seq_lru.head;
}

uint64_t llc_hot_idle_limit(const struct llc_core *c)
{
	return c->hot_idle_limit;
}

uint64_t llc_biggest_loop_since(const struct llc_core *c, uint64_t vt)
{
	uint64_t biggest = 0;

	for (uint16_t id = c->lists[LLMCACHE_CLASS_LOOP].head; id; id = c->seqs[id].list_next) {
		const struct llc_seq *s = &c->seqs[id];

		if (s->last_vt >= vt && s->end - s->start + 1 > biggest)
			biggest = s->end - s->start + 1;
	}
	return biggest;
}

uint64_t llc_loop_period_ns(const struct llc_seq *s)
{
	return s->prev_period_ns && s->prev_period_ns < s->period_ns ? s->prev_period_ns : s->period_ns;
}

enum llmcache_class llc_evict_class(const uint64_t resident[LLMCACHE_NR_CLASSES], uint64_t hot_reserve)
{
	if (resident[LLMCACHE_CLASS_SEQ])
		return LLMCACHE_CLASS_SEQ;
	if (resident[LLMCACHE_CLASS_HOT] > hot_reserve || !resident[LLMCACHE_CLASS_LOOP])
		return LLMCACHE_CLASS_HOT;
	return LLMCACHE_CLASS_LOOP;
}

/*
 * Parts of a loop that its iterations pass over. A model file's loop runs from its header to its end,
 * but an engine reads one row a token of the token embedding at its start: pinned from its lowest block
 * up, the loop would hold the whole embedding for about one hit a token. So a chunk of a loop none of
 * whose blocks was accessed in the LLC_COLD_PERIODS periods before the loop's current iteration began
 * is cold, and the pin plan leaves it out (Documentation/design/policy-core.md, "Cold chunks"). Judged
 * at the iteration's start, not now: a loop that stopped keeps the chunks it had (its place in the order
 * is what releases it, age_loops()). A chunk the index no longer holds was forgotten as the least
 * recently accessed: cold. A loop whose period is not measured yet has no cold chunks.
 */
#define LLC_COLD_PERIODS 2

static bool chunk_cold(const struct llc_core *c, const struct llc_seq *s, uint64_t base)
{
	uint32_t id;

	if (!s->period_vt)
		return false;
	id = *chunk_slot(c, s->file, base);
	return id == LLC_NONE || c->chunks[id].touched_vt + LLC_COLD_PERIODS * s->period_vt < s->iter_start_vt;
}

bool llc_block_cold(const struct llc_core *c, uint16_t seq, uint64_t block)
{
	const struct llc_seq *s = llc_seq_get(c, seq);

	return s && s->cls == LLMCACHE_CLASS_LOOP && s->start <= block && block <= s->end &&
	       chunk_cold(c, s, block / LLC_CHUNK_BLOCKS);
}

uint32_t llc_pin_plan(const struct llc_core *c, uint64_t budget_blocks, struct llc_pin_range *out,
		      uint32_t max)
{
	uint16_t id = c->lists[LLMCACHE_CLASS_LOOP].tail; /* shortest period first */
	uint64_t walk = c->cfg.max_chunks; /* chunk lookups left: the walk is bounded by what the index holds */
	uint32_t n = 0;

	for (; id && budget_blocks; id = c->seqs[id].list_prev) {
		const struct llc_seq *s = &c->seqs[id];
		uint64_t block = s->start;

		while (block <= s->end && budget_blocks) {
			uint64_t chunk_last = (block / LLC_CHUNK_BLOCKS + 1) * LLC_CHUNK_BLOCKS - 1;
			uint64_t last = chunk_last < s->end ? chunk_last : s->end;
			uint64_t take = last - block + 1;
			bool cold = false;

			if (walk) {
				walk--;
				cold = chunk_cold(c, s, block / LLC_CHUNK_BLOCKS);
			}
			if (cold) {
				block = last + 1;
				continue;
			}
			if (take > budget_blocks)
				take = budget_blocks;
			if (n && out[n - 1].seq == id && out[n - 1].first + out[n - 1].count == block) {
				out[n - 1].count += take;
			} else {
				if (n == max)
					return n;
				out[n].file = s->file;
				out[n].first = block;
				out[n].count = take;
				out[n].seq = id;
				n++;
			}
			budget_blocks -= take;
			block += take;
		}
	}
	return n;
}

/* ---- sizing rule ---------------------------------------------------------------------------------- */

/* ceil(bw * t_ns / 1e9) and floor(...), exact for bw * t_ns < 2^64 (bw < 1.8e9 blocks/s at T = 10 s). */
static uint64_t blocks_in(uint64_t bw_blocks_per_s, uint64_t t_ns, bool round_up)
{
	uint64_t product = bw_blocks_per_s * t_ns;

	return llc_div_u64(product + (round_up ? LLC_NSEC_PER_SEC - 1 : 0), LLC_NSEC_PER_SEC);
}

uint64_t llc_size_min_blocks(uint64_t n_blocks, uint64_t bw_blocks_per_s, uint64_t t_ns)
{
	/* floor(N - x) = N - ceil(x) for integer N. */
	uint64_t fetched = blocks_in(bw_blocks_per_s, t_ns, true);

	return n_blocks > fetched ? n_blocks - fetched : 0;
}

uint64_t llc_size_max_loop(uint64_t s_blocks, uint64_t bw_blocks_per_s, uint64_t t_ns)
{
	return s_blocks + blocks_in(bw_blocks_per_s, t_ns, false);
}

uint64_t llc_stall_ns(uint64_t n_blocks, uint64_t s_blocks, uint64_t bw_blocks_per_s, uint64_t t_ns)
{
	uint64_t missing, whole_s, fetch_ns;

	if (s_blocks >= n_blocks)
		return 0;
	if (!bw_blocks_per_s)
		return ~0ULL;
	missing = n_blocks - s_blocks;
	/* missing / bw seconds in ns, without overflowing for any realistic loop. */
	whole_s = llc_div_u64(missing, bw_blocks_per_s);
	fetch_ns = whole_s * LLC_NSEC_PER_SEC +
		   llc_div_u64((missing - whole_s * bw_blocks_per_s) * LLC_NSEC_PER_SEC, bw_blocks_per_s);
	return fetch_ns > t_ns ? fetch_ns - t_ns : 0;
}
