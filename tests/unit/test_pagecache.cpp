// SPDX-License-Identifier: MIT
// The userspace page-cache mode's pieces (libllmcache/pagecache): /proc parsing, mlock pins on the
// daemon's own mapping, and the manager driving them from the policy core with synthetic accesses on
// real files (what llmcached --mode=bpf gets from the BPF feed).
#include "cmocka_cpp.hpp"

#include "pagecache/engine_code.hpp"
#include "pagecache/manager.hpp"
#include "pagecache/memcg.hpp"
#include "pagecache/pinned_file.hpp"
#include "pagecache/scan_drop.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

using namespace llmcache::pagecache;

namespace {

constexpr uint64_t BS = LLMCACHE_BLOCK_SIZE;

std::string dir; // this run's files

// A file of `blocks` blocks in a fresh directory, written and synced (clean pages, all resident).
std::string make_file(const char *name, uint64_t blocks)
{
	if (dir.empty()) {
		char tmpl[] = "/var/tmp/test_pagecache.XXXXXX";
		assert_non_null(mkdtemp(tmpl));
		dir = tmpl;
	}
	std::string path = dir + "/" + name;
	const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
	assert_true(fd >= 0);
	std::vector<char> buf(BS, 'x');
	for (uint64_t b = 0; b < blocks; b++)
		assert_int_equal(pwrite(fd, buf.data(), BS, off_t(b * BS)), BS);
	fsync(fd);
	close(fd);
	return path;
}

// A file of `blocks` blocks made by make_file(), mapped whole and shared by this process.
struct MappedFile {
	struct stat st;
	int fd;
	volatile char *p;
};
MappedFile map_file(const char *name, uint64_t blocks)
{
	MappedFile m;
	const std::string path = make_file(name, blocks);
	assert_int_equal(stat(path.c_str(), &m.st), 0);
	m.fd = open(path.c_str(), O_RDONLY);
	assert_true(m.fd >= 0);
	m.p = static_cast<volatile char *>(mmap(nullptr, blocks * BS, PROT_READ, MAP_SHARED, m.fd, 0));
	assert_true(m.p != MAP_FAILED);
	return m;
}

uint32_t encode(dev_t d) { return (minor(d) & 0xff) | (major(d) << 8) | ((minor(d) & ~0xffu) << 12); }

llmcache_access access_of(const std::string &path, uint64_t first, uint32_t n, uint64_t t_ns)
{
	struct stat st;
	stat(path.c_str(), &st);
	llmcache_access a{};
	a.time_ns = t_ns;
	a.pid = uint32_t(getpid());
	a.dev = encode(st.st_dev);
	a.inode = st.st_ino;
	a.first_block = first;
	a.nr_blocks = n;
	a.op = LLMCACHE_OP_READ;
	return a;
}

uint64_t resident(const std::string &path)
{
	std::unique_ptr<PinnedFile> f;
	std::string err;
	assert_int_equal(PinnedFile::open(path, f, err), 0);
	return f->resident(0, f->blocks());
}

void file_mappings__maps_text__every_file_mapping_with_offsets(void **)
{
	const char *maps = "7f0000000000-7f0000400000 r--s 00000000 fd:01 1234 /m/w.bin\n"
			   "7f0000400000-7f0000401000 rw-p 00000000 00:00 0 \n"
			   "7f1000000000-7f1000200000 r--s 00200000 fd:01 1234 /m/w.bin\n"
			   "7f2000000000-7f2000001000 r-xp 00001000 fd:02 77 /usr/bin/node\n";
	auto m = file_mappings(maps);
	assert_int_equal(m.size(), 3); // the anonymous mapping left out
	assert_int_equal(m[0].start, 0x7f0000000000ull);
	assert_int_equal(m[0].end, 0x7f0000400000ull);
	assert_int_equal(m[0].dev, makedev(0xfd, 1));
	assert_int_equal(m[0].inode, 1234);
	assert_int_equal(m[1].offset, 0x200000ull);
	assert_int_equal(m[2].dev, makedev(0xfd, 2));
	assert_int_equal(m[2].inode, 77);
	assert_int_equal(m[2].offset, 0x1000);
	assert_int_equal(file_mappings("garbage\n\n").size(), 0);
}

// The engine's code is locked where its page tables have it: pagemap of this process, which maps a
// file from its second block and touches two of its pages.
void present_blocks__own_pagemap__touched_blocks_only(void **)
{
	const std::string path = make_file("code.bin", 16);
	const int fd = open(path.c_str(), O_RDONLY);
	assert_true(fd >= 0);
	auto *p = static_cast<volatile char *>(mmap(nullptr, 8 * BS, PROT_READ, MAP_SHARED, fd, BS));
	assert_true(p != MAP_FAILED);
	madvise(const_cast<char *>(p), 8 * BS, MADV_RANDOM); // no fault-around
	(void)p[0];
	(void)p[5 * BS];
	const int pagemap = open("/proc/self/pagemap", O_RDONLY);
	assert_true(pagemap >= 0);
	const FileMapping m{uint64_t(uintptr_t(p)), uint64_t(uintptr_t(p)) + 8 * BS, BS, 0, 0};
	std::vector<Range> present;
	assert_int_equal(present_blocks(pagemap, m, present), 0);
	// Fault-around may map the neighbours of a touched page; the touched ones are there, nothing past
	// the mapping is, and block numbers are the file's.
	uint64_t total = 0;
	bool first = false, sixth = false;
	for (const Range &r : present) {
		assert_true(r.first >= 1 && r.first + r.count <= 9);
		first |= r.first <= 1 && 1 < r.first + r.count;
		sixth |= r.first <= 6 && 6 < r.first + r.count;
		total += r.count;
	}
	assert_true(first && sixth);
	assert_true(total <= 8);
	close(pagemap);
	munmap(const_cast<char *>(p), 8 * BS);
	close(fd);
}

// The daemon keeps an engine's mappings between two reads of its maps: a range advised through
// mappings read before it was unmapped is reported as gone (-ENOMEM), so that the daemon reads them
// again, not as a refusal.
void cold_blocks__own_mapping_then_unmapped__pages_out_then_enomem(void **)
{
	const auto [st, fd, p] = map_file("stream.bin", 32);
	for (uint64_t b = 0; b < 32; b++)
		(void)p[b * BS];
	std::vector<FileMapping> maps;
	assert_int_equal(read_file_mappings(getpid(), maps), 0);
	assert_true(maps_file(maps, st.st_dev, st.st_ino));
	assert_false(maps_file(maps, st.st_dev, st.st_ino + 1));
	const std::vector<Range> passed{{4, 8}};
	assert_int_equal(cold_blocks(getpid(), maps, st.st_dev, st.st_ino, passed), 8 * BS);
	assert_int_equal(cold_blocks(getpid(), maps, st.st_dev, st.st_ino + 1, passed), 0); // not mapped
	munmap(const_cast<char *>(p), 32 * BS);
	assert_int_equal(cold_blocks(getpid(), maps, st.st_dev, st.st_ino, passed), -ENOMEM);
	close(fd);
}

void union_of__overlapping_touching_and_apart__merged_sorted(void **)
{
	const auto u = union_of({{0, 4}, {10, 2}}, {{3, 3}, {12, 1}, {20, 1}});
	assert_int_equal(u.size(), 3);
	assert_int_equal(u[0].first, 0);
	assert_int_equal(u[0].count, 6);
	assert_int_equal(u[1].first, 10);
	assert_int_equal(u[1].count, 3);
	assert_int_equal(u[2].first, 20);
	assert_int_equal(union_of({}, {}).size(), 0);
}

void map_pmd_aligned__file_of_odd_size__aligned_whole_and_nothing_around(void **)
{
	const std::string path = make_file("aligned", 1000);
	const int fd = open(path.c_str(), O_RDONLY);
	assert_true(fd >= 0);
	const size_t size = 1000 * BS - 100;
	assert_int_equal(truncate(path.c_str(), off_t(size)), 0);
	auto *p = static_cast<const unsigned char *>(map_pmd_aligned(fd, size));
	assert_true(p != MAP_FAILED);
	assert_int_equal(uintptr_t(p) % (2u << 20), 0);
	std::vector<unsigned char> want(size);
	assert_int_equal(pread(fd, want.data(), size, 0), ssize_t(size));
	assert_memory_equal(p, want.data(), size);
	// Nothing of the reservation is left mapped after the file's last page.
	unsigned char vec;
	assert_int_equal(mincore(const_cast<unsigned char *>(p) + 1000 * BS, 4096, &vec), -1);
	assert_int_equal(errno, ENOMEM);
	munmap(const_cast<unsigned char *>(p), size);
	close(fd);
}

void memcg_dir__v1_v2_and_root__directory_or_none(void **)
{
	assert_string_equal(memcg_dir("12:memory:/bench\n0::/\n").c_str(), "/sys/fs/cgroup/memory/bench");
	assert_string_equal(memcg_dir("4:cpu,memory:/\n").c_str(), "/sys/fs/cgroup/memory");
	assert_true(memcg_dir("0::/user.slice/app\n").ends_with("/user.slice/app"));
	assert_true(memcg_dir("0::/\n3:cpu:/x\n").empty());
}

void mapped_file_bytes__own_mappings__present_pages_of_files_not_excluded(void **)
{
	const auto [st, fd, p] = map_file("lib.bin", 16);
	madvise(const_cast<char *>(p), 16 * BS, MADV_RANDOM); // no fault-around
	(void)p[0];
	(void)p[5 * BS];
	// Every other file this process maps (its binary, its libraries) excluded: what is left is the
	// touched pages of lib.bin, and the neighbours fault-around may have mapped with them.
	std::vector<FileMapping> maps;
	assert_int_equal(read_file_mappings(getpid(), maps), 0);
	FileIds others;
	for (const FileMapping &m : maps)
		if (m.dev != st.st_dev || m.inode != st.st_ino)
			others.push_back({m.dev, m.inode});
	const uint64_t lib = mapped_file_bytes(getpid(), maps, others);
	assert_true(lib >= 2 * BS && lib <= 16 * BS);
	others.push_back({st.st_dev, st.st_ino});
	assert_int_equal(mapped_file_bytes(getpid(), maps, others), 0);
	munmap(const_cast<char *>(p), 16 * BS);
	close(fd);
	assert_int_equal(mapped_file_bytes(0x7ffffff0, maps, {}), 0); // no such process
}

void pinned_file_apply__plan_then_smaller_plan__locks_resident_planned_blocks_only(void **)
{
	const std::string path = make_file("pins.bin", 64);
	std::unique_ptr<PinnedFile> f;
	std::string err;
	assert_int_equal(PinnedFile::open(path, f, err), 0);
	assert_int_equal(f->apply({{0, 16}, {32, 8}}, 100, err), 0);
	assert_int_equal(f->locked(), 24);
	assert_int_equal(f->locked_in(0, 32), 16);
	assert_int_equal(f->apply({{0, 16}, {32, 8}}, 100, err), 0); // idempotent
	assert_int_equal(f->locked(), 24);
	assert_int_equal(f->apply({{0, 32}}, 10, err), 0); // 8 released, at most 10 more
	assert_int_equal(f->locked(), 26);
	assert_int_equal(f->locked_in(32, 8), 0);
	// A block that is not resident is not locked (the daemon does not read files itself).
	f->release();
	const int fd = open(path.c_str(), O_RDONLY);
	posix_fadvise(fd, 60 * BS, 4 * BS, POSIX_FADV_DONTNEED);
	close(fd);
	assert_int_equal(f->apply({{56, 8}}, 100, err), 0);
	assert_int_equal(f->locked(), 4);
	assert_int_equal(f->resident(60, 4), 0);
}

void pinned_file_apply__kept_ranges__stay_locked_outside_the_plan(void **)
{
	const std::string path = make_file("keep.bin", 64);
	std::unique_ptr<PinnedFile> f;
	std::string err;
	assert_int_equal(PinnedFile::open(path, f, err), 0);
	assert_int_equal(f->apply({{0, 16}}, 100, err), 0);
	assert_int_equal(f->apply({{32, 8}}, 4, err, {{0, 16}}), 0); // kept, and 4 new ones
	assert_int_equal(f->locked_in(0, 16), 16);
	assert_int_equal(f->locked_in(32, 8), 4);
	assert_int_equal(f->apply({{32, 8}}, 100, err), 0); // no longer kept: only the plan
	assert_int_equal(f->locked(), 8);
	assert_int_equal(f->locked_in(0, 16), 0);
}

void pinned_file_lock__dontneed_from_another_descriptor__pages_stay(void **)
{
	const std::string path = make_file("stay.bin", 32);
	std::unique_ptr<PinnedFile> f;
	std::string err;
	assert_int_equal(PinnedFile::open(path, f, err), 0);
	assert_int_equal(f->apply({{0, 16}}, 100, err), 0);
	const int fd = open(path.c_str(), O_RDONLY);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	assert_int_equal(f->resident(0, 16), 16);
	assert_int_equal(f->resident(16, 16), 0);
	f->release();
	const int fd2 = open(path.c_str(), O_RDONLY);
	posix_fadvise(fd2, 0, 0, POSIX_FADV_DONTNEED);
	close(fd2);
	f.reset();
	assert_int_equal(resident(path), 0);
}

// A manager of path alone, with a pin budget of budget_blocks.
std::unique_ptr<Manager> manager_of(const std::string &path, uint64_t budget_blocks)
{
	Options o;
	o.pin_budget = budget_blocks * BS;
	o.manage = {path};
	std::unique_ptr<Manager> m;
	std::string err;
	assert_int_equal(Manager::open(o, m, err), 0);
	return m;
}

// Blocks [first, end) of path read in 32-block requests, a millisecond apart from *t on.
void read_blocks(Manager &m, const std::string &path, uint64_t first, uint64_t end, uint64_t *t)
{
	for (uint64_t b = first; b < end; b += 32)
		m.on_access(access_of(path, b, uint32_t(std::min<uint64_t>(32, end - b)), *t += 1'000'000));
}

void manager__loop_read_three_times__pinned_within_budget_and_loop_reported(void **)
{
	const std::string path = make_file("loop.bin", 256);
	std::unique_ptr<Manager> m = manager_of(path, 100);
	uint64_t t = 1'000'000'000;
	for (int it = 0; it < 3; it++)
		read_blocks(*m, path, 0, 256, &t);
	m->tick(t);
	assert_int_equal(m->pinned_blocks(), 100);
	const std::string s = m->status({"filemap", 0, 0, 0});
	assert_non_null(std::strstr(s.c_str(), "loop seq "));
	assert_non_null(std::strstr(s.c_str(), " n 256 "));
	assert_non_null(std::strstr(s.c_str(), " pinned 100 "));
	m->release();
	assert_int_equal(m->pinned_blocks(), 0);
}

// A loop whose head (blocks 64-255, a token embedding) its iterations pass over, read with read(): once
// those chunks have gone untouched for two periods, the core's plan leaves them out (core.h) and the
// budget of 300 blocks pins [0, 64) and [256, 492).
void manager__loop_head_passed_over__cold_chunks_not_pinned(void **)
{
	const std::string path = make_file("embedding.bin", 640);
	std::unique_ptr<Manager> m = manager_of(path, 300);
	uint64_t t = 1'000'000'000;
	for (int it = 0; it < 2; it++)
		read_blocks(*m, path, 0, 640, &t);
	for (int it = 0; it < 5; it++) {
		read_blocks(*m, path, 0, 1, &t);
		read_blocks(*m, path, 256, 640, &t);
	}
	m->tick(t);
	assert_int_equal(m->pinned_blocks(), 300);
	const int fd = open(path.c_str(), O_RDONLY);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); // what is not locked goes
	close(fd);
	std::unique_ptr<PinnedFile> f;
	std::string err;
	assert_int_equal(PinnedFile::open(path, f, err), 0);
	assert_int_equal(f->resident(0, 64), 64);
	assert_int_equal(f->resident(64, 192), 0);
	assert_int_equal(f->resident(256, 236), 236);
	assert_int_equal(f->resident(492, 148), 0);
	m->release();
}

// A manager of the 128-block file path that sees it accessed by op from start to end at 5 s, with a
// scan_idle of 500 ms: still fresh 100 ms later, it keeps every block; then it ticks at 600 ms.
std::unique_ptr<Manager> scan_then_idle(const std::string &path, uint8_t op)
{
	Options o;
	o.manage = {path};
	o.scan_idle_ns = 500'000'000;
	std::unique_ptr<Manager> m;
	std::string err;
	assert_int_equal(Manager::open(o, m, err), 0);
	const uint64_t t = 5'000'000'000;
	for (uint64_t b = 0; b < 128; b += 32) {
		llmcache_access a = access_of(path, b, 32, t);
		a.op = op;
		m->on_access(a);
	}
	m->tick(t + 100'000'000);
	assert_int_equal(resident(path), 128);
	m->tick(t + 600'000'000);
	return m;
}

void manager__scan_idle__dropped_after_idle_not_before(void **)
{
	const std::string path = make_file("config.bin", 128);
	const std::unique_ptr<Manager> m = scan_then_idle(path, LLMCACHE_OP_READ);
	assert_int_equal(resident(path), 0);
	assert_non_null(std::strstr(m->status({}).c_str(), " dropped_blocks 128 "));
}

// A file the app writes from start to end, then leaves: no scan to drop (its pages may be dirty).
void manager__written_scan__not_dropped(void **)
{
	const std::string path = make_file("scratch.tmp", 128);
	const std::unique_ptr<Manager> m = scan_then_idle(path, LLMCACHE_OP_WRITE);
	assert_int_equal(resident(path), 128);
	assert_non_null(std::strstr(m->status({}).c_str(), " dropped_blocks 0 "));
}

// A 256-block loop pinned whole, and a page of a mapped file (an engine's code) faulted again one period
// after its first fault: it takes one pin (llc_plan_reuse_room), shown as reuse_room. Once it stops
// coming back, two periods later the loop is pinned whole again.
void manager__page_faulted_again_within_two_periods__takes_a_pin_until_it_stops(void **)
{
	const std::string loop = make_file("weights.bin", 256), code = make_file("code.bin", 16);
	Options o;
	o.pin_budget = 256 * BS;
	o.manage = {loop, code};
	std::unique_ptr<Manager> m;
	std::string err;
	assert_int_equal(Manager::open(o, m, err), 0);
	uint64_t t = 1'000'000'000;
	auto fault = [&] {
		llmcache_access a = access_of(code, 3, 1, t += 1'000'000);
		a.op = LLMCACHE_OP_MMAP_FAULT;
		m->on_access(a);
	};
	auto token = [&] {
		read_blocks(*m, loop, 0, 256, &t);
		m->tick(t);
	};
	for (int it = 0; it < 3; it++)
		token();
	assert_int_equal(m->pinned_blocks(), 256);
	fault(); // its first access: nothing to measure
	token();
	assert_int_equal(m->pinned_blocks(), 256);
	fault();
	m->tick(t);
	assert_int_equal(m->pinned_blocks(), 255);
	assert_non_null(std::strstr(m->status({}).c_str(), " reuse_room 1 "));
	for (int it = 0; it < 3; it++)
		token();
	assert_int_equal(m->pinned_blocks(), 256);
	assert_non_null(std::strstr(m->status({}).c_str(), " reuse_room 0 "));
	fault(); // three periods after its last access
	token();
	assert_int_equal(m->pinned_blocks(), 256);
	m->release();
}

void manager__unmanaged_and_missing_files__ignored_or_refused(void **)
{
	Options o;
	o.manage = {"/nonexistent/weights.bin"};
	std::unique_ptr<Manager> m;
	std::string err;
	assert_true(Manager::open(o, m, err) < 0);
	assert_non_null(std::strstr(err.c_str(), "/nonexistent/weights.bin"));
	o.manage = {};
	assert_int_equal(Manager::open(o, m, err), 0);
	m->on_access(access_of(make_file("other.bin", 8), 0, 8, 1)); // never named: not managed
	m->tick(2);
	assert_int_equal(m->pinned_blocks(), 0);
}

} // namespace

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(file_mappings__maps_text__every_file_mapping_with_offsets),
		cmocka_unit_test(present_blocks__own_pagemap__touched_blocks_only),
		cmocka_unit_test(cold_blocks__own_mapping_then_unmapped__pages_out_then_enomem),
		cmocka_unit_test(union_of__overlapping_touching_and_apart__merged_sorted),
		cmocka_unit_test(map_pmd_aligned__file_of_odd_size__aligned_whole_and_nothing_around),
		cmocka_unit_test(memcg_dir__v1_v2_and_root__directory_or_none),
		cmocka_unit_test(mapped_file_bytes__own_mappings__present_pages_of_files_not_excluded),
		cmocka_unit_test(pinned_file_apply__plan_then_smaller_plan__locks_resident_planned_blocks_only),
		cmocka_unit_test(pinned_file_apply__kept_ranges__stay_locked_outside_the_plan),
		cmocka_unit_test(pinned_file_lock__dontneed_from_another_descriptor__pages_stay),
		cmocka_unit_test(manager__loop_read_three_times__pinned_within_budget_and_loop_reported),
		cmocka_unit_test(manager__loop_head_passed_over__cold_chunks_not_pinned),
		cmocka_unit_test(manager__scan_idle__dropped_after_idle_not_before),
		cmocka_unit_test(manager__written_scan__not_dropped),
		cmocka_unit_test(manager__page_faulted_again_within_two_periods__takes_a_pin_until_it_stops),
		cmocka_unit_test(manager__unmanaged_and_missing_files__ignored_or_refused),
	};
	const int r = cmocka_run_group_tests(tests, nullptr, nullptr);
	if (!dir.empty())
		std::system(("rm -rf " + dir).c_str());
	return r;
}
