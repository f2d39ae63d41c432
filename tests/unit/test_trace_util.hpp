// SPDX-License-Identifier: MIT
// Helpers shared by the trace tests: scratch files, record construction, reading a whole trace, and
// checking that a call throws a TraceError at a given line or byte offset.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "trace/trace.hpp"

#include "cmocka_cpp.hpp" // after the standard headers: cmocka defines macros such as fail()

namespace tt {

using namespace llmcache::trace;

// This test's scratch directory, under $TMPDIR, removed with its files when the test exits.
inline const std::string &scratch_dir()
{
	static const std::string *dir = [] {
		const char *t = std::getenv("TMPDIR");
		auto *made = new std::string(std::string(t && *t ? t : "/tmp") + "/llmcache-test-XXXXXX");
		if (!mkdtemp(made->data()))
			std::abort();
		std::atexit([] {
			std::error_code ignored;
			std::filesystem::remove_all(scratch_dir(), ignored);
		});
		return made;
	}();
	return *dir;
}

// A file in the scratch directory.
inline std::string scratch(const std::string &name) { return scratch_dir() + "/" + name; }

inline void write_file(const std::string &path, std::string_view content)
{
	std::ofstream f(path, std::ios::binary | std::ios::trunc);
	f.write(content.data(), std::streamsize(content.size()));
}

inline std::string read_file(const std::string &path)
{
	std::ifstream f(path, std::ios::binary);
	std::stringstream s;
	s << f.rdbuf();
	return s.str();
}

inline llmcache_access rec(uint64_t time, uint32_t pid, uint32_t dev, uint64_t inode, uint64_t first, uint32_t nr,
			   uint8_t op = LLMCACHE_OP_READ)
{
	llmcache_access a{};
	a.time_ns = time;
	a.pid = pid;
	a.dev = dev;
	a.inode = inode;
	a.first_block = first;
	a.nr_blocks = nr;
	a.op = op;
	return a;
}

inline std::vector<llmcache_access> read_all(Reader &r)
{
	std::vector<llmcache_access> v;
	llmcache_access a;
	while (r.next(a))
		v.push_back(a);
	return v;
}

inline void assert_same(const llmcache_access &want, const llmcache_access &got)
{
	assert_int_equal(want.time_ns, got.time_ns);
	assert_int_equal(want.pid, got.pid);
	assert_int_equal(want.dev, got.dev);
	assert_int_equal(want.inode, got.inode);
	assert_int_equal(want.first_block, got.first_block);
	assert_int_equal(want.nr_blocks, got.nr_blocks);
	assert_int_equal(want.op, got.op);
}

inline void assert_all_same(const std::vector<llmcache_access> &want, const std::vector<llmcache_access> &got)
{
	assert_int_equal(want.size(), got.size());
	for (size_t i = 0; i < want.size(); i++)
		assert_same(want[i], got[i]);
}

// fn() must throw a TraceError at `where` whose message holds every one of `parts`.
inline void expect_trace_error(const std::function<void()> &fn, uint64_t where, std::initializer_list<const char *> parts)
{
	try {
		fn();
	} catch (const TraceError &e) {
		std::string msg = e.what();
		if (e.where() != where)
			fail_msg("TraceError at %llu, expected %llu: %s", (unsigned long long)e.where(), (unsigned long long)where,
				 msg.c_str());
		for (const char *p : parts)
			if (msg.find(p) == std::string::npos)
				fail_msg("TraceError message lacks '%s': %s", p, msg.c_str());
		return;
	}
	fail_msg("no TraceError thrown");
}

} // namespace tt
