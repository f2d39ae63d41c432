/* SPDX-License-Identifier: MIT */
/*
 * kv_client: the smallest engine-side use of llmcached's KV client API, to copy into an inference
 * engine. It opens a session with a model's shape, appends a prompt's K and V for every layer (the
 * prefill), asks per layer for the KV to attend to given a query (one decode step), checks that what
 * came back is what it stored, and closes the session. Every call returns 0 or a negative errno, and
 * llmcache_kv_error() says why in a sentence: print it.
 *
 * Build against the installed library (package libllmcache-kv-dev, or `cmake --install`):
 *   cc -o kv_client kv_client.c $(pkg-config --cflags --libs llmcache-kv)
 * Run against a running llmcached (the packaged service listens on /run/llmcached/llmcached.sock):
 *   ./kv_client [SOCKET]
 *
 * The toy "model" has 2 layers, 4 query heads sharing 2 KV heads of 64 floats. Four tokens of the
 * prompt (positions 100-103) get keys that match the query, so the daemon's importance scoring must
 * select them besides the sink (first) and recent (last) tokens it always keeps.
 */
#include <llmcache/llmcache_kv.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 2, Q_HEADS = 4, KV_HEADS = 2, HEAD_DIM = 64, PROMPT = 256, BATCH = 32, BUDGET = 96 };
enum { IMPORTANT_FIRST = 100, IMPORTANT_LAST = 103 };
#define ROW (KV_HEADS * HEAD_DIM) /* floats per token and layer, for K and for V */

/* Prints what failed and why. kv may be NULL (then only the errno is known). */
static int fail(const llmcache_kv *kv, const char *what, int err)
{
	fprintf(stderr, "kv_client: %s failed (%s): %s\n", what, strerror(-err),
		kv ? llmcache_kv_error(kv) : "no session");
	return 1;
}

/* Synthetic tensors: small keys everywhere except the important tokens; each V row holds its position
 * so that a selection can be checked. A real engine passes its own K/V projections here. */
static void make_rows(uint32_t first, uint32_t n, float *k, float *v)
{
	for (uint32_t t = 0; t < n; t++) {
		const uint32_t pos = first + t;
		const int important = pos >= IMPORTANT_FIRST && pos <= IMPORTANT_LAST;
		for (uint32_t i = 0; i < ROW; i++) {
			k[t * ROW + i] = important ? 1.0f : 0.01f * (float)((pos * 7 + i) % 5) - 0.02f;
			v[t * ROW + i] = (float)pos;
		}
	}
}

int main(int argc, char **argv)
{
	/* NULL: the daemon's default socket. */
	const char *socket_path = argc > 1 ? argv[1] : NULL;
	if (argc > 2) {
		fprintf(stderr, "usage: %s [SOCKET]\n", argv[0]);
		return 2;
	}

	/* 1. Open a session with the model's shape. max_budget must be at least the daemon's sink +
	 *    recent tokens (4 + 64 by default); append_batch bounds one append. */
	const struct llmcache_kv_shape shape = {
		.layers = LAYERS, .q_heads = Q_HEADS, .kv_heads = KV_HEADS, .head_dim = HEAD_DIM,
		.dtype = LLMCACHE_KV_FP32, .max_context = 512, .max_budget = 128, .append_batch = BATCH,
	};
	llmcache_kv *kv = NULL;
	int err = llmcache_kv_open(socket_path, &shape, &kv);
	if (err) {
		/* kv is still set when memory allowed, so that the reason can be read: close it after. */
		fail(kv, "llmcache_kv_open", err);
		if (kv)
			llmcache_kv_close(kv);
		return 1;
	}
	printf("session %llu open: %u layers, %u KV heads x %u\n", (unsigned long long)llmcache_kv_session_id(kv),
	       shape.layers, shape.kv_heads, shape.head_dim);

	/* 2. Prefill: append the prompt's K and V, layer by layer, at most append_batch tokens a call. */
	static float k[BATCH * ROW], v[BATCH * ROW];
	for (uint32_t layer = 0; layer < LAYERS; layer++) {
		for (uint32_t first = 0; first < PROMPT; first += BATCH) {
			make_rows(first, BATCH, k, v);
			err = llmcache_kv_append(kv, layer, k, v, BATCH);
			if (err) {
				/* llmcache_kv_appended() says how many of these tokens were stored anyway. */
				fprintf(stderr, "kv_client: %u of %u tokens stored\n", llmcache_kv_appended(kv), BATCH);
				fail(kv, "llmcache_kv_append", err);
				llmcache_kv_close(kv);
				return 1;
			}
		}
	}
	printf("appended %u tokens to each of %u layers\n", PROMPT, LAYERS);

	/* 3. Decode step: per layer, the KV to attend to for this query, within BUDGET tokens. */
	static float q[Q_HEADS * HEAD_DIM];
	for (uint32_t i = 0; i < Q_HEADS * HEAD_DIM; i++)
		q[i] = 1.0f;
	int status = 0;
	for (uint32_t layer = 0; layer < LAYERS && !status; layer++) {
		struct llmcache_kv_selection sel;
		err = llmcache_kv_select(kv, layer, q, BUDGET, &sel);
		if (err) {
			status = fail(kv, "llmcache_kv_select", err);
			break;
		}
		/* sel points into the session's shared memory: use (or copy) it before the next call. */
		const float *vrows = sel.v;
		uint32_t important = 0, mismatches = 0;
		for (uint32_t i = 0; i < sel.n; i++) {
			const uint32_t pos = sel.positions[i];
			if (pos >= IMPORTANT_FIRST && pos <= IMPORTANT_LAST)
				important++;
			if (vrows[(size_t)i * ROW] != (float)pos)
				mismatches++;
		}
		printf("layer %u: selected %u tokens (positions %u..%u), important tokens %u/4, V rows %s\n", layer,
		       sel.n, sel.n ? sel.positions[0] : 0, sel.n ? sel.positions[sel.n - 1] : 0, important,
		       mismatches ? "WRONG" : "match");
		if (mismatches || important != 4 || sel.n == 0 || sel.n > BUDGET)
			status = 1;
	}

	/* 4. Close: the daemon frees the session's memory and storage. */
	llmcache_kv_close(kv);
	printf("session closed: %s\n", status ? "FAILED" : "ok");
	return status;
}
