/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* The KV service's statistics under /sys/kernel/llmcache/kv/, pushed by llmcached (kv_stats.c). */
#ifndef LLMCACHE_KMOD_KV_STATS_H
#define LLMCACHE_KMOD_KV_STATS_H

#include <linux/compiler_types.h>

int llc_kv_init(void);
void llc_kv_exit(void);
long llc_kv_push(void __user *arg);

#endif /* LLMCACHE_KMOD_KV_STATS_H */
