// SPDX-License-Identifier: MIT
// Kelle's AERP through llmcached and the C API (llmcache_kv_open_aerp, llmcache_kv_append_x,
// llmcache_kv_selection_heads): W_K and W_V travel in the session's shared memory, evicted tokens stop
// coming back, and every row a head keeps comes back as appended, recomputed ones bit for bit (fp32);
// and bad client input (a budget below sink + recent, no weights, x for a session that does not
// recompute, budget 0, d_model out of range) gets a clear error, not a crash.
#include "cmocka_cpp.hpp"
#include "kv_test_daemon.hpp"

#include "kv/llmcache_kv.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace {

int setup(void **) { return kv_test_daemon::start("aerp"); }
int teardown(void **) { return kv_test_daemon::stop(); }

// One layer, 2 query and 2 KV heads of dimension 4, fp32; d_model 4 (x is smaller than the K and V of
// both heads, 16 elements): tokens every head keeps are stored as x.
const llmcache_kv_shape shape{1, 2, 2, 4, LLMCACHE_KV_FP32, 64, 16, 4};
constexpr uint32_t DM = 4, DIMS = 8;

void aerp_daemon__append_x_select__kept_rows_as_appended(void **)
{
	std::mt19937 rng(3);
	std::uniform_real_distribution<float> U(-1, 1);
	std::vector<float> wk(DM * DIMS), wv(DM * DIMS);
	for (float &w : wk)
		w = U(rng);
	for (float &w : wv)
		w = U(rng);
	const llmcache_kv_aerp aerp{4, DM, wk.data(), wv.data()};
	llmcache_kv *kv;
	const int r = llmcache_kv_open_aerp((kv_test_daemon::dir + "/sock").c_str(), &shape, &aerp, &kv);
	if (r)
		fail_msg("open: %s", llmcache_kv_error(kv));
	const uint32_t T = 12;
	std::vector<float> K(T * DIMS), V(T * DIMS), X(T * DM);
	std::vector<float> q(2 * 4);
	for (float &f : q)
		f = U(rng);
	llmcache_kv_selection sel;
	for (uint32_t t = 0; t < T; t++) {
		for (uint32_t i = 0; i < DM; i++)
			X[t * DM + i] = U(rng);
		for (uint32_t j = 0; j < DIMS; j++) { // the documented arithmetic: fp32, index ascending
			float ak = 0, av = 0;
			for (uint32_t i = 0; i < DM; i++) {
				const float pk = X[t * DM + i] * wk[i * DIMS + j], pv = X[t * DM + i] * wv[i * DIMS + j];
				ak = ak + pk;
				av = av + pv;
			}
			K[t * DIMS + j] = ak;
			V[t * DIMS + j] = av;
		}
		assert_int_equal(llmcache_kv_append_x(kv, 0, &K[t * DIMS], &V[t * DIMS], &X[t * DM], 1), 0);
		assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 16, &sel), 0);
	}
	const uint8_t *heads = llmcache_kv_selection_heads(kv);
	assert_non_null(heads);
	// Each head keeps 4 of the 12 tokens; the union is at most 1 sink + 2 recent + 2 x 1 others.
	assert_in_range(sel.n, 4, 5);
	assert_int_equal(sel.positions[0], 0);
	assert_int_equal(sel.positions[sel.n - 1], T - 1);
	assert_int_equal(sel.positions[sel.n - 2], T - 2);
	const std::vector<float> zero(4, 0.0f);
	for (uint32_t j = 0; j < sel.n; j++) {
		const uint32_t t = sel.positions[j];
		assert_true(heads[j * 2] || heads[j * 2 + 1]);
		for (uint32_t h = 0; h < 2; h++) {
			const float *gk = (const float *)sel.k + j * DIMS + h * 4, *gv = (const float *)sel.v + j * DIMS + h * 4;
			const bool as_appended = !memcmp(gk, &K[t * DIMS + h * 4], 16) && !memcmp(gv, &V[t * DIMS + h * 4], 16);
			if (heads[j * 2 + h]) {
				assert_true(as_appended);
				continue;
			}
			// A head that dropped the token: zero rows if it was stored as K and V, whole recomputed ones
			// if it was stored as x.
			assert_true(as_appended || (!memcmp(gk, zero.data(), 16) && !memcmp(gv, zero.data(), 16)));
		}
	}
	// The daemon's listing shows the session's AERP counters.
	char listing[4096];
	assert_true(llmcache_kv_status((kv_test_daemon::dir + "/sock").c_str(), listing, sizeof(listing)) > 0);
	const char *at = strstr(listing, " aerp_tokens ");
	assert_non_null(at);
	assert_int_equal(std::atoi(at + strlen(" aerp_tokens ")), sel.n);
	assert_non_null(strstr(listing, " aerp_x_tokens "));
	llmcache_kv_close(kv);
}

void aerp_daemon__bad_input__clear_error(void **)
{
	const std::string sock = kv_test_daemon::dir + "/sock";
	std::vector<float> w(DM * DIMS, 0.5f);
	llmcache_kv *kv;
	auto refused = [&](const llmcache_kv_aerp &a, const char *says) {
		assert_int_equal(llmcache_kv_open_aerp(sock.c_str(), &shape, &a, &kv), -EINVAL);
		if (!strstr(llmcache_kv_error(kv), says))
			fail_msg("error '%s' does not say '%s'", llmcache_kv_error(kv), says);
		llmcache_kv_close(kv);
	};
	refused({2, DM, w.data(), w.data()}, "always kept, at least 3 tokens");
	refused({4, DM, w.data(), nullptr}, "needs W_K and W_V");
	refused({0, 0, nullptr, nullptr}, "budget 0");
	std::vector<float> big(((1u << 16) + 1) * DIMS);
	refused({4, (1u << 16) + 1, big.data(), big.data()}, "d_model");
	assert_int_equal(llmcache_kv_open_aerp(sock.c_str(), &shape, nullptr, &kv), -EINVAL);
	// x for a session that does not recompute, AERP or not.
	const llmcache_kv_aerp no_x{4, 0, nullptr, nullptr};
	assert_int_equal(llmcache_kv_open_aerp(sock.c_str(), &shape, &no_x, &kv), 0);
	std::vector<float> row(DIMS, 1.0f);
	assert_int_equal(llmcache_kv_append_x(kv, 0, row.data(), row.data(), row.data(), 1), -EINVAL);
	assert_non_null(strstr(llmcache_kv_error(kv), "does not recompute"));
	assert_int_equal(llmcache_kv_append(kv, 0, row.data(), row.data(), 1), 0);
	llmcache_kv_close(kv);
	assert_int_equal(llmcache_kv_open(sock.c_str(), &shape, &kv), 0);
	assert_null(llmcache_kv_selection_heads(kv));
	assert_int_equal(llmcache_kv_append_x(kv, 0, row.data(), row.data(), row.data(), 1), -EINVAL);
	llmcache_kv_close(kv);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(aerp_daemon__append_x_select__kept_rows_as_appended),
		cmocka_unit_test(aerp_daemon__bad_input__clear_error),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
