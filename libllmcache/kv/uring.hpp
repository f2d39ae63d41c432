// SPDX-License-Identifier: MIT
/*
 * A minimal io_uring ring over the kernel ABI (<linux/io_uring.h>): set-up, registered buffers,
 * submission and completion. It is what the storage pool needs from liburing (queue init, get_sqe,
 * submit-and-wait, peek/seen) in one small class, so the library links without -luring.
 */
#pragma once
#include <linux/io_uring.h>
#include <sys/uio.h>

#include <cstdint>

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
	unsigned entries() const { return sq_entries_; }

private:
	int fd_ = -1;
	void *sq_map_ = nullptr, *cq_map_ = nullptr;
	size_t sq_map_len_ = 0, cq_map_len_ = 0;
	io_uring_sqe *sqes_ = nullptr;
	size_t sqes_len_ = 0;
	unsigned *sq_head_ = nullptr, *sq_tail_ = nullptr, *sq_array_ = nullptr, sq_mask_ = 0, sq_entries_ = 0;
	unsigned *cq_head_ = nullptr, *cq_tail_ = nullptr, cq_mask_ = 0;
	io_uring_cqe *cqes_ = nullptr;
	unsigned tail_ = 0, submitted_ = 0;
};

} // namespace llmcache::kv
