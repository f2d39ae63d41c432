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

/* No call waits for ever: a session's calls fail with -ETIMEDOUT when llmcached does not answer
 * within this many ms (the connection is then closed), a status query within its own timeout. */
#define LLMCACHE_KV_TIMEOUT_MS 60000
#define LLMCACHE_KV_STATUS_TIMEOUT_MS 5000

/* Connects to llmcached at socket_path (NULL: /run/llmcached/llmcached.sock) and opens a session.
 * On failure *out is still set when memory allows, so llmcache_kv_error() can say why; close it. */
int llmcache_kv_open(const char *socket_path, const struct llmcache_kv_shape *shape, llmcache_kv **out);
/* Appends n tokens (n <= append_batch) to a layer: k and v hold n rows each. */
int llmcache_kv_append(llmcache_kv *kv, uint32_t layer, const void *k, const void *v, uint32_t n);
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
