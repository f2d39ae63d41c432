// SPDX-License-Identifier: MIT
// libCacheSim oracleGeneral: one 24-byte record per block, obj_id = (file_number << 40) | block, and
// next_access_vtime computed by the writer's backward pass (also across its 1 MiB chunks).
#include "test_trace_util.hpp"

#include <cstring>
#include <sys/stat.h>

using namespace tt;

#pragma pack(push, 1)
struct Raw {
	uint32_t clock_time;
	uint64_t obj_id;
	uint32_t obj_size;
	int64_t next;
};
#pragma pack(pop)

static std::vector<Raw> raw_records(const std::string &path)
{
	std::string b = read_file(path);
	assert_int_equal(0, b.size() % 24);
	std::vector<Raw> v(b.size() / 24);
	std::memcpy(v.data(), b.data(), b.size());
	return v;
}

static void oracle_writer__hand_made_sequence__next_access_vtime(void **)
{
	std::string path = scratch("seq.oracleGeneral");
	{
		auto w = open_writer(path, Format::oracle_general, "x");
		w->name(1, 500, "/a"); // ignored
		w->write(rec(1'000'000'000, 1, 1, 500, 0, 2)); // A0 A1 -> vtime 0, 1
		w->write(rec(2'500'000'000, 1, 1, 600, 0, 1)); // B0 -> 2
		w->write(rec(3'000'000'000, 1, 1, 500, 0, 1)); // A0 -> 3
		w->write(rec(4'000'000'000, 1, 1, 500, 1, 1)); // A1 -> 4
		w->write(rec(5'000'000'000, 1, 1, 600, 0, 1)); // B0 -> 5
		w->close();
	}
	auto v = raw_records(path);
	const uint64_t A = 0, B = 1ULL << 40;
	const uint64_t ids[] = {A, A + 1, B, A, A + 1, B};
	const int64_t next[] = {3, 4, 5, -1, -1, -1};
	const uint32_t clock[] = {1, 1, 2, 3, 4, 5};
	assert_int_equal(6, v.size());
	for (int i = 0; i < 6; i++) {
		assert_int_equal(ids[i], v[i].obj_id);
		assert_int_equal(next[i], v[i].next);
		assert_int_equal(clock[i], v[i].clock_time);
		assert_int_equal(4096, v[i].obj_size);
	}
	auto r = open_reader(path); // detected by the name
	assert_all_same({rec(1'000'000'000, 0, 0, 0, 0, 1), rec(1'000'000'000, 0, 0, 0, 1, 1), rec(2'000'000'000, 0, 0, 1, 0, 1),
			 rec(3'000'000'000, 0, 0, 0, 0, 1), rec(4'000'000'000, 0, 0, 0, 1, 1), rec(5'000'000'000, 0, 0, 1, 0, 1)},
			read_all(*r));
}

static void oracle_writer__loop_longer_than_a_chunk__next_is_one_period_later(void **)
{
	// 100000 records (more than two 43690-record chunks) looping over 1000 blocks of one file.
	std::string path = scratch("loop.oracleGeneral");
	const uint64_t n = 100000, period = 1000;
	{
		auto w = open_writer(path, Format::oracle_general, "x");
		for (uint64_t i = 0; i < n; i += 10)
			w->write(rec(i, 1, 0, 42, i % period, 10));
	}
	auto v = raw_records(path);
	assert_int_equal(n, v.size());
	for (uint64_t i = 0; i < n; i++) {
		assert_int_equal(i % period, v[i].obj_id);
		assert_int_equal(i + period < n ? int64_t(i + period) : -1, v[i].next);
	}
}

static void oracle_reader__length_not_multiple_of_24__error_at_partial_record(void **)
{
	std::string path = scratch("cut.oracleGeneral");
	write_file(path, std::string(24 * 3 + 5, '\0'));
	expect_trace_error([&] { open_reader(path, Format::oracle_general); }, 72, {"cut.oracleGeneral:byte offset 72:", "24-byte"});
}

static void oracle_reader__block_accesses_hint__one_per_record_bounded_by_limit(void **)
{
	std::string path = scratch("hint.bin");
	Raw r[3] = {{1, 0, 4096, -1}, {1, 1, 4096, -1}, {1, 2, 4096, -1}};
	write_file(path, std::string(reinterpret_cast<const char *>(r), sizeof r));
	assert_int_equal(open_reader(path, Format::oracle_general)->block_accesses_hint(), 3);
	assert_int_equal(limit_blocks(open_reader(path, Format::oracle_general), path, 2, "test")->block_accesses_hint(), 2);
	write_file(path, "time_ns,pid,dev,inode,first_block,nr_blocks,op,path\n");
	assert_int_equal(open_reader(path, Format::csv)->block_accesses_hint(), 0);
}

static void oracle_reader__large_obj_size__blocks_rounded_up(void **)
{
	std::string path = scratch("size.bin");
	Raw r{7, (3ULL << 40) | 9, 10000, -1};
	write_file(path, std::string(reinterpret_cast<const char *>(&r), sizeof r));
	auto rd = open_reader(path, Format::oracle_general);
	assert_all_same({rec(7'000'000'000, 0, 0, 3, 9, 3)}, read_all(*rd));
}

// 2,400 random bytes were detected as oracleGeneral and replayed into std::bad_alloc. next_access_vtime
// must be -1 or a later record of the file: random bytes fail detection and, forced, the first record.
static void oracle_reader__next_access_outside_the_file__error_at_the_record(void **)
{
	std::string path = scratch("next.bin");
	Raw r[3] = {{1, 0, 4096, 2}, {1, 1, 4096, -1}, {1, 0, 4096, 4}}; // record 2 points past the 3 (counted from 0 or 1)
	write_file(path, std::string(reinterpret_cast<const char *>(r), sizeof r));
	auto rd = open_reader(path, Format::oracle_general);
	llmcache_access a;
	assert_true(rd->next(a));
	assert_true(rd->next(a));
	expect_trace_error([&] { rd->next(a); }, 48, {"next.bin:byte offset 48:", "record 2", "record 4"});

	std::string rnd(2400, '\0');
	uint64_t x = 88172645463325252ULL;
	for (char &c : rnd) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		c = char(x);
	}
	std::string rp = scratch("random.dat");
	write_file(rp, rnd);
	expect_trace_error([&] { detect_format(rp); }, 0, {"cannot tell the trace format"});
	expect_trace_error([&] { read_all(*open_reader(rp, Format::oracle_general)); }, 0, {"byte offset 0:", "not a later record"});
}

// The largest object (obj_size 2^32 - 1) is exactly the most blocks a record may claim.
static void oracle_reader__largest_object__within_the_record_limit(void **)
{
	Raw ok{1, 0, 0xFFFFFFFFu, -1};
	std::string okp = scratch("okobj.bin");
	write_file(okp, std::string(reinterpret_cast<const char *>(&ok), sizeof ok));
	assert_int_equal(1048576, read_all(*open_reader(okp, Format::oracle_general))[0].nr_blocks);
}

// Written to a device (not seekable, and never to be renamed over), the records go through a scratch file.
static void oracle_writer__to_dev_null__device_kept(void **)
{
	auto w = open_writer("/dev/null", Format::oracle_general, "x");
	w->write(rec(1, 1, 0, 42, 0, 3));
	w->close();
	struct stat st;
	assert_int_equal(0, stat("/dev/null", &st));
	assert_true(S_ISCHR(st.st_mode));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(oracle_writer__hand_made_sequence__next_access_vtime),
		cmocka_unit_test(oracle_writer__loop_longer_than_a_chunk__next_is_one_period_later),
		cmocka_unit_test(oracle_reader__length_not_multiple_of_24__error_at_partial_record),
		cmocka_unit_test(oracle_reader__large_obj_size__blocks_rounded_up),
		cmocka_unit_test(oracle_reader__next_access_outside_the_file__error_at_the_record),
		cmocka_unit_test(oracle_reader__largest_object__within_the_record_limit),
		cmocka_unit_test(oracle_writer__to_dev_null__device_kept),
		cmocka_unit_test(oracle_reader__block_accesses_hint__one_per_record_bounded_by_limit),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
