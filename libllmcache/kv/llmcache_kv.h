/* SPDX-License-Identifier: MIT */
/*
 * The llmcached KV client API (C ABI). An inference engine opens a session with its model's shape,
 * appends each token's K and V per layer, and asks per layer for the KV to attend to given the query:
 * the daemon returns the sink tokens, the recent window and the top-scoring rest within a token
 * budget, from memory or from its storage pool. Tensors travel through shared memory (a sealed memfd
 * mapped by both sides), never through the socket. Functions return 0 or a negative errno;
 * llmcache_kv_error() says what went wrong. One session object is used by one thread at a time.
 */
#ifndef LLMCACHE_KV_H
#define LLMCACHE_KV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum llmcache_kv_dtype { LLMCACHE_KV_FP32 = 0, LLMCACHE_KV_FP16 = 1, LLMCACHE_KV_BF16 = 2 };

struct llmcache_kv_shape {
	uint32_t layers, q_heads, kv_heads, head_dim;
	uint32_t dtype;	       /* enum llmcache_kv_dtype */
	uint32_t max_context;  /* tokens per layer */
	uint32_t max_budget;   /* most tokens one select returns (>= the daemon's sink + recent) */
	uint32_t append_batch; /* most tokens one append carries */
};

struct llmcache_kv_selection {
	uint32_t n;		   /* tokens selected */
	const uint32_t *positions; /* ascending token positions */
	const void *k, *v;	   /* n rows of kv_heads * head_dim elements each, in positions order */
};

typedef struct llmcache_kv llmcache_kv;

/* Kelle's attention-based eviction and recomputation (AERP; Documentation/kv.md, "Kelle's eviction and
 * recomputation"). The session stays in the daemon's memory; each KV head of a layer keeps at most
 * budget tokens (the daemon's sink and recent tokens among them) by the attention its selects gave
 * them; tokens popular in more than half of the heads keep their input vector x instead of K and V when
 * x is smaller, and K = x.W_K, V = x.W_V are recomputed for select. */
struct llmcache_kv_aerp {
	uint32_t budget;  /* tokens each KV head of a layer keeps (>= the daemon's sink + recent) */
	uint32_t d_model; /* elements of a token's input vector x; 0 = no recomputation */
	/* layers x d_model x (kv_heads * head_dim) floats each, row-major per layer; NULL when d_model is 0 */
	const float *w_k, *w_v;
};

/* EdgeInfinite's compressed memory on top of AERP (Documentation/kv.md, "EdgeInfinite's compressed
 * memory"): each (token, KV head) the AERP eviction removes is folded into that head's memory,
 * M += sigma(k)^T v and z += sigma(k) with sigma = ELU + 1, instead of being lost; each select also
 * returns the memory's readout for its query, sigma(q) M / (sigma(q) z) per query head, which the engine
 * combines with its attention through its own gate. Short contexts skip the memory (EdgeInfinite's
 * long/short routing): a layer's readout is used only once its context exceeds route_threshold tokens. */
struct llmcache_kv_memory {
	uint32_t route_threshold; /* tokens; below max_context; 0: read the memory whenever it holds something */
};
/* What a query head's readout is (llmcache_kv_memory_readout's state bytes). */
enum llmcache_kv_memory_state {
	LLMCACHE_KV_MEMORY_SHORT = 0, /* the layer's context is within route_threshold: not used, zero */
	LLMCACHE_KV_MEMORY_USED = 1,  /* sigma(q) M / (sigma(q) z) */
	LLMCACHE_KV_MEMORY_EMPTY = 2  /* nothing folded in that head's memory yet: zero */
};

/* No call waits for ever: a session's calls fail with -ETIMEDOUT when llmcached does not answer
 * within this many ms (the connection is then closed), a status query within its own timeout. */
#define LLMCACHE_KV_TIMEOUT_MS 60000
#define LLMCACHE_KV_STATUS_TIMEOUT_MS 5000

/* Connects to llmcached at socket_path (NULL: /run/llmcached/llmcached.sock) and opens a session.
 * On failure *out is still set when memory allows, so llmcache_kv_error() can say why; close it. */
int llmcache_kv_open(const char *socket_path, const struct llmcache_kv_shape *shape, llmcache_kv **out);
/* Opens an AERP session (see struct llmcache_kv_aerp); the other calls work as for llmcache_kv_open,
 * and a select returns the retained tokens with their keep mask (llmcache_kv_selection_heads). */
int llmcache_kv_open_aerp(const char *socket_path, const struct llmcache_kv_shape *shape,
			  const struct llmcache_kv_aerp *aerp, llmcache_kv **out);
/* Opens an AERP session with the compressed memory (struct llmcache_kv_memory); aerp as for
 * llmcache_kv_open_aerp. A route_threshold not below max_context is refused (-EINVAL). */
int llmcache_kv_open_memory(const char *socket_path, const struct llmcache_kv_shape *shape,
			    const struct llmcache_kv_aerp *aerp, const struct llmcache_kv_memory *memory,
			    llmcache_kv **out);
/* Appends n tokens (n <= append_batch) to a layer: k and v hold n rows each. */
int llmcache_kv_append(llmcache_kv *kv, uint32_t layer, const void *k, const void *v, uint32_t n);
/* The same with each token's input vector x (n rows of d_model elements of the dtype), for AERP sessions
 * with recomputation; -EINVAL for other sessions. */
int llmcache_kv_append_x(llmcache_kv *kv, uint32_t layer, const void *k, const void *v, const void *x, uint32_t n);
/* The tokens the last append stored: all n when it returned 0. When it failed, a token whose spill
 * failed is still stored; one past the session's memory limit is not, nor any after it in that append. */
uint32_t llmcache_kv_appended(const llmcache_kv *kv);
/* Selects the KV of a layer for query q (q_heads * head_dim floats) within budget tokens. The
 * selection points into the session's shared memory and stays valid until the next call. */
int llmcache_kv_select(llmcache_kv *kv, uint32_t layer, const float *q, uint32_t budget,
		       struct llmcache_kv_selection *sel);
/* The same in two halves: begin returns once the daemon has the query (its storage backend then
 * scores the layer while the engine computes the previous one); end waits for the selection. One
 * select may be pending per session; appends in between fail with -EBUSY. */
int llmcache_kv_select_begin(llmcache_kv *kv, uint32_t layer, const float *q, uint32_t budget);
int llmcache_kv_select_end(llmcache_kv *kv, struct llmcache_kv_selection *sel);
/* AERP sessions: the last selection's keep mask, n rows of kv_heads bytes, 1 where that KV head keeps
 * the token (its K and V rows are zero where it does not, except for tokens recomputed from x, whose
 * rows are whole); valid like the selection. NULL for other sessions. */
const uint8_t *llmcache_kv_selection_heads(const llmcache_kv *kv);
/* Sessions with the compressed memory: the readout of the last select, q_heads rows of head_dim floats
 * in *readout and q_heads bytes of enum llmcache_kv_memory_state in *state; valid like the selection,
 * until the next call. -EINVAL (both NULL) for a session without the memory, or when the last call was
 * not a select that succeeded. */
int llmcache_kv_memory_readout(llmcache_kv *kv, const float **readout, const uint8_t **state);
/* Discards every token of the session; the session stays open. */
int llmcache_kv_drop(llmcache_kv *kv);
/* Closes the session and frees kv. */
void llmcache_kv_close(llmcache_kv *kv);
const char *llmcache_kv_error(const llmcache_kv *kv);
/* The daemon's session listing for the caller's uid (all sessions for root), one line per session,
 * NUL-terminated in buf (truncated to len - 1 bytes). Returns its full length, or a negative errno
 * with the reason in buf. For `llmcachectl kv status`. */
int llmcache_kv_status(const char *socket_path, char *buf, uint32_t len);
/* The same within timeout_ms instead of LLMCACHE_KV_STATUS_TIMEOUT_MS. */
int llmcache_kv_status_timeout(const char *socket_path, char *buf, uint32_t len, uint32_t timeout_ms);
uint64_t llmcache_kv_session_id(const llmcache_kv *kv);

#ifdef __cplusplus
}
#endif
#endif
