/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* One field of /proc/meminfo, in KiB, for the module's tests; -1 when it cannot be read. */
#ifndef LLMCACHE_TEST_MEMINFO_H
#define LLMCACHE_TEST_MEMINFO_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif
