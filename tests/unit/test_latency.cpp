// SPDX-License-Identifier: MIT
// Figure 5's latency model against hand-computed values.
#include "cmocka_cpp.hpp"

#include <cmath>

#include "sim/latency.hpp"

using namespace llmcache::sim;

// cmocka's assert_float_equal works in float; these values need double.
#define assert_near(a, b, eps)                                                                          \
	do {                                                                                            \
		const double a_ = (a), b_ = (b);                                                        \
		if (!(std::fabs(a_ - b_) <= (eps)))                                                     \
			fail_msg("%s = %.12g, expected %.12g", #a, a_, b_);                             \
	} while (0)

// Per miss: 50 us + 4096 B / BW. Per block access: 4 transfers of 1 KiB, each 2 us + 1024 B / 20 GB/s
// = 2.0512 us, so 8.2048 us.
static void fetch_latency__10_hits_5_misses_at_100MBps__hand_computed(void **)
{
	FetchLatency f = fetch_latency(10, 5, 100e6);
	assert_int_equal(f.storage_ios, 5);
	assert_int_equal(f.transfers, 60);
	assert_near(f.storage_s, 5 * 90.96e-6, 1e-12);    // 50 + 40.96 us
	assert_near(f.transfer_s, 60 * 2.0512e-6, 1e-12);  // 123.072 us
	assert_near(f.total_s(), 577.872e-6, 1e-12);
}

static void fetch_latency__10_hits_5_misses_at_1GBps__hand_computed(void **)
{
	FetchLatency f = fetch_latency(10, 5, 1e9);
	assert_near(f.storage_s, 5 * 54.096e-6, 1e-12);   // 50 + 4.096 us
	assert_near(f.total_s(), 393.552e-6, 1e-12);
}

static void fetch_latency__all_hits__transfers_only_whatever_the_bandwidth(void **)
{
	FetchLatency slow = fetch_latency(1000, 0, 100e6), fast = fetch_latency(1000, 0, 1e9);
	assert_int_equal(slow.storage_ios, 0);
	assert_near(slow.storage_s, 0, 0);
	assert_near(slow.total_s(), 1000 * 8.2048e-6, 1e-12);
	assert_near(fast.total_s(), slow.total_s(), 0);
	assert_near(fetch_latency(0, 0, 1e9).total_s(), 0, 0);
}

static void fetch_latency__custom_model__uses_its_parameters(void **)
{
	LatencyModel m;
	m.request_bytes = 4096; // one request per page
	m.io_setup_s = 0;
	m.transfer_setup_s = 0;
	m.transfer_bytes_per_s = 4096e6;
	FetchLatency f = fetch_latency(3, 1, 4096e3, m); // 1 ms per page from storage, 1 us per transfer
	assert_int_equal(f.transfers, 4);
	assert_near(f.storage_s, 1e-3, 1e-15);
	assert_near(f.transfer_s, 4e-6, 1e-15);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fetch_latency__10_hits_5_misses_at_100MBps__hand_computed),
		cmocka_unit_test(fetch_latency__10_hits_5_misses_at_1GBps__hand_computed),
		cmocka_unit_test(fetch_latency__all_hits__transfers_only_whatever_the_bandwidth),
		cmocka_unit_test(fetch_latency__custom_model__uses_its_parameters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
