// SPDX-License-Identifier: MIT
#include "kvio/uring.hpp"

#include <unistd.h>

#include <cerrno>

namespace llmcache::kv {

Uring::~Uring()
{
	if (ready_)
		io_uring_queue_exit(&ring_);
}

int Uring::init(unsigned entries, bool single_issuer)
{
	if (ready_)
		io_uring_queue_exit(&ring_);
	int r = -EINVAL;
	if (single_issuer)
		for (unsigned flags : {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN,
				       unsigned(IORING_SETUP_COOP_TASKRUN)})
			if ((r = io_uring_queue_init(entries, &ring_, flags)) != -EINVAL)
				break;
	if (r == -EINVAL)
		r = io_uring_queue_init(entries, &ring_, 0);
	ready_ = r == 0;
	owner_ = ready_ ? gettid() : 0; // a failed set-up is tried again at the next use
	return r;
}

int Uring::register_buffers(const iovec *iov, unsigned n)
{
	return io_uring_register_buffers(&ring_, iov, n);
}

int Uring::register_file(int fd)
{
	return io_uring_register_files(&ring_, &fd, 1);
}

io_uring_sqe *Uring::get_sqe()
{
	return io_uring_get_sqe(&ring_);
}

int Uring::submit(unsigned wait_nr)
{
	int r = wait_nr ? io_uring_submit_and_wait(&ring_, wait_nr) : io_uring_submit_and_get_events(&ring_);
	return r < 0 ? r : 0;
}

bool Uring::pop(io_uring_cqe &out)
{
	io_uring_cqe *cqe = nullptr;
	if (io_uring_peek_cqe(&ring_, &cqe) != 0 || !cqe)
		return false;
	out = *cqe;
	io_uring_cqe_seen(&ring_, cqe);
	return true;
}

} // namespace llmcache::kv
