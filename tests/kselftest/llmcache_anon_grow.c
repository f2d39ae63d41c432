// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * An engine's anonymous memory growing step by step (its context, KV cache, compute buffers), for
 * tests/vm/memcg-oom-check.sh: touches TOTAL MiB of private anonymous memory in small pages, STEP MiB
 * at a time with PAUSE_MS between steps, then holds it for HOLD_S seconds and exits 0. Each step is
 * printed when done, so that the test sees how far it came if the OOM killer takes it.
 *
 *   llmcache_anon_grow TOTAL_MIB STEP_MIB PAUSE_MS HOLD_S
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

int main(int argc, char **argv)
{
	size_t total, step, done = 0, off;
	long pause_ms, hold_s, page = sysconf(_SC_PAGESIZE);
	char *p;

	if (argc != 5) {
		fprintf(stderr, "usage: %s TOTAL_MIB STEP_MIB PAUSE_MS HOLD_S\n", argv[0]);
		return 2;
	}
	total = strtoul(argv[1], NULL, 10) << 20;
	step = strtoul(argv[2], NULL, 10) << 20;
	pause_ms = strtol(argv[3], NULL, 10);
	hold_s = strtol(argv[4], NULL, 10);
	if (!total || !step) {
		fprintf(stderr, "%s: TOTAL_MIB and STEP_MIB must be positive\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(p, total, MADV_NOHUGEPAGE); /* charged page by page, as an allocator's heap grows */
	while (done < total) {
		size_t end = done + step < total ? done + step : total;

		for (off = done; off < end; off += page)
			p[off] = 1;
		done = end;
		printf("anon %zu MiB\n", done >> 20);
		if (done < total)
			sleep_ms(pause_ms);
	}
	sleep(hold_s);
	printf("held %zu MiB for %ld s\n", total >> 20, hold_s);
	return 0;
}
