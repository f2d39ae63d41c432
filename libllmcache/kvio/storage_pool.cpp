// SPDX-License-Identifier: MIT
#include "kvio/storage_pool.hpp"

#include "kvio/io_memory.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <random>

namespace llmcache::kv {

static std::string errstr(int e) { return std::strerror(e < 0 ? -e : e); }

namespace {
// Adds the lifetime of the object to a nanosecond counter.
struct Timer {
	uint64_t &ns;
	std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
	~Timer() { ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(); }
};
} // namespace

SlabBuffer::SlabBuffer(uint64_t slab_bytes, uint64_t payload_bytes)
{
	base_ = std::unique_ptr<uint8_t, Free>(io_memory::slab_alloc(slab_bytes), Free{slab_bytes});
	std::memset(base_.get() + payload_bytes, 0, slab_bytes - payload_bytes);
}

void SlabBuffer::Free::operator()(uint8_t *p) const { io_memory::slab_free(p, slab_bytes); }

int StoragePool::open(const StorageConfig &cfg, std::unique_ptr<StoragePool> &out, std::string &err)
{
	if (cfg.slab_bytes == 0 || cfg.slab_bytes % SLAB_ALIGN || cfg.slab_bytes > (1u << 30) || cfg.offset % SLAB_ALIGN ||
	    cfg.queue_depth == 0 || cfg.queue_depth > 4096) {
		err = "storage pool: slab size (a page of K or V) must be a multiple of 4096 up to 1 GiB, the offset a "
		      "multiple of 4096 and the queue depth 1-4096: use fewer tokens per page";
		return -EINVAL;
	}
	std::unique_ptr<StoragePool> p(new StoragePool());
	p->cfg_ = cfg;
	p->fd_ = ::open(cfg.path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
	if (p->fd_ < 0) {
		const int e = errno;
		if (e == ENOENT)
			err = "storage device " + cfg.path +
			      " does not exist: create it (truncate -s 8G FILE, or losetup) or point the KV device at an "
			      "existing block device";
		else if (e == EINVAL)
			err = "cannot open " + cfg.path + " with O_DIRECT: its file system does not support direct I/O "
			      "(tmpfs?); put the file on ext4/xfs or use a block device";
		else
			err = "cannot open storage device " + cfg.path + ": " + errstr(e);
		return -e;
	}
	struct stat st;
	uint64_t size = 0;
	if (fstat(p->fd_, &st) < 0)
		return err = "cannot stat " + cfg.path + ": " + errstr(errno), -errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(p->fd_, BLKGETSIZE64, &size) < 0)
			return err = "cannot read the size of " + cfg.path + ": " + errstr(errno), -errno;
	} else if (S_ISREG(st.st_mode)) {
		size = st.st_size;
	} else {
		err = cfg.path + " is neither a block device nor a regular file";
		return -ENODEV;
	}
	size = size > cfg.offset ? size - cfg.offset : 0;
	if (cfg.capacity && cfg.capacity < size)
		size = cfg.capacity;
	p->slots_ = size / cfg.slab_bytes;
	if (p->slots_ < 2) {
		err = "storage device " + cfg.path + " holds " + std::to_string(size) + " bytes, less than two slabs of " +
		      std::to_string(cfg.slab_bytes) + ": give it more space";
		return -ENOSPC;
	}
	for (uint64_t s = p->slots_; s-- > 0;)
		p->free_.push_back(s);
	std::random_device rd;
	p->pool_id_ = ((uint64_t)rd() << 32) ^ rd() ^ (uint64_t)getpid() << 16;

	p->bufs_len_ = cfg.slab_bytes * p->buffer_count();
	if (!(p->bufs_ = io_memory::map(p->bufs_len_, true)))
		return err = "cannot allocate " + std::to_string(p->bufs_len_) + " bytes of I/O buffers", -ENOMEM;
	const char *step = "set up io_uring";
	int r = cfg.use_io_uring ? p->setup_ring(step) : -EPERM;
	if (r < 0) {
		// Containers often forbid io_uring (seccomp, kernel.io_uring_disabled): stay correct, slower.
		p->sync_ = true;
		p->note_ = cfg.use_io_uring ? std::string("cannot ") + step + ": " + errstr(r) +
						      "; the storage pool uses synchronous pread/pwrite"
					    : "io_uring off by configuration: the storage pool uses synchronous pread/pwrite";
	}
	out = std::move(p);
	return 0;
}

StoragePool::~StoragePool()
{
	io_memory::unmap(bufs_, bufs_len_);
	if (fd_ >= 0)
		close(fd_);
}

int StoragePool::setup_ring(const char *&step)
{
	int r = ring_.init(cfg_.queue_depth, true);
	std::vector<iovec> iov(buffer_count());
	for (unsigned i = 0; i < iov.size(); i++)
		iov[i] = {bufs_ + (size_t)i * cfg_.slab_bytes, cfg_.slab_bytes};
	step = "set up io_uring";
	if (r == 0 && (r = ring_.register_buffers(iov.data(), buffer_count())) < 0)
		step = "register the I/O buffers with io_uring (RLIMIT_MEMLOCK too low?)";
	else if (r == 0 && (r = ring_.register_file(fd_)) < 0)
		step = "register the device with io_uring";
	return r;
}

void StoragePool::release(uint64_t offset) { free_.push_back((offset - cfg_.offset) / cfg_.slab_bytes); }

// Keeps queue_depth requests in flight, one registered buffer each, until all n are done.
int StoragePool::run(size_t n, const Prep &prep, const Done &done)
{
	if (sync_) {
		int first = 0;
		for (size_t i = 0; i < n; i++) {
			io_uring_sqe sqe{};
			prep(i, 0, &sqe);
			void *buf = reinterpret_cast<void *>((uintptr_t)sqe.addr);
			const bool wr = sqe.opcode == IORING_OP_WRITE_FIXED || sqe.opcode == IORING_OP_WRITE;
			const ssize_t r = wr ? pwrite(fd_, buf, sqe.len, (off_t)sqe.off) : pread(fd_, buf, sqe.len, (off_t)sqe.off);
			const int e = done(i, 0, r < 0 ? -errno : (int)r);
			if (e < 0 && !first)
				first = e;
		}
		return first;
	}
	// The ring takes submissions from the thread that set it up only: a pool used from another thread
	// sets it up again there.
	if (const char *step; ring_.owner() != gettid())
		if (int r = setup_ring(step); r < 0)
			return r;
	std::vector<unsigned> idle;
	for (unsigned b = buffer_count(); b-- > 0;)
		idle.push_back(b);
	std::vector<size_t> item_of(buffer_count());
	// Completions are taken in at every submission but handled one at a time. There are twice as many
	// buffers as requests in flight, so a completion waiting to be handled (a slab being verified, or
	// any wait for the CPU on a busy machine) does not hold a request back: the device keeps
	// queue_depth requests, as fio keeps its iodepth. Each request is submitted as soon as it is
	// prepared, since preparing a write computes its checksum. With nothing left to handle, the thread
	// sleeps until a quarter of the queue has completed, not one request: woken for each, it slowed a
	// loop device's worker by 10-30% (evaluation.md, "Waking for a quarter of the queue"); the other
	// three quarters keep the device busy meanwhile.
	const unsigned wake_batch = std::max(1u, cfg_.queue_depth / 4);
	std::deque<std::pair<unsigned, int>> ready; // completed: buffer, result
	size_t next = 0, inflight = 0;
	int first = 0;
	while (next < n || inflight || !ready.empty()) {
		bool reaped = false; // submitted, and so took in the completions that had arrived
		while (next < n && inflight < cfg_.queue_depth && !idle.empty()) {
			io_uring_sqe *sqe = ring_.get_sqe();
			if (!sqe)
				break;
			const unsigned b = idle.back();
			idle.pop_back();
			item_of[b] = next;
			prep(next++, b, sqe);
			sqe->flags |= IOSQE_FIXED_FILE;
			sqe->user_data = b;
			inflight++;
			if (int r = ring_.submit(0); r < 0)
				return r; // the ring is unusable; nothing was acknowledged as stored
			reaped = true;
		}
		if (inflight && (ready.empty() || !reaped))
			if (int r = ring_.submit(ready.empty() ? (unsigned)std::min<size_t>(inflight, wake_batch) : 0); r < 0)
				return r;
		io_uring_cqe cqe;
		while (ring_.pop(cqe)) {
			ready.emplace_back((unsigned)cqe.user_data, cqe.res);
			inflight--;
		}
		if (ready.empty())
			continue;
		const auto [b, res] = ready.front();
		ready.pop_front();
		if (int e = done(item_of[b], b, res); e < 0 && !first)
			first = e;
		idle.push_back(b);
	}
	return first;
}

int StoragePool::write(std::span<const SlabWrite> slabs, std::vector<int64_t> &result, std::string &err)
{
	Timer timer{stats_.write_ns};
	result.assign(slabs.size(), -ENOSPC);
	const uint64_t sb = cfg_.slab_bytes;
	int first = 0;
	auto fail = [&](size_t i, int e, const std::string &msg) {
		result[i] = e;
		stats_.errors++;
		if (!first)
			first = e, err = msg;
	};
	std::vector<size_t> todo;
	for (size_t i = 0; i < slabs.size(); i++) {
		const SlabWrite &w = slabs[i];
		if (sizeof(SlabHeader) + w.a_len + w.b_len > sb ||
		    (w.slab && (w.a != w.slab || w.b_len || (uintptr_t)w.slab % SLAB_ALIGN))) {
			fail(i, -EINVAL, "slab payload larger than the slab size, or an unaligned in-place slab");
			continue;
		}
		if (free_.empty()) {
			fail(i, -ENOSPC, "storage pool " + cfg_.path + " is full (" + std::to_string(slots_) + " slabs of " +
						 std::to_string(sb) + " bytes): the KV stays in memory; give the pool a larger "
						 "device or raise the CPU budget");
			continue;
		}
		result[i] = (int64_t)(cfg_.offset + free_.back() * sb);
		free_.pop_back();
		todo.push_back(i);
	}
	int r = run(
		todo.size(),
		[&](size_t k, unsigned b, io_uring_sqe *sqe) {
			const SlabWrite &w = slabs[todo[k]];
			if (w.slab) { // the caller's SlabBuffer: sealed and written where it is
				slab_seal(w.slab, sb, w.id, w.n_tokens, (uint32_t)w.a_len, ++seq_, w.crc_known ? &w.crc : nullptr);
				io_uring_prep_write(sqe, 0, w.slab, (unsigned)sb, (uint64_t)result[todo[k]]);
				return;
			}
			uint8_t *buf = bufs_ + (size_t)b * sb;
			std::memcpy(buf, w.a, w.a_len);
			if (w.b_len)
				std::memcpy(buf + w.a_len, w.b, w.b_len);
			const size_t used = w.a_len + w.b_len;
			std::memset(buf + used, 0, sb - used);
			slab_seal(buf, sb, w.id, w.n_tokens, (uint32_t)used, ++seq_, w.crc_known ? &w.crc : nullptr);
			io_uring_prep_write_fixed(sqe, 0, buf, (unsigned)sb, (uint64_t)result[todo[k]], (int)b);
		},
		[&](size_t k, unsigned, int res) {
			const size_t i = todo[k];
			if (res == (int)sb) {
				stats_.slabs_written++;
				stats_.bytes_written += sb;
				return 0;
			}
			const int e = res < 0 ? res : -EIO;
			const uint64_t off = (uint64_t)result[i];
			release(off);
			fail(i, e,
			     "cannot write a KV slab to " + cfg_.path + " at byte offset " + std::to_string(off) + ": " +
				     (res < 0 ? errstr(res) : "short write of " + std::to_string(res) + " bytes") +
				     "; the KV stays in memory");
			return e;
		});
	if (r < 0 && !first) {
		first = r;
		err = "io_uring submission to " + cfg_.path + " failed: " + errstr(r);
	}
	return first;
}

int StoragePool::read(std::span<const SlabRead> slabs, const std::function<int(size_t, const uint8_t *)> &fn,
		      std::string &err)
{
	Timer timer{stats_.read_ns};
	const uint64_t sb = cfg_.slab_bytes;
	auto len = [&](const SlabRead &r) { return r.count ? (uint64_t)r.count * SLAB_ALIGN : sb; };
	for (const SlabRead &r : slabs)
		if (r.count && (!r.block_crcs || r.first + (uint64_t)r.count > sb / SLAB_ALIGN))
			return err = "a partial slab read past the slab's end or without its block checksums", -EINVAL;
	int first = 0;
	int r = run(
		slabs.size(),
		[&](size_t i, unsigned b, io_uring_sqe *sqe) {
			io_uring_prep_read_fixed(sqe, 0, bufs_ + (size_t)b * sb, (unsigned)len(slabs[i]),
						 slabs[i].offset + (uint64_t)slabs[i].first * SLAB_ALIGN, (int)b);
		},
		[&](size_t i, unsigned b, int res) {
			const SlabRead &rd = slabs[i];
			const uint8_t *buf = bufs_ + (size_t)b * sb;
			std::string msg;
			int e = 0;
			stats_.bytes_read += res > 0 ? res : 0; // crossed the bus, intact or not
			if (res != (int)len(rd)) {
				e = res < 0 ? res : -EIO;
				msg = "cannot read the KV slab at byte offset " + std::to_string(rd.offset) + " of " + cfg_.path +
				      ": " + (res < 0 ? errstr(res) : "short read of " + std::to_string(res) + " bytes");
			} else if ((e = rd.count ? slab_verify_blocks(buf, sb, rd.first, rd.count, rd.block_crcs, rd.id, rd.offset,
								      cfg_.path, msg)
						 : slab_verify(buf, sb, rd.id, rd.offset, cfg_.path, msg, rd.dst)) == 0) {
				(rd.count ? stats_.runs_read : stats_.slabs_read)++;
				if (first)
					return 0;
				e = fn(i, buf);
				if (e < 0)
					msg = "KV slab consumer failed: " + errstr(e);
			}
			if (e < 0) {
				stats_.errors++;
				if (!first)
					first = e, err = msg;
			}
			return e;
		});
	if (r < 0 && !first) {
		first = r;
		err = "io_uring submission to " + cfg_.path + " failed: " + errstr(r);
	}
	return first;
}

} // namespace llmcache::kv
