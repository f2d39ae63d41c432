// SPDX-License-Identifier: MIT
// CSV traces: round trip with quoted paths, the 7-column form, and errors that name the line and column.
#include "test_trace_util.hpp"

#include <cstring>

using namespace tt;

static void csv_round_trip__quoted_paths__same_records_and_paths(void **)
{
	std::string path = scratch("rt.csv");
	std::vector<llmcache_access> recs = {
		rec(5, 1, 259, 11, 0, 1),
		rec(6, 1, 259, 12, 7, 300, LLMCACHE_OP_WRITE),
		rec(7, 2, 0, 13, 1ULL << 40, 1, LLMCACHE_OP_MMAP_FAULT),
		rec(8, 2, 0, 14, 3, 2),
	};
	{
		auto w = open_writer(path, Format::csv, "ignored");
		w->name(259, 11, "/m/plain.bin");
		w->name(259, 12, "/m/with,comma \"and quotes\"");
		w->name(0, 14, "/m/two\nlines");
		for (auto &r : recs)
			w->write(r);
	}
	std::string text = read_file(path);
	assert_true(text.starts_with("time_ns,pid,dev,inode,first_block,nr_blocks,op,path\n"
				     "5,1,259,11,0,1,read,/m/plain.bin\n"
				     "6,1,259,12,7,300,write,\"/m/with,comma \"\"and quotes\"\"\"\n"
				     "7,2,0,13,1099511627776,1,mmap_fault,\n"));
	auto r = open_reader(path);
	assert_all_same(recs, read_all(*r));
	assert_int_equal(3, r->paths().size());
	assert_string_equal("/m/with,comma \"and quotes\"", r->paths().at({259, 12}).c_str());
	assert_string_equal("/m/two\nlines", r->paths().at({0, 14}).c_str());
}

static void csv_reader__seven_columns_and_crlf__accepted(void **)
{
	std::string path = scratch("seven.csv");
	write_file(path, "time_ns,pid,dev,inode,first_block,nr_blocks,op\r\n1,2,3,4,5,6,write\r\n\r\n9,2,3,4,5,1,read\r\n");
	auto r = open_reader(path, Format::csv);
	assert_all_same({rec(1, 2, 3, 4, 5, 6, LLMCACHE_OP_WRITE), rec(9, 2, 3, 4, 5, 1)}, read_all(*r));
	assert_true(r->paths().empty());
}

static void expect_csv_error(const char *name, const std::string &text, uint64_t line, std::initializer_list<const char *> parts)
{
	std::string path = scratch(name);
	write_file(path, text);
	expect_trace_error(
		[&] {
			auto r = open_reader(path, Format::csv);
			read_all(*r);
		},
		line, parts);
}

static const std::string header = "time_ns,pid,dev,inode,first_block,nr_blocks,op,path\n";

static void csv_reader__bad_inode__error_names_line_and_column(void **)
{
	expect_csv_error("inode.csv", header + "1,2,3,4,5,6,read,\n1,2,3,x4,5,6,read,/a\n", 3,
			 {"inode.csv:line 3:", "column 4 (inode)", "'x4'"});
}

static void csv_reader__bad_op__error_names_column_7(void **)
{
	expect_csv_error("op.csv", header + "1,2,3,4,5,6,fault,\n", 2, {"column 7 (op)", "read, write or mmap_fault"});
}

static void csv_reader__pid_too_large__error(void **)
{
	expect_csv_error("pid.csv", header + "1,4294967296,3,4,5,6,read,\n", 2, {"column 2 (pid)", "32-bit"});
}

static void csv_reader__too_few_columns__error(void **)
{
	expect_csv_error("few.csv", header + "1,2,3\n", 2, {"expected 8 columns", "found 3"});
}

static void csv_reader__zero_blocks__error(void **)
{
	expect_csv_error("zero.csv", header + "1,2,3,4,5,0,read,\n", 2, {"column 6 (nr_blocks)"});
}

static void csv_reader__unquoted_comma_in_path__error(void **)
{
	expect_csv_error("comma.csv", header + "1,2,3,4,5,1,read,/a,b\n", 2, {"column 8 (path)"});
}

static void csv_reader__wrong_header__error_line_1(void **)
{
	expect_csv_error("hdr.csv", "time,pid\n1,2\n", 1, {"expected the CSV header"});
}

static void csv_reader__huge_block_count__error_at_its_line(void **)
{
	std::string path = scratch("huge.csv");
	write_file(path, std::string(header) + "1,1,1,1,0,1,read,\n1,1,1,1,0,4000000000,read,/x\n");
	auto r = open_reader(path);
	llmcache_access a;
	assert_true(r->next(a));
	expect_trace_error([&] { r->next(a); }, 3, {"huge.csv:line 3:", "4000000000 blocks", "at most 1048576"});
}

// /dev/zero read as CSV: no newline ever. The reader stops at max_line instead of growing its buffer.
static void csv_reader__line_without_end__error_names_the_line(void **)
{
	std::string path = scratch("long.csv");
	write_file(path, std::string(header) + std::string(3 << 20, '7'));
	expect_trace_error([&] { read_all(*open_reader(path, Format::csv)); }, 2, {"long.csv:line 2:", "longer than 1048576"});
	expect_trace_error([&] { read_all(*open_reader("/dev/zero", Format::csv)); }, 1, {"line 1:", "longer than"});
}

// A quote that never closes: an error within PATH_MAX, not a path that eats the rest of the file.
static void csv_reader__unclosed_quote__error_at_the_row(void **)
{
	std::string text = std::string(header) + "1,1,1,1,0,1,read,\"/never closed\n";
	for (int i = 0; i < 1000; i++)
		text += "1,1,1,1,0,1,read,/x\n";
	std::string path = scratch("quote.csv");
	write_file(path, text);
	expect_trace_error([&] { read_all(*open_reader(path)); }, 2, {"quote.csv:line 2:", "longer than 4096"});
}

// The flags survive csv: native -> csv -> native kept no WRITES_UNSEEN before.
static void csv_round_trip__flags__kept_in_a_comment_line(void **)
{
	std::string path = scratch("flags.csv");
	{
		auto w = open_writer(path, Format::csv, "x");
		w->write(rec(1, 1, 1, 1, 0, 1));
		w->set_flags(LLMCACHE_TRACE_F_WRITES_UNSEEN | LLMCACHE_TRACE_F_MMAP_UNSEEN);
		w->close();
	}
	assert_true(read_file(path).ends_with("\n# flags: MMAP_UNSEEN,WRITES_UNSEEN\n"));
	auto r = open_reader(path);
	assert_all_same({rec(1, 1, 1, 1, 0, 1)}, read_all(*r));
	assert_int_equal(LLMCACHE_TRACE_F_WRITES_UNSEEN | LLMCACHE_TRACE_F_MMAP_UNSEEN, r->flags());
	write_file(path, std::string(header) + "# flags: SOMETHING\n");
	expect_trace_error([&] { read_all(*open_reader(path)); }, 2, {"unknown flag 'SOMETHING'"});
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(csv_round_trip__quoted_paths__same_records_and_paths),
		cmocka_unit_test(csv_reader__seven_columns_and_crlf__accepted),
		cmocka_unit_test(csv_reader__bad_inode__error_names_line_and_column),
		cmocka_unit_test(csv_reader__bad_op__error_names_column_7),
		cmocka_unit_test(csv_reader__pid_too_large__error),
		cmocka_unit_test(csv_reader__too_few_columns__error),
		cmocka_unit_test(csv_reader__zero_blocks__error),
		cmocka_unit_test(csv_reader__unquoted_comma_in_path__error),
		cmocka_unit_test(csv_reader__wrong_header__error_line_1),
		cmocka_unit_test(csv_reader__huge_block_count__error_at_its_line),
		cmocka_unit_test(csv_reader__line_without_end__error_names_the_line),
		cmocka_unit_test(csv_reader__unclosed_quote__error_at_the_row),
		cmocka_unit_test(csv_round_trip__flags__kept_in_a_comment_line),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
