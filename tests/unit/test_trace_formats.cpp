// SPDX-License-Identifier: MIT
// Format names, format detection, the TraceError message shape, and conversions between formats.
#include "test_trace_util.hpp"

#include <cstring>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

using namespace tt;

static void parse_format__names_and_alias__round_trip(void **)
{
	for (Format f : {Format::native, Format::strace, Format::oracle_general, Format::csv})
		assert_true(parse_format(format_name(f)) == f);
	assert_true(parse_format("oracle") == Format::oracle_general);
	assert_string_equal("oracleGeneral", std::string(format_name(Format::oracle_general)).c_str());
	bool threw = false;
	try {
		parse_format("parquet");
	} catch (const std::invalid_argument &e) {
		threw = std::strstr(e.what(), "'parquet'") && std::strstr(e.what(), "native, strace");
	}
	assert_true(threw);
}

static void trace_error__message__path_where_what(void **)
{
	TraceError e("a.trace", "byte offset", 96, "bad");
	assert_string_equal("a.trace:byte offset 96: bad", e.what());
	assert_int_equal(96, e.where());
	assert_string_equal("a.trace", e.path().c_str());
}

static void detect_format__each_format__recognised(void **)
{
	std::string native = scratch("x.bin");
	open_writer(native, Format::native, "t")->close();
	assert_true(detect_format(native) == Format::native);

	std::string csv = scratch("x.txt");
	open_writer(csv, Format::csv, "t")->close();
	assert_true(detect_format(csv) == Format::csv);

	std::string st = scratch("x.log");
	write_file(st, "execve(\"/bin/true\", [\"true\"], 0x7ffd /* 1 var */) = 0\n");
	assert_true(detect_format(st) == Format::strace);
	write_file(st, "[pid  12] 10:00:00.000001 <... read resumed>\"x\", 1) = 1\n");
	assert_true(detect_format(st) == Format::strace);
	write_file(st, "4043  1795217204.504317 read(3</f>, \"\", 10) = 0\n");
	assert_true(detect_format(st) == Format::strace);

	std::string named = scratch("x.oracleGeneral");
	write_file(named, "");
	assert_true(detect_format(named) == Format::oracle_general);
	std::string sized = scratch("x.dat");
	std::string two(48, '\0'); // two records of object 0, the first pointing at the second
	two[16] = 1;
	std::memset(two.data() + 40, 0xff, 8); // -1: never again
	write_file(sized, two);
	assert_true(detect_format(sized) == Format::oracle_general);
}

static void detect_format__prose_or_odd_binary__trace_error(void **)
{
	std::string prose = scratch("prose.txt");
	write_file(prose, "hello world\nthis is not a trace\n");
	expect_trace_error([&] { detect_format(prose); }, 0, {"prose.txt:byte offset 0:", "cannot tell the trace format"});
	std::string odd = scratch("odd.dat");
	write_file(odd, std::string(25, '\1'));
	expect_trace_error([&] { detect_format(odd); }, 0, {"cannot tell"});
	std::string empty = scratch("empty.dat");
	write_file(empty, "");
	expect_trace_error([&] { detect_format(empty); }, 0, {"empty"});
}

static void open_reader__missing_file__system_error(void **)
{
	bool threw = false;
	try {
		open_reader(scratch("does-not-exist"), Format::native);
	} catch (const std::system_error &e) {
		threw = std::strstr(e.what(), "failed to open") != nullptr;
	}
	assert_true(threw);
}

static void open_writer__strace__invalid_argument(void **)
{
	bool threw = false;
	try {
		open_writer(scratch("w.strace"), Format::strace, "t");
	} catch (const std::invalid_argument &) {
		threw = true;
	}
	assert_true(threw);
}

static void convert__strace_to_native_to_csv__same_accesses_and_paths(void **)
{
	std::string st = scratch("conv.strace"), nat = scratch("conv.trace"), csv = scratch("conv.csv");
	write_file(st, "1 10:00:00.000001 read(3</w/a.bin>, \"x\"..., 8192) = 8192\n"
		       "1 10:00:00.000002 pwrite64(4</w/b.bin>, \"y\", 1, 4096) = 1\n"
		       "1 10:00:00.000003 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 3</w/a.bin>, 0) = 0x7f00\n");
	auto convert = [](const std::string &in, const std::string &out, Format f) {
		auto r = open_reader(in);
		auto w = open_writer(out, f, "test_trace_formats");
		llmcache_access a;
		std::vector<llmcache_access> v;
		while (r->next(a)) {
			w->name(a.dev, a.inode, r->paths().at({a.dev, a.inode}));
			w->write(a);
			v.push_back(a);
		}
		w->set_flags(r->flags());
		w->close();
		return v;
	};
	auto from_strace = convert(st, nat, Format::native);
	assert_int_equal(2, from_strace.size());
	auto from_native = convert(nat, csv, Format::csv);
	assert_all_same(from_strace, from_native);
	auto r = open_reader(csv);
	assert_all_same(from_strace, read_all(*r));
	assert_string_equal("/w/b.bin", r->paths().at({0, path_inode("/w/b.bin")}).c_str());
	assert_int_equal(LLMCACHE_TRACE_F_MMAP_UNSEEN, open_reader(nat)->flags());
}

// Runs fn with fd (0 or 1) redirected to path.
static void with_fd(int fd, const std::string &path, const std::function<void()> &fn)
{
	int saved = dup(fd);
	int f = open(path.c_str(), fd == 0 ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(saved >= 0 && f >= 0);
	dup2(f, fd);
	close(f);
	fn();
	dup2(saved, fd);
	close(saved);
}

static void stdin_stdout__dash__detected_read_and_written(void **)
{
	std::string nat = scratch("stdin.trace"), oracle = scratch("stdout.oracleGeneral");
	std::vector<llmcache_access> recs = {rec(1, 2, 3, 4, 5, 2), rec(2, 2, 3, 4, 5, 1)};
	{
		auto w = open_writer(nat, Format::native, "t");
		w->name(3, 4, "/w/x");
		for (auto &r : recs)
			w->write(r);
	}
	with_fd(0, nat, [&] {
		auto r = open_reader("-"); // detected from the bytes it peeked, which it then reads
		assert_all_same(recs, read_all(*r));
		assert_string_equal("/w/x", r->paths().at({3, 4}).c_str());
	});
	with_fd(1, oracle, [&] {
		auto w = open_writer("-", Format::oracle_general, "t");
		for (auto &r : recs)
			w->write(r);
		w->close();
	});
	std::string b = read_file(oracle);
	assert_int_equal(3 * 24, b.size());
	int64_t next[3];
	for (int i = 0; i < 3; i++)
		std::memcpy(&next[i], b.data() + i * 24 + 16, 8);
	assert_int_equal(2, next[0]); // block 5 again at vtime 2
	assert_int_equal(-1, next[1]);
	assert_int_equal(-1, next[2]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_format__names_and_alias__round_trip),
		cmocka_unit_test(trace_error__message__path_where_what),
		cmocka_unit_test(detect_format__each_format__recognised),
		cmocka_unit_test(detect_format__prose_or_odd_binary__trace_error),
		cmocka_unit_test(open_reader__missing_file__system_error),
		cmocka_unit_test(open_writer__strace__invalid_argument),
		cmocka_unit_test(convert__strace_to_native_to_csv__same_accesses_and_paths),
		cmocka_unit_test(stdin_stdout__dash__detected_read_and_written),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
