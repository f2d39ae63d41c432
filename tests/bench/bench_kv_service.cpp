// SPDX-License-Identifier: MIT
// An engine's round trips to a running llmcached through the C client API (llmcache_kv.h): one
// session of a small model shape, TOKENS tokens appended per layer in batches, then SELECTS selects
// per layer, timed. Prints the per-call latencies; exits non-zero with the daemon's message if any
// call fails. tests/vm/kv-stats-check.sh uses it to make the daemon's statistics move.
#include "kv/llmcache_kv.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using Clock = std::chrono::steady_clock;

int main(int argc, char **argv)
{
	if (argc < 2) {
		std::fprintf(stderr, "usage: bench_kv_service SOCKET [tokens per layer (2048)] [selects per layer (8)]\n");
		return 2;
	}
	const uint32_t tokens = argc > 2 ? (uint32_t)std::atoi(argv[2]) : 2048, selects = argc > 3 ? (uint32_t)std::atoi(argv[3]) : 8;
	const llmcache_kv_shape shape{2, 8, 8, 128, LLMCACHE_KV_FP16, tokens + 64, std::min(512u, tokens + 64), 64};
	const size_t row = (size_t)shape.kv_heads * shape.head_dim;
	llmcache_kv *kv = nullptr;
	auto fail = [&](const char *what) {
		std::fprintf(stderr, "bench_kv_service: %s failed: %s\n", what, kv ? llmcache_kv_error(kv) : "out of memory");
		llmcache_kv_close(kv);
		return 1;
	};
	if (llmcache_kv_open(argv[1], &shape, &kv))
		return fail("open");
	std::vector<uint16_t> k(row * shape.append_batch), v(k.size());
	const auto t0 = Clock::now();
	for (uint32_t t = 0; t < tokens; t += shape.append_batch)
		for (uint32_t l = 0; l < shape.layers; l++) {
			for (size_t i = 0; i < k.size(); i++)
				k[i] = (uint16_t)(0x3000 | ((t + i * 7 + l) % 0x3ff)), v[i] = (uint16_t)(t + i);
			if (llmcache_kv_append(kv, l, k.data(), v.data(), shape.append_batch))
				return fail("append");
		}
	const double append_s = std::chrono::duration<double>(Clock::now() - t0).count();
	std::vector<float> q((size_t)shape.q_heads * shape.head_dim, 0.25f);
	llmcache_kv_selection sel{};
	const auto t1 = Clock::now();
	for (uint32_t s = 0; s < selects; s++)
		for (uint32_t l = 0; l < shape.layers; l++) {
			q[s % q.size()] = 1.0f + s;
			if (llmcache_kv_select(kv, l, q.data(), 256, &sel))
				return fail("select");
		}
	const double select_s = std::chrono::duration<double>(Clock::now() - t1).count();
	std::printf("session %llu: %u tokens x %u layers appended in %.1f ms (%.1f us per token and layer), %u selects "
		    "x %u layers in %.1f ms (%.2f ms each, %u tokens selected)\n",
		    (unsigned long long)llmcache_kv_session_id(kv), tokens, shape.layers, 1e3 * append_s,
		    1e6 * append_s / tokens / shape.layers, selects, shape.layers, 1e3 * select_s,
		    1e3 * select_s / selects / shape.layers, sel.n);
	llmcache_kv_close(kv);
	return 0;
}
