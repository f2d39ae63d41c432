/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Fields of /proc/meminfo, in KiB, for the module's tests. */
#ifndef LLMCACHE_TEST_MEMINFO_H
#define LLMCACHE_TEST_MEMINFO_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One field; -1 when it cannot be read. */
static inline long long meminfo_kib(const char *field)
{
	char line[128];
	long long v = -1;
	size_t len = strlen(field);
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len) && line[len] == ':') {
			v = atoll(line + len + 1);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

/*
 * What shrinkers outside the slab say they can give back (KReclaimable less SReclaimable), in KiB, both
 * from one read of /proc/meminfo; -1 when it cannot be read.
 */
static inline long long shrinker_reclaimable_kib(void)
{
	char line[128];
	long long k = -1, slab = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "KReclaimable:", 13))
			k = atoll(line + 13);
		else if (!strncmp(line, "SReclaimable:", 13))
			slab = atoll(line + 13);
	if (f)
		fclose(f);
	return k < 0 || slab < 0 ? -1 : k - slab;
}

#endif
