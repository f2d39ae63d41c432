// SPDX-License-Identifier: MIT
// llmtrace's pure helpers: device encoding, ring sizes, process ids, the message for a program the
// kernel refuses, mountinfo parsing and the path of a file from the dentry names the BPF program sends
// plus the mount table.
#include "cmocka_cpp.hpp"

#include "../../bpf/names.cpp"

using namespace llmtrace;

static void encode_dev__small_and_large_minor__new_encode_dev(void **)
{
	assert_int_equal(llmcache_encode_dev(254, 0), 65024);        // 254:0, as stat() shows it
	assert_int_equal(llmcache_encode_dev(8, 1), 0x801);
	assert_int_equal(llmcache_encode_dev(259, 0x12345), 0x45 | (259 << 8) | (0x12300 << 12));
}

static void parse_ring_size__powers_of_two__accepted_others_rejected(void **)
{
	assert_int_equal(parse_ring_size("4KiB"), 4096);
	assert_int_equal(parse_ring_size("16MiB"), 16 << 20);
	assert_true(parse_ring_size("2GiB") == uint64_t(1) << 31);
	// 4 GiB and more do not fit the ring map's 32-bit size: the kernel said EINVAL, shown as "is BPF
	// enabled?" (issue 19, item 17).
	for (const char *bad : {"5000", "2KiB", "0", "3MiB", "4GiB", "1TiB"}) {
		bool threw = false;
		try {
			parse_ring_size(bad);
		} catch (const std::invalid_argument &e) {
			threw = std::string(e.what()).find("power of two") != std::string::npos;
		}
		assert_true(threw);
	}
}

static void parse_pid__negative_zero_and_huge__rejected_by_what_was_written(void **)
{
	assert_int_equal(parse_pid("1"), 1);
	assert_int_equal(parse_pid("4194304"), 4194304);
	for (const char *bad : {"-5", "0", "4194305", "99999999999", "abc", "", "+5", "5 ", "0x10"}) {
		std::string msg;
		try {
			parse_pid(bad);
		} catch (const std::invalid_argument &e) {
			msg = e.what();
		}
		// -5 was read as 4294967291 (issue 19, item 17): the message quotes what was written.
		assert_true(msg.find("'" + std::string(bad) + "' is not a process id") != std::string::npos);
	}
}

// A failure to load the program, with BPF available, is never said as "BPF is missing": the tests skip
// on that, so a program the verifier rejects passed as a skip (issue 19, item 22).
static void load_failure__verifier_and_ring__named_not_blamed_on_bpf(void **)
{
	const std::string verifier = "libbpf: prog 'handle_read': BPF program load failed: Permission denied\n"
				     "libbpf: prog 'handle_read': -- BEGIN PROG LOAD LOG --\nR1 invalid mem access\n";
	std::string m = load_failure(-13, verifier, 16 << 20);
	assert_true(m.find("the kernel refused it") != std::string::npos);
	assert_true(m.find("prog 'handle_read': BPF program load failed") != std::string::npos);
	assert_true(m.find("report it") != std::string::npos);
	assert_true(m.find("not available") == std::string::npos && m.find("is BPF enabled") == std::string::npos);
	assert_true(m.find("needs root") == std::string::npos); // EACCES from the verifier is not a privilege
	assert_true(m.find("lockdown") != std::string::npos);
	m = load_failure(-12, "libbpf: map 'events': failed to create: Cannot allocate memory(-12)\n", uint64_t(1) << 31);
	assert_true(m.find("failed to create the BPF ring buffer of 2.0 GiB: Cannot allocate memory: lower --ring-size") !=
		    std::string::npos);
	m = load_failure(-22, "", 4096); // nothing said: still the program's failure, with the errno
	assert_true(m.find("the kernel refused it: Invalid argument") != std::string::npos);
}

static void parse_mountinfo_line__escaped_mount_point__decoded(void **)
{
	Mount m;
	assert_true(parse_mountinfo_line("36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw", m));
	assert_int_equal(m.dev, llmcache_encode_dev(98, 0));
	assert_string_equal(m.root.c_str(), "/mnt1");
	assert_string_equal(m.mountpoint.c_str(), "/mnt/with space");
	assert_false(parse_mountinfo_line("garbage", m));
	assert_false(parse_mountinfo_line("36 35 98-0 / /mnt rw - ext4 /dev/x rw", m));
}

static void mount_table_resolve__root_bind_and_unknown__absolute_paths(void **)
{
	uint32_t root = llmcache_encode_dev(254, 0), data = llmcache_encode_dev(8, 1), other = llmcache_encode_dev(9, 9);
	MountTable t({{root, "/", "/"}, {data, "/srv/models", "/models"}, {data, "/", "/data"}});
	assert_string_equal(t.resolve(root, "/usr/lib/libc.so.6").c_str(), "/usr/lib/libc.so.6");
	// A bind mount of a subdirectory shows the files under it; the first mount that shows one is used.
	assert_string_equal(t.resolve(data, "/srv/models/w.bin").c_str(), "/models/w.bin");
	assert_string_equal(t.resolve(data, "/etc/x").c_str(), "/data/etc/x");
	// /srv/models2 is not under /srv/models.
	assert_string_equal(t.resolve(data, "/srv/models2/w.bin").c_str(), "/data/srv/models2/w.bin");
	assert_string_equal(t.resolve(other, "/a/b").c_str(), "/a/b");
}

static void join_reversed__leaf_first__root_first_path(void **)
{
	assert_string_equal(join_reversed({"w.bin", "models", "srv"}, false).c_str(), "/srv/models/w.bin");
	assert_string_equal(join_reversed({"w.bin", "deep"}, true).c_str(), ".../deep/w.bin");
	assert_string_equal(join_reversed({}, false).c_str(), "/");
}

static void path_under__whole_components__only_real_subpaths(void **)
{
	assert_true(path_under("/models/w.bin", "/models"));
	assert_true(path_under("/models", "/models"));
	assert_true(path_under("/models/w.bin", "/"));
	assert_false(path_under("/models2/w.bin", "/models"));
	assert_false(path_under("/mod", "/models"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode_dev__small_and_large_minor__new_encode_dev),
		cmocka_unit_test(parse_ring_size__powers_of_two__accepted_others_rejected),
		cmocka_unit_test(parse_pid__negative_zero_and_huge__rejected_by_what_was_written),
		cmocka_unit_test(load_failure__verifier_and_ring__named_not_blamed_on_bpf),
		cmocka_unit_test(parse_mountinfo_line__escaped_mount_point__decoded),
		cmocka_unit_test(mount_table_resolve__root_bind_and_unknown__absolute_paths),
		cmocka_unit_test(join_reversed__leaf_first__root_first_path),
		cmocka_unit_test(path_under__whole_components__only_real_subpaths),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
