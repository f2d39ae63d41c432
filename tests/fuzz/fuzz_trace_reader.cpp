// SPDX-License-Identifier: MIT
// libFuzzer target: one trace reader (native, strace, csv or oracleGeneral, chosen by the environment
// variable FUZZ_TRACE_FORMAT; "auto", the default, runs detection first) on arbitrary bytes. Whatever the input, the
// reader must return records that hold to the bounds of trace.hpp, or throw TraceError naming the
// input; never crash, never allocate past the fuzzer's -malloc_limit_mb, never throw anything else.
// The bytes go into a memfd that the reader opens by its /proc path, like any file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "trace/trace.hpp"

using namespace llmcache::trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = memfd_create("trace", MFD_CLOEXEC);
	static const std::string path = "/proc/self/fd/" + std::to_string(fd);
	if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size))
		std::abort();
	static const char *env = std::getenv("FUZZ_TRACE_FORMAT");
	static const std::string_view format = env && *env ? env : "auto";
	try {
		auto r = format == "auto" ? open_reader(path) : open_reader(path, parse_format(format));
		llmcache_access a;
		uint64_t blocks = 0;
		while (r->next(a)) {
			// The bounds every reader promises (trace.hpp): an access op, 1 to 2^20 blocks, the last
			// block below 2^51.
			if (a.op > LLMCACHE_OP_MMAP_FAULT || a.nr_blocks == 0 || a.nr_blocks > (1u << 20) ||
			    a.first_block >= (uint64_t(1) << 51) || a.nr_blocks > (uint64_t(1) << 51) - a.first_block) {
				std::fprintf(stderr, "record out of bounds: op %u first_block %llu nr_blocks %u\n", a.op,
					     (unsigned long long)a.first_block, a.nr_blocks);
				std::abort();
			}
			blocks += a.nr_blocks;
		}
		for (const auto &[key, p] : r->paths())
			if (p.size() > 65536)
				std::abort(); // a path longer than any reader allows
		r->notes();
		r->flags();
	} catch (const TraceError &e) {
		if (e.path() != path)
			std::abort(); // the error must name the input
	}
	return 0;
}
