// SPDX-License-Identifier: MIT
#include "kv/kernel_stats.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace llmcache::kv {

void add_stats(KvStats &a, const KvStats &b, bool with_gauges)
{
	if (with_gauges) {
		a.cpu_bytes += b.cpu_bytes, a.cpu_pages += b.cpu_pages, a.spilled_pages += b.spilled_pages;
		a.cpu_tokens += b.cpu_tokens, a.storage_tokens += b.storage_tokens, a.storage_bytes += b.storage_bytes;
		a.resident_copies += b.resident_copies, a.storage_slots_used += b.storage_slots_used;
	}
	a.clean_spills += b.clean_spills, a.copies_dropped += b.copies_dropped;
	a.spill_batches += b.spill_batches, a.spill_failures += b.spill_failures, a.fetched_pages += b.fetched_pages;
	a.promoted_pages += b.promoted_pages, a.selects += b.selects, a.scored_cpu += b.scored_cpu;
	a.scored_storage += b.scored_storage, a.cpu_score_ns += b.cpu_score_ns, a.storage_score_ns += b.storage_score_ns;
	a.cpu_runs += b.cpu_runs, a.storage_runs += b.storage_runs;
	StorageStats &s = a.storage;
	const StorageStats &t = b.storage;
	s.slabs_written += t.slabs_written, s.slabs_read += t.slabs_read, s.bytes_written += t.bytes_written;
	s.bytes_read += t.bytes_read, s.runs_read += t.runs_read, s.errors += t.errors, s.write_ns += t.write_ns, s.read_ns += t.read_ns;
}

llmcache_ioc_kv_stats kernel_stats(const KvStats &t, uint32_t sessions, double beta, bool device_scores)
{
	llmcache_ioc_kv_stats st{};
	st.size = sizeof(st);
	st.sessions = sessions;
	st.beta_milli = beta > 0 && beta < 4e6 ? (uint32_t)(beta * 1000 + 0.5) : 0;
	st.selects = t.selects;
	llmcache_kv_pool_stats &c = st.pool[LLMCACHE_KV_POOL_CPU], &s = st.pool[LLMCACHE_KV_POOL_STORAGE];
	c.bytes = t.cpu_bytes;
	c.tokens = t.cpu_tokens;
	// Pages that left memory: written as a K and a V slab, or clean (their device copy kept, nothing
	// written). Pages written through as they filled (KvOptions::write_through) did not leave it.
	c.spills = t.storage.slabs_written / 2 - t.written_through + t.clean_spills;
	c.restores = t.promoted_pages;
	c.bus_bytes = t.storage.bytes_written; // host to device: the spills that wrote, and pages written through
	c.kernel_runs = t.cpu_runs;
	c.scored_tokens = t.scored_cpu;
	c.score_latency_ns = t.cpu_runs ? t.cpu_score_ns / t.cpu_runs : 0;
	s.bytes = t.storage_bytes;
	s.tokens = t.storage_tokens;
	s.spills = t.storage.slabs_written;
	s.restores = t.storage.slabs_read;
	s.bus_bytes = t.storage.bytes_read + (device_scores ? t.scored_storage * sizeof(csd_score) : 0);
	s.kernel_runs = t.storage_runs;
	s.scored_tokens = t.scored_storage;
	s.score_latency_ns = t.storage_runs ? t.storage_score_ns / t.storage_runs : 0;
	return st;
}

KernelStatsFeed::~KernelStatsFeed()
{
	if (fd_ >= 0)
		close(fd_);
}

bool KernelStatsFeed::open(const std::string &dev)
{
	path_ = dev;
	fd_ = ::open(dev.c_str(), O_RDWR | O_CLOEXEC);
	return fd_ >= 0;
}

int KernelStatsFeed::push(const llmcache_ioc_kv_stats &st, std::string &err)
{
	if (fd_ < 0)
		return -EBADF;
	if (ioctl(fd_, LLMCACHE_IOC_KV_STATS, &st) == 0)
		return 0;
	const int e = errno;
	err = "cannot push the KV statistics to " + path_ + ": " + std::strerror(e) +
	      (e == ENOTTY ? " (the loaded llmcache.ko predates LLMCACHE_IOC_KV_STATS: load the current module)" : "") +
	      "; /sys/kernel/llmcache/kv/ will not be updated";
	close(fd_);
	fd_ = -1;
	return -e;
}

} // namespace llmcache::kv
