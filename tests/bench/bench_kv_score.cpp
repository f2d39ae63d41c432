// SPDX-License-Identifier: MIT
// make bench: CPU scoring throughput of the exact kernel (score_exact, the code the CPU pool and the
// emulated device run) for LLaMA-2-7B-shaped keys (32 KV heads x head dim 128 per token) in fp16 and
// fp32, against the memory-bandwidth bound of this machine measured in the same run: a STREAM-like
// read of the same key bytes. Scoring can be at most as fast as reading its keys once, so
// bound = read bandwidth / key bytes per token. Rounds alternate read and score, the median is shown.
// Both are timed in this thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a machine shared with other
// jobs, time spent descheduled would otherwise count against whichever side it fell on.
#include "csd/kernels/kernel_common.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#include "machine.hpp"
#endif

namespace {

double cpu_now()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Reads every byte once with the widest loads this CPU has (four independent accumulators).
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t *p, size_t n)
{
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	size_t i = 0;
	for (; i + 128 <= n; i += 128) {
		a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i)));
		b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i + 32)));
		c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i + 64)));
		d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i + 96)));
	}
	a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
	uint64_t out[4];
	_mm256_storeu_si256(reinterpret_cast<__m256i *>(out), a);
	return out[0] + out[1] + out[2] + out[3] + (i < n ? p[i] : 0);
}
#endif

uint64_t read_bytes(const uint8_t *p, size_t n)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx2"))
		return read_avx2(p, n);
#endif
	uint64_t s = 0;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		uint64_t w;
		std::memcpy(&w, p + i, 8);
		s += w;
	}
	return s;
}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv)
{
	const uint32_t tokens = argc > 1 ? (uint32_t)std::strtoul(argv[1], nullptr, 10) : 16384;
	const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
	const uint32_t heads = 32, head_dim = 128, dims = heads * head_dim;
	utsname u{};
	uname(&u);
	std::printf("machine: %s, %ld cores, Linux %s\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN), u.release);
	std::printf("keys: %u tokens x %u heads x head dim %u (LLaMA-2-7B, one layer), exact kernel score_exact, "
		    "1 thread, %d rounds, median, per second of thread CPU time\n\n", tokens, heads, head_dim, rounds);
	std::printf("%-6s %10s %14s %14s %14s %8s\n", "dtype", "MiB", "read GB/s", "bound tok/s", "score tok/s", "of bound");
	std::vector<float> q(dims);
	for (uint32_t i = 0; i < dims; i++)
		q[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
	std::vector<csd_score> out(tokens);
	int status = 0;
	for (uint32_t dt : {CSD_FP16, CSD_FP32}) {
		const size_t bytes = (size_t)tokens * dims * csd_dtype_bytes(dt);
		auto keys = static_cast<uint8_t *>(std::aligned_alloc(64, bytes));
		uint64_t x = 88172645463325252ull;
		for (size_t i = 0; i < bytes; i += 2) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			// Finite values of modest size in either dtype: an fp16 in [-2, 2], or the top half of an fp32.
			const uint16_t h = (uint16_t)((x & 0x83ff) | 0x3800);
			std::memcpy(keys + i, &h, 2);
		}
		std::vector<double> rd, sc;
		uint64_t sink = 0;
		for (int r = 0; r < rounds; r++) {
			double t0 = cpu_now();
			sink += read_bytes(keys, bytes);
			rd.push_back((double)bytes / (cpu_now() - t0));
			uint32_t blocks = 0;
			t0 = cpu_now();
			score_exact(q.data(), reinterpret_cast<const uint32_t *>(keys), tokens, 0, heads, heads, head_dim, dt, 64,
				    out.data(), &blocks);
			sc.push_back(tokens / (cpu_now() - t0));
			sink += blocks;
		}
		const double bw = median(rd), bound = bw / ((double)dims * csd_dtype_bytes(dt)), rate = median(sc);
		std::printf("%-6s %10zu %14.2f %14.0f %14.0f %7.0f%%\n", dt == CSD_FP16 ? "fp16" : "fp32", bytes >> 20, bw / 1e9,
			    bound, rate, 100 * rate / bound);
		if (sink == 1)
			status = 1; // keeps the reads observable
		std::free(keys);
	}
	std::printf("\ntok/s: tokens of one layer scored per second (all 32 heads); per head, multiply by 32.\n");
	return status;
}
