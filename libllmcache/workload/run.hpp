// SPDX-License-Identifier: MIT
// Driving a workload generator: either write its accesses as a trace, or perform them as real I/O on
// real files (open + pread64/pwrite64, or mmap page touches) and trace exactly what was performed.
#pragma once

#include "workload.hpp"

#include <sys/types.h>

#include "trace/trace.hpp"

namespace llmcache::workload {

struct RunOptions {
	std::string dir;        // real I/O on files under this directory; empty: write the trace only
	std::string trace;      // write the accesses to this trace ("-": stdout); empty: none
	trace::Format format = trace::Format::native;
	std::string producer;   // the trace header's producer string
	bool drop_cache = false; // real I/O: flush and drop the files' cached pages before start-up
	uint32_t pid = 1000;    // trace-only mode: the pid of every record (real I/O uses getpid())
};

struct RunStats {
	uint64_t iterations = 0;       // tokens of the decoder, loop periods of an app
	double prepare_s = 0;          // creating missing files
	double startup_s = 0;          // phase 0
	double run_s = 0;              // the iterations
	uint64_t bytes_read = 0;       // by the workload's accesses (mmap: 4 KiB per touched page)
	uint64_t bytes_written = 0;    // by the workload's accesses
	uint64_t bytes_prepared = 0;   // written while creating files
	uint64_t files_created = 0;
	uint64_t records = 0;          // accesses performed (or written to the trace), preparation included
	uint64_t blocks = 0;           // 4 KiB blocks those accesses covered
};

// Write g's accesses to o.trace without touching any file: dev 0, inode trace::path_inode(file name),
// the file's relative name as its path, synthetic times, pid o.pid.
RunStats write_trace(Generator &g, const RunOptions &o);

// Create g's files under o.dir (deterministic content, 1 MiB pwrite64 calls) when missing or of the wrong
// size, then perform every access in order. With o.trace, record one native record per system call or
// mmap touch run, in the order performed: real dev (encode_dev) and inode, the absolute path, the
// CLOCK_MONOTONIC time just before the call. File creation writes are recorded too. Throws
// std::system_error on I/O failure.
RunStats run_real(Generator &g, const RunOptions &o);

// st_dev as struct llmcache_access.dev stores it: the kernel's new_encode_dev(major, minor), which is what
// glibc's makedev() gives for major < 4096 (so usually st_dev itself, truncated to 32 bits).
uint32_t encode_dev(dev_t dev);

} // namespace llmcache::workload
