// SPDX-License-Identifier: MIT
// make_policy() and policy_names(): every name builds its policy, bad names and capacities are refused,
// and every registered policy (llm included) respects its capacity and the offline optimum.
#include "mixed_trace.hpp"
#include "sim/policies.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cmocka_cpp.hpp" // last: cmocka's macros (fail, ...) clash with standard headers

using namespace llmcache::sim;

namespace {

const std::vector<std::string> expected_names = {"llm", "lru",  "fifo",  "clock",  "mru", "arc",
						 "2q",  "lirs", "lecar", "s3fifo", "sieve", "wtinylfu", "ubm", "belady"};

Request req(uint64_t block, uint32_t file) { return Request{request_key(file, block), block * 1000}; }

uint64_t rng_state = 7;
uint64_t rnd(uint64_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (rng_state >> 33) % n;
}


uint64_t hits(Policy &p, const std::vector<Request> &rs, size_t from = 0)
{
	p.prepare(rs);
	uint64_t h = 0;
	for (size_t i = 0; i < rs.size(); i++)
		h += p.access(rs[i]) && i >= from;
	return h;
}

} // namespace

static void policy_names__listed__llm_first_then_baselines(void **)
{
	assert_true(policy_names() == expected_names);
}

static void make_policy__every_name__builds_that_policy(void **)
{
	for (const auto &n : expected_names) {
		auto p = make_policy(n, 64);
		if (!p || p->name() != n)
			fail_msg("make_policy(\"%s\") built the wrong policy", n.c_str());
		assert_int_equal(p->capacity(), 64);
	}
}

static void make_policy__unknown_name__throws_listing_known_names(void **)
{
	try {
		make_policy("lfu", 64);
		fail_msg("make_policy accepted an unknown name");
	} catch (const std::invalid_argument &e) {
		std::string what = e.what();
		assert_true(what.find("'lfu'") != std::string::npos);
		for (const auto &n : expected_names)
			assert_true(what.find(n) != std::string::npos);
	}
}

static void make_policy__capacity_0__throws(void **)
{
	for (const auto &n : expected_names) {
		bool threw = false;
		try {
			make_policy(n, 0);
		} catch (const std::invalid_argument &) {
			threw = true;
		}
		if (!threw)
			fail_msg("%s accepted capacity 0", n.c_str());
	}
}

static void every_registered_policy__mixed_trace__within_capacity_and_optimum(void **)
{
	for (uint64_t c : {1, 8, 100}) {
		uint64_t len = std::max<uint64_t>(2, c);
		auto rs = mixed_trace(rnd, req, len, 40 * len + 200);
		size_t body = rs.size();
		for (uint32_t f = 0; f < 3; f++) // probe every block once: hits only on blocks cached before
			for (uint64_t b = 0; b < len; b++)
				rs.push_back(req(b, f));
		uint64_t opt = hits(*make_policy("belady", c), rs);
		for (const auto &n : expected_names) {
			uint64_t probe = hits(*make_policy(n, c), rs, body);
			uint64_t all = hits(*make_policy(n, c), rs);
			if (probe > c || all > opt)
				fail_msg("%s capacity %llu: %llu probe hits (max %llu), %llu hits (optimum %llu)", n.c_str(),
					 (unsigned long long)c, (unsigned long long)probe, (unsigned long long)c,
					 (unsigned long long)all, (unsigned long long)opt);
		}
	}
}

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(policy_names__listed__llm_first_then_baselines),
		cmocka_unit_test(make_policy__every_name__builds_that_policy),
		cmocka_unit_test(make_policy__unknown_name__throws_listing_known_names),
		cmocka_unit_test(make_policy__capacity_0__throws),
		cmocka_unit_test(every_registered_policy__mixed_trace__within_capacity_and_optimum),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
