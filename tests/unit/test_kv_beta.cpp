// SPDX-License-Identifier: MIT
// HillInfer's beta (Sec. 3.3, Eq. 1) steering the CPU:storage split of a session's KV: off, the CPU
// pool fills its budget; fixed, the CPU pool keeps beta / (1 + beta) of the KV within the budget;
// adaptive, beta follows f_c / f_s measured by the store. The device is a file in /var/tmp (the
// storage pool on a loop device is covered by test_kv_store).
#include "cmocka_cpp.hpp"

#include "kv/kv_store.hpp"

#include <unistd.h>

#include <cstdlib>
#include <vector>

using namespace llmcache::kv;

namespace {

std::string g_file;

int make_file(void **)
{
	char tmpl[] = "/var/tmp/llmcache-kv-beta-XXXXXX";
	const int fd = mkstemp(tmpl);
	if (fd < 0 || ftruncate(fd, 64 << 20) != 0)
		return -1;
	close(fd);
	g_file = tmpl;
	return 0;
}

int remove_file(void **)
{
	unlink(g_file.c_str());
	return 0;
}

KvShape small_shape()
{
	KvShape s;
	s.layers = 1;
	s.q_heads = 8;
	s.kv_heads = 2;
	s.head_dim = 16;
	s.dtype = CSD_FP16;
	s.max_context = 4096;
	return s;
}

KvOptions options(double beta, uint64_t budget = 64 << 20)
{
	KvOptions o;
	o.device = g_file;
	o.cpu_budget = budget;
	o.page_tokens = 16;
	o.sink_tokens = 4;
	o.recent_tokens = 16;
	o.beta = beta;
	return o;
}

std::unique_ptr<KvStore> filled(const KvOptions &o, uint32_t tokens)
{
	std::unique_ptr<KvStore> kv;
	std::string err;
	assert_int_equal(KvStore::open(small_shape(), o, kv, err), 0);
	std::vector<uint16_t> k(32), v(32);
	for (uint32_t t = 0; t < tokens; t++) {
		for (uint32_t d = 0; d < 32; d++)
			k[d] = (uint16_t)(0x3000 + (t * 37 + d * 11) % 0x800), v[d] = (uint16_t)(t + d);
		assert_int_equal(kv->append(0, k.data(), v.data()), 0);
	}
	return kv;
}

double cpu_share(const KvStore &kv)
{
	const KvStats s = kv.stats();
	return (double)s.cpu_pages / (double)(s.cpu_pages + s.spilled_pages);
}

void beta__off_fixed_one_and_quarter__cpu_pool_holds_that_share(void **)
{
	auto off = filled(options(0), 1024); // 64 pages, a budget far above them
	assert_int_equal(off->stats().spilled_pages, 0);
	assert_true(off->beta() == 0);

	auto half = filled(options(1.0), 1024);
	assert_true(cpu_share(*half) >= 0.40 && cpu_share(*half) <= 0.55);
	half.reset(); // the stores share the file's first bytes
	auto quarter = filled(options(0.25), 1024); // beta / (1 + beta) = 20%
	assert_true(cpu_share(*quarter) >= 0.15 && cpu_share(*quarter) <= 0.25);
	// Every token still reads back, wherever it went.
	std::vector<uint16_t> k(32), v(32);
	for (uint32_t t : {5u, 300u, 1000u}) {
		assert_int_equal(quarter->read(0, t, k.data(), v.data()), 0);
		assert_int_equal(v[0], (uint16_t)t);
	}
}

void beta__fixed_above_budget__budget_wins(void **)
{
	const uint64_t page = 8 * 32 + 2 * 16 * 32 * 2; // K bounds, K rows, V rows of a 16-token page
	auto kv = filled(options(9.0, 16 * page), 1024); // beta wants 90% of 64 pages; the budget is 16
	assert_true(kv->budget() == 16 * page);
	assert_true(kv->stats().cpu_bytes <= 16 * page);
}

void beta__adaptive__follows_measured_f_c_over_f_s(void **)
{
	const uint64_t page = 8 * 32 + 2 * 16 * 32 * 2;
	KvOptions o = options(-1, 24 * page); // adaptive; the budget forces the first spills
	auto kv = filled(o, 1024);
	assert_true(kv->beta() == 0); // nothing measured yet: the budget alone decides
	assert_int_equal(kv->budget(), 24 * page);
	std::vector<float> q(8 * 16, 0.5f);
	KvSelection sel;
	for (int i = 0; i < 4; i++)
		assert_int_equal(kv->select(0, q.data(), 64, sel), 0);
	const KvStats s = kv->stats();
	assert_true(s.beta() > 0);
	assert_true(kv->beta() == s.beta());
	const double total = (double)(s.cpu_pages + s.spilled_pages) * page, b = s.beta();
	assert_int_equal(kv->budget(), std::min<uint64_t>(24 * page, (uint64_t)(total * b / (1 + b))));
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(beta__off_fixed_one_and_quarter__cpu_pool_holds_that_share),
		cmocka_unit_test(beta__fixed_above_budget__budget_wins),
		cmocka_unit_test(beta__adaptive__follows_measured_f_c_over_f_s),
	};
	return cmocka_run_group_tests(tests, make_file, remove_file);
}
