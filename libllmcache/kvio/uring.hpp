// SPDX-License-Identifier: MIT
/*
 * The storage pool's io_uring ring, on liburing: set-up, registered buffers and file, submission and
 * completion, with every failure returned as a negative errno for the pool to report.
 */
#pragma once
#include <liburing.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace llmcache::kv {

class Uring {
public:
	Uring() = default;
	Uring(const Uring &) = delete;
	Uring &operator=(const Uring &) = delete;
	~Uring();

	// -errno. single_issuer: set the ring up as fio does (SINGLE_ISSUER | DEFER_TASKRUN | COOP_TASKRUN,
	// each dropped where the kernel lacks it): completions run when this thread waits for them, so the
	// device's completion path never interrupts or wakes it for each one; only this thread may then
	// submit (owner()). A second init replaces the ring.
	int init(unsigned entries, bool single_issuer = false);
	int register_buffers(const iovec *iov, unsigned n);
	int register_file(int fd); // the file becomes fixed file 0
	io_uring_sqe *get_sqe();   // nullptr when the submission queue is full
	// Submits what get_sqe handed out and takes in the completions that have arrived (with
	// DEFER_TASKRUN they reach the completion queue only when the ring is entered for them); waits
	// for wait_nr of them.
	int submit(unsigned wait_nr);
	bool pop(io_uring_cqe &out);  // the next completion, if any
	unsigned entries() const { return ready_ ? ring_.sq.ring_entries : 0; }
	pid_t owner() const { return owner_; } // the thread that set the ring up

private:
	io_uring ring_{};
	bool ready_ = false;
	pid_t owner_ = 0;
};

} // namespace llmcache::kv
