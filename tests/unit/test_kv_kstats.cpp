// SPDX-License-Identifier: MIT
// llmcached's statistics for /sys/kernel/llmcache/kv/: the sum over sessions, the uapi record per
// pool, and the feed's behaviour without the module (silent) or with a device that refuses the ioctl.
#include "cmocka_cpp.hpp"

#include "kv/kernel_stats.hpp"

#include <cstring>

using namespace llmcache::kv;

namespace {

KvStats sample()
{
	KvStats s;
	s.cpu_bytes = 1000, s.cpu_pages = 4, s.spilled_pages = 6, s.cpu_tokens = 120, s.storage_tokens = 192;
	s.storage_bytes = 6 * 2 * 8192, s.promoted_pages = 3, s.selects = 10, s.scored_cpu = 500, s.scored_storage = 900;
	s.cpu_score_ns = 4000, s.storage_score_ns = 9000, s.cpu_runs = 10, s.storage_runs = 9;
	s.storage.slabs_written = 18, s.storage.slabs_read = 7, s.storage.bytes_written = 18 * 8192;
	s.storage.bytes_read = 7 * 8192, s.clean_spills = 2;
	return s;
}

void kernel_stats__one_session__each_pool_field(void **)
{
	const llmcache_ioc_kv_stats st = kernel_stats(sample(), 2, 1.25, true);
	assert_int_equal(st.size, sizeof(st));
	assert_int_equal(st.flags, 0);
	assert_int_equal(st.sessions, 2);
	assert_int_equal(st.beta_milli, 1250);
	assert_int_equal(st.selects, 10);
	const llmcache_kv_pool_stats &c = st.pool[LLMCACHE_KV_POOL_CPU], &s = st.pool[LLMCACHE_KV_POOL_STORAGE];
	assert_int_equal(c.bytes, 1000);
	assert_int_equal(c.tokens, 120);
	assert_int_equal(c.spills, 9 + 2); // pages written and pages spilled clean (nothing written)
	assert_int_equal(c.restores, 3);
	assert_int_equal(c.bus_bytes, 18 * 8192); // the slabs written alone
	assert_int_equal(c.kernel_runs, 10);
	assert_int_equal(c.scored_tokens, 500);
	assert_int_equal(c.score_latency_ns, 400);
	assert_int_equal(s.bytes, 6 * 2 * 8192);
	assert_int_equal(s.tokens, 192);
	assert_int_equal(s.spills, 18);
	assert_int_equal(s.restores, 7);
	assert_int_equal(s.bus_bytes, 7 * 8192 + 900 * 8); // slabs read and the Score Blocks
	assert_int_equal(s.kernel_runs, 9);
	assert_int_equal(s.score_latency_ns, 1000);
	// With the none backend the keys themselves cross the bus (they are in bytes_read): no Score Blocks.
	assert_int_equal(kernel_stats(sample(), 1, 0, false).pool[LLMCACHE_KV_POOL_STORAGE].bus_bytes, 7 * 8192);
	assert_int_equal(kernel_stats(sample(), 1, 0, false).beta_milli, 0);
}

void add_stats__closed_session__counters_without_gauges(void **)
{
	KvStats total = sample();
	add_stats(total, sample(), false);
	assert_int_equal(total.cpu_bytes, 1000);
	assert_int_equal(total.storage_tokens, 192);
	assert_int_equal(total.selects, 20);
	assert_int_equal(total.storage.slabs_read, 14);
	assert_int_equal(total.clean_spills, 4);
	add_stats(total, sample(), true);
	assert_int_equal(total.cpu_bytes, 2000);
	assert_int_equal(total.cpu_runs, 30);
}

void feed__no_module_or_refusing_device__silent_then_one_error(void **)
{
	KernelStatsFeed none;
	assert_false(none.open("/nonexistent/llmcache"));
	std::string err;
	assert_int_equal(none.push(kernel_stats(sample(), 1, 0, true), err), -EBADF);
	assert_true(err.empty());
	KernelStatsFeed null; // a device that knows no such ioctl, like a module older than the KV stats
	assert_true(null.open("/dev/null"));
	assert_int_equal(null.push(kernel_stats(sample(), 1, 0, true), err), -ENOTTY);
	assert_non_null(std::strstr(err.c_str(), "predates"));
	assert_false(null.active());
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernel_stats__one_session__each_pool_field),
		cmocka_unit_test(add_stats__closed_session__counters_without_gauges),
		cmocka_unit_test(feed__no_module_or_refusing_device__silent_then_one_error),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
