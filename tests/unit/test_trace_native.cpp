// SPDX-License-Identifier: MIT
// Native binary trace: round trips with PATH records and multi-block accesses, header patching, and the
// errors for a wrong magic, version, record size, op and a truncated record.
#include "test_trace_util.hpp"

#include <cstddef>
#include <cstring>
#include <dirent.h>
#include <stdexcept>
#include <sys/stat.h>

using namespace tt;

static const std::vector<llmcache_access> sample = {
	rec(1000, 7, 259, 11, 0, 1),
	rec(2000, 7, 259, 11, 1, 16),
	rec(3000, 8, 259, 12, 5, 3, LLMCACHE_OP_WRITE),
	rec(4000, 8, 0, 99, 1ULL << 35, 2, LLMCACHE_OP_MMAP_FAULT),
};

static std::string write_sample(const char *name)
{
	std::string path = scratch(name);
	auto w = open_writer(path, Format::native, "test_trace_native 1.0");
	w->name(259, 11, "/models/weights.bin");
	w->write(sample[0]);
	w->name(259, 11, "/models/weights.bin"); // already named: no second PATH record
	w->write(sample[1]);
	w->name(259, 12, "/models/a path, with \"quotes\" of 21+");
	w->write(sample[2]);
	w->write(sample[3]);
	w->close();
	return path;
}

static void native_round_trip__paths_and_multi_block__same_records(void **)
{
	std::string path = write_sample("rt.trace");
	auto r = open_reader(path, Format::native);
	assert_all_same(sample, read_all(*r));
	assert_string_equal("test_trace_native 1.0", r->producer().c_str());
	assert_int_equal(2, r->paths().size());
	assert_string_equal("/models/weights.bin", r->paths().at({259, 11}).c_str());
	assert_string_equal("/models/a path, with \"quotes\" of 21+", r->paths().at({259, 12}).c_str());
	assert_int_equal(0, r->flags());
	assert_true(r->notes().empty());
}

static void native_writer__name_twice__one_path_record_padded_to_8(void **)
{
	std::string bytes = read_file(write_sample("size.trace"));
	// header + 4 accesses + PATH(19 bytes -> 24) + PATH(36 bytes -> 40)
	assert_int_equal(96 + 4 * 40 + (40 + 24) + (40 + 40), bytes.size());
	llmcache_trace_header h;
	std::memcpy(&h, bytes.data(), sizeof h);
	assert_memory_equal("LLMTRACE", h.magic, 8);
	assert_int_equal(LLMCACHE_TRACE_VERSION, h.version);
	assert_int_equal(96, h.header_size);
	assert_int_equal(40, h.record_size);
	assert_int_equal(1000, h.start_time_ns); // patched at close()
	llmcache_access p;
	std::memcpy(&p, bytes.data() + 96, sizeof p);
	assert_int_equal(LLMCACHE_OP_PATH, p.op);
	assert_int_equal(19, p.nr_blocks);
	assert_int_equal(259, p.dev);
	assert_int_equal(11, p.inode);
	assert_memory_equal("/models/weights.bin\0\0\0\0\0", bytes.data() + 136, 24);
}

static void native_writer__set_flags_after_records__header_patched(void **)
{
	std::string path = scratch("flags.trace");
	{
		auto w = open_writer(path, Format::native, "x");
		w->write(sample[0]);
		w->set_flags(LLMCACHE_TRACE_F_MMAP_UNSEEN);
	} // the destructor closes
	auto r = open_reader(path);
	assert_int_equal(1, read_all(*r).size());
	assert_int_equal(LLMCACHE_TRACE_F_MMAP_UNSEEN, r->flags());
	assert_int_equal(1, r->notes().size());
	assert_non_null(strstr(r->notes()[0].c_str(), "mmapped"));
}

static void native_reader__writes_unseen_flag__noted_with_the_option_to_record_them(void **)
{
	std::string path = scratch("writes-unseen.trace");
	{
		auto w = open_writer(path, Format::native, "x");
		w->write(sample[0]);
		w->set_flags(LLMCACHE_TRACE_F_MMAP_UNSEEN | LLMCACHE_TRACE_F_WRITES_UNSEEN);
	}
	auto r = open_reader(path);
	read_all(*r);
	assert_int_equal(LLMCACHE_TRACE_F_MMAP_UNSEEN | LLMCACHE_TRACE_F_WRITES_UNSEEN, r->flags());
	assert_int_equal(2, r->notes().size());
	assert_non_null(strstr(r->notes()[0].c_str(), "mmapped"));
	assert_non_null(strstr(r->notes()[1].c_str(), "--writes"));
}

static void native_writer__path_op_record__rejected(void **)
{
	auto w = open_writer(scratch("bad.trace"), Format::native, "x");
	bool threw = false;
	try {
		w->write(rec(0, 0, 0, 1, 0, 4, LLMCACHE_OP_PATH));
	} catch (const std::invalid_argument &) {
		threw = true;
	}
	assert_true(threw);
}

static std::string sample_bytes()
{
	static std::string b = read_file(write_sample("base.trace"));
	return b;
}

static void expect_error(const char *name, const std::string &bytes, uint64_t where, std::initializer_list<const char *> parts)
{
	std::string path = scratch(name);
	write_file(path, bytes);
	expect_trace_error(
		[&] {
			auto r = open_reader(path, Format::native);
			read_all(*r);
		},
		where, parts);
}

static void native_reader__bad_magic__error_at_byte_0(void **)
{
	std::string b = sample_bytes();
	b[0] = 'X';
	expect_error("magic.trace", b, 0, {"magic.trace:byte offset 0:", "LLMTRACE"});
}

static void native_reader__wrong_version__error_at_version_field(void **)
{
	std::string b = sample_bytes();
	uint32_t v = 7;
	std::memcpy(&b[offsetof(llmcache_trace_header, version)], &v, 4);
	expect_error("version.trace", b, 8, {"version 7", "reads version 1"});
}

static void native_reader__wrong_record_size__error_at_field(void **)
{
	std::string b = sample_bytes();
	uint32_t v = 48;
	std::memcpy(&b[offsetof(llmcache_trace_header, record_size)], &v, 4);
	expect_error("recsize.trace", b, 16, {"record_size 48", "expected 40"});
}

static void native_reader__wrong_header_size__error_at_field(void **)
{
	std::string b = sample_bytes();
	uint32_t v = 20;
	std::memcpy(&b[offsetof(llmcache_trace_header, header_size)], &v, 4);
	expect_error("hdrsize.trace", b, 12, {"header_size 20"});
}

static void native_reader__truncated_record__error_at_its_byte_offset(void **)
{
	std::string b = sample_bytes();
	b.resize(b.size() - 23); // the last access loses 23 of its 40 bytes
	std::string path = scratch("cut.trace");
	write_file(path, b);
	auto r = open_reader(path, Format::native);
	llmcache_access a;
	for (int i = 0; i < 3; i++)
		assert_true(r->next(a));
	expect_trace_error([&] { r->next(a); }, b.size() - 17, {"truncated record", "17 bytes into a 40-byte record"});
}

static void native_reader__truncated_path__error(void **)
{
	std::string b = sample_bytes().substr(0, 96 + 40 + 10);
	expect_error("cutpath.trace", b, 136, {"truncated path record"});
}

static void native_reader__unknown_op__error_at_record(void **)
{
	std::string b = sample_bytes();
	size_t off = 96 + 40 + 24; // first access after the first PATH record
	b[off + offsetof(llmcache_access, op)] = 9;
	expect_error("op.trace", b, off, {"unknown op 9"});
}

static void native_reader__header_only__no_records(void **)
{
	std::string path = scratch("empty.trace");
	open_writer(path, Format::native, "nothing")->close();
	auto r = open_reader(path);
	assert_true(read_all(*r).empty());
	assert_string_equal("nothing", r->producer().c_str());
}

// The 136-byte trace of issue 19: one access that claims 2^32 - 1 blocks made llmreplay and llmtrace
// stat allocate until std::bad_alloc. It is refused at its byte offset.
static void native_reader__record_claims_4g_blocks__error_at_its_offset(void **)
{
	std::string b = sample_bytes().substr(0, 96);
	llmcache_access a = rec(1, 1, 1, 5, 0, 0xFFFFFFFFu);
	b.append(reinterpret_cast<const char *>(&a), sizeof a);
	expect_error("claims.trace", b, 96, {"claims.trace:byte offset 96:", "4294967295 blocks", "at most 1048576"});
}

// first_block 2^64 - 2 with 10 blocks wrapped: stat counted a footprint of 0, the writers wrote wrapped
// ids and offsets. The last block must be below 2^51 (2^63 bytes).
static void native_reader__blocks_wrap_past_2_64__error_at_its_offset(void **)
{
	std::string b = sample_bytes().substr(0, 96);
	for (uint64_t first : {~uint64_t(0) - 1, uint64_t(1) << 51}) {
		llmcache_access a = rec(1, 1, 1, 5, first, 10);
		std::string bad = b + std::string(reinterpret_cast<const char *>(&a), sizeof a);
		expect_error("wrap.trace", bad, 96, {"wrap.trace:byte offset 96:", "below 2^51"});
	}
	llmcache_access ok = rec(1, 1, 1, 5, (uint64_t(1) << 51) - 10, 10); // the last block there is fine
	std::string path = scratch("edge.trace");
	write_file(path, b + std::string(reinterpret_cast<const char *>(&ok), sizeof ok));
	auto r = open_reader(path);
	assert_all_same({ok}, read_all(*r));
}

// Writers refuse what readers would refuse, so that no converted trace holds a wrapped offset.
static void native_writer__record_past_2_51__invalid_argument(void **)
{
	auto w = open_writer(scratch("wrapw.trace"), Format::native, "x");
	bool thrown = false;
	try {
		w->write(rec(1, 1, 1, 5, ~uint64_t(0) - 1, 10));
	} catch (const std::invalid_argument &e) {
		thrown = std::string(e.what()).find("below 2^51") != std::string::npos;
	}
	assert_true(thrown);
}

// The output appears only at close(), by rename: before it the old file is intact, and an exception
// that drops the writer leaves the old file and no temporary file behind.
static void native_writer__temporary_file_renamed_at_close__failure_leaves_old_file(void **)
{
	std::string dir = scratch("atomic");
	mkdir(dir.c_str(), 0755);
	std::string path = dir + "/out.trace";
	write_file(path, "old contents");
	try {
		auto w = open_writer(path, Format::native, "x");
		w->write(sample[0]);
		assert_string_equal("old contents", read_file(path).c_str());
		throw std::runtime_error("the input was malformed");
	} catch (const std::runtime_error &) {
	}
	assert_string_equal("old contents", read_file(path).c_str());
	{
		auto w = open_writer(path, Format::native, "x");
		w->write(sample[0]);
		w->close();
	}
	auto r = open_reader(path);
	assert_all_same({sample[0]}, read_all(*r));
	int entries = 0;
	if (DIR *d = opendir(dir.c_str())) {
		while (dirent *e = readdir(d))
			entries += e->d_name[0] != '.';
		closedir(d);
	}
	assert_int_equal(1, entries); // no temporary file left over
}

// The renamed file has the mode the replaced file had, or 0666 less the umask for a new one (mkostemp
// makes 0600).
static void native_writer__temporary_file__mode_of_old_file_or_umask(void **)
{
	std::string path = scratch("mode.trace");
	mode_t old = umask(027);
	open_writer(path, Format::native, "x")->close();
	umask(old);
	struct stat st;
	assert_int_equal(0, stat(path.c_str(), &st));
	assert_int_equal(0640, st.st_mode & 07777);
	chmod(path.c_str(), 0604);
	open_writer(path, Format::native, "x")->close();
	assert_int_equal(0, stat(path.c_str(), &st));
	assert_int_equal(0604, st.st_mode & 07777);
}

// Writing to a device writes in place instead of renaming over the device node.
static void native_writer__to_dev_null__device_kept(void **)
{
	auto w = open_writer("/dev/null", Format::native, "x");
	w->write(sample[0]);
	w->close();
	struct stat st;
	assert_int_equal(0, stat("/dev/null", &st));
	assert_true(S_ISCHR(st.st_mode));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(native_round_trip__paths_and_multi_block__same_records),
		cmocka_unit_test(native_writer__name_twice__one_path_record_padded_to_8),
		cmocka_unit_test(native_writer__set_flags_after_records__header_patched),
		cmocka_unit_test(native_reader__writes_unseen_flag__noted_with_the_option_to_record_them),
		cmocka_unit_test(native_writer__path_op_record__rejected),
		cmocka_unit_test(native_reader__bad_magic__error_at_byte_0),
		cmocka_unit_test(native_reader__wrong_version__error_at_version_field),
		cmocka_unit_test(native_reader__wrong_record_size__error_at_field),
		cmocka_unit_test(native_reader__wrong_header_size__error_at_field),
		cmocka_unit_test(native_reader__truncated_record__error_at_its_byte_offset),
		cmocka_unit_test(native_reader__truncated_path__error),
		cmocka_unit_test(native_reader__unknown_op__error_at_record),
		cmocka_unit_test(native_reader__header_only__no_records),
		cmocka_unit_test(native_reader__record_claims_4g_blocks__error_at_its_offset),
		cmocka_unit_test(native_reader__blocks_wrap_past_2_64__error_at_its_offset),
		cmocka_unit_test(native_writer__record_past_2_51__invalid_argument),
		cmocka_unit_test(native_writer__temporary_file_renamed_at_close__failure_leaves_old_file),
		cmocka_unit_test(native_writer__to_dev_null__device_kept),
		cmocka_unit_test(native_writer__temporary_file__mode_of_old_file_or_umask),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
