// SPDX-License-Identifier: MIT
#include "kv/uring.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace llmcache::kv {

Uring::~Uring()
{
	if (sqes_)
		munmap(sqes_, sqes_len_);
	if (cq_map_ && cq_map_ != sq_map_)
		munmap(cq_map_, cq_map_len_);
	if (sq_map_)
		munmap(sq_map_, sq_map_len_);
	if (fd_ >= 0)
		close(fd_);
}

int Uring::init(unsigned entries)
{
	io_uring_params p{};
	fd_ = (int)syscall(__NR_io_uring_setup, entries, &p);
	if (fd_ < 0)
		return -errno;
	sq_map_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_map_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
	const bool single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single)
		sq_map_len_ = cq_map_len_ = sq_map_len_ > cq_map_len_ ? sq_map_len_ : cq_map_len_;
	sq_map_ = mmap(nullptr, sq_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING);
	if (sq_map_ == MAP_FAILED)
		return sq_map_ = nullptr, -errno;
	cq_map_ = single ? sq_map_
			 : mmap(nullptr, cq_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_,
				IORING_OFF_CQ_RING);
	if (cq_map_ == MAP_FAILED)
		return cq_map_ = nullptr, -errno;
	sqes_len_ = p.sq_entries * sizeof(io_uring_sqe);
	void *s = mmap(nullptr, sqes_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES);
	if (s == MAP_FAILED)
		return -errno;
	sqes_ = static_cast<io_uring_sqe *>(s);
	auto sq = static_cast<char *>(sq_map_), cq = static_cast<char *>(cq_map_);
	sq_head_ = reinterpret_cast<unsigned *>(sq + p.sq_off.head);
	sq_tail_ = reinterpret_cast<unsigned *>(sq + p.sq_off.tail);
	sq_array_ = reinterpret_cast<unsigned *>(sq + p.sq_off.array);
	sq_mask_ = *reinterpret_cast<unsigned *>(sq + p.sq_off.ring_mask);
	sq_entries_ = p.sq_entries;
	cq_head_ = reinterpret_cast<unsigned *>(cq + p.cq_off.head);
	cq_tail_ = reinterpret_cast<unsigned *>(cq + p.cq_off.tail);
	cq_mask_ = *reinterpret_cast<unsigned *>(cq + p.cq_off.ring_mask);
	cqes_ = reinterpret_cast<io_uring_cqe *>(cq + p.cq_off.cqes);
	tail_ = submitted_ = *sq_tail_;
	return 0;
}

int Uring::register_buffers(const iovec *iov, unsigned n)
{
	return syscall(__NR_io_uring_register, fd_, IORING_REGISTER_BUFFERS, iov, n) < 0 ? -errno : 0;
}

int Uring::register_file(int fd)
{
	return syscall(__NR_io_uring_register, fd_, IORING_REGISTER_FILES, &fd, 1) < 0 ? -errno : 0;
}

io_uring_sqe *Uring::get_sqe()
{
	if (tail_ - __atomic_load_n(sq_head_, __ATOMIC_ACQUIRE) >= sq_entries_)
		return nullptr;
	const unsigned i = tail_++ & sq_mask_;
	sq_array_[i] = i;
	std::memset(&sqes_[i], 0, sizeof(sqes_[i]));
	return &sqes_[i];
}

int Uring::submit(unsigned wait_nr)
{
	__atomic_store_n(sq_tail_, tail_, __ATOMIC_RELEASE);
	const unsigned n = tail_ - submitted_;
	for (;;) {
		long r = syscall(__NR_io_uring_enter, fd_, n, wait_nr, wait_nr ? IORING_ENTER_GETEVENTS : 0, nullptr, 0);
		if (r >= 0) {
			submitted_ += (unsigned)r;
			return (int)r;
		}
		if (errno != EINTR)
			return -errno;
	}
}

bool Uring::pop(io_uring_cqe &out)
{
	const unsigned head = *cq_head_;
	if (head == __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE))
		return false;
	out = cqes_[head & cq_mask_];
	__atomic_store_n(cq_head_, head + 1, __ATOMIC_RELEASE);
	return true;
}

} // namespace llmcache::kv
