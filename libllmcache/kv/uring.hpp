// SPDX-License-Identifier: MIT
/*
 * The storage pool's io_uring ring, on liburing: set-up, registered buffers and file, submission and
 * completion, with every failure returned as a negative errno for the pool to report.
 */
#pragma once
#include <liburing.h>
#include <sys/uio.h>

namespace llmcache::kv {

class Uring {
public:
	Uring() = default;
	Uring(const Uring &) = delete;
	Uring &operator=(const Uring &) = delete;
	~Uring();

	int init(unsigned entries); // -errno
	int register_buffers(const iovec *iov, unsigned n);
	int register_file(int fd); // the file becomes fixed file 0
	io_uring_sqe *get_sqe();   // nullptr when the submission queue is full
	int submit(unsigned wait_nr); // submits what get_sqe handed out; waits for wait_nr completions
	bool pop(io_uring_cqe &out);  // the next completion, if any
	unsigned entries() const { return ready_ ? ring_.sq.ring_entries : 0; }

private:
	io_uring ring_{};
	bool ready_ = false;
};

} // namespace llmcache::kv
