// SPDX-License-Identifier: MIT
/*
 * The KV service's statistics for the kernel module: llmcached sums its sessions' KvStats (closed
 * sessions' counters included), converts them to struct llmcache_ioc_kv_stats and pushes them through
 * LLMCACHE_IOC_KV_STATS on /dev/llmcache, so they show under /sys/kernel/llmcache/kv/. Without the
 * module (no /dev/llmcache) nothing is pushed and nothing is said.
 */
#pragma once
#include "kv/kv_store.hpp"

#include "../../include/uapi/llmcache.h"

#include <string>

namespace llmcache::kv {

// Adds b's counters to a; gauges (bytes, tokens, pages held now) only when with_gauges.
void add_stats(KvStats &a, const KvStats &b, bool with_gauges);

// The uapi record of a total: per pool, what it holds, moved and scored (Documentation/ABI). cpu.spills
// counts the pages that left memory, clean demotions included; storage.spills and cpu.bus_bytes count
// only what was written, so a clean spill adds to the first alone.
// device_scores: the backend scores in storage, so Score Blocks cross the bus instead of keys.
llmcache_ioc_kv_stats kernel_stats(const KvStats &total, uint32_t sessions, double beta, bool device_scores);

class KernelStatsFeed {
public:
	KernelStatsFeed() = default;
	KernelStatsFeed(const KernelStatsFeed &) = delete;
	KernelStatsFeed &operator=(const KernelStatsFeed &) = delete;
	~KernelStatsFeed();
	// Opens the device if it exists; false (and silent) when it does not.
	bool open(const std::string &dev = "/dev/" LLMCACHE_DEV_NAME);
	bool active() const { return fd_ >= 0; }
	// 0 or -errno; the first failure is described in err and the feed closes (no log flood).
	int push(const llmcache_ioc_kv_stats &st, std::string &err);

private:
	int fd_ = -1;
	std::string path_;
};

} // namespace llmcache::kv
