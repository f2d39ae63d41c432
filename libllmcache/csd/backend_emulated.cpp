// SPDX-License-Identifier: MIT
/*
 * The `emulated` backend: a SmartSSD without the card. A dedicated thread plays the FPGA: it reads the
 * K slabs straight from the device node through its own O_DIRECT descriptor and io_uring, 8 reads in
 * flight (the flash-to-FPGA path of the drive's internal PCIe switch), verifies them as the kernel
 * would, runs the same kernel source (csd/kernels/) and streams the Score Blocks back through a queue
 * while the caller scores its CPU pool. It is paced to the configured internal bandwidth and compute
 * rate, reading and computing overlapped as in an HLS dataflow pipeline: a page finishes no earlier
 * than start + max(bytes read / bandwidth, multiply-accumulates / rate). Only scores cross to the host.
 */
#include "csd/backend.hpp"
#include "kvio/io_memory.hpp"
#include "kvio/storage_pool.hpp"
#include "kvio/uring.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace llmcache::csd {
namespace {

using Clock = std::chrono::steady_clock;

class EmulatedBackend final : public Backend {
public:
	static constexpr unsigned QD = 8;
	EmulatedBackend(const BackendConfig &cfg, int fd, uint8_t *buf) : cfg_(cfg), fd_(fd), buf_(buf)
	{
		ring_ok_ = ring_.init(QD) == 0;
		worker_ = std::thread([this] { loop(); });
	}
	~EmulatedBackend() override
	{
		{
			std::lock_guard l(mu_);
			stop_ = true;
		}
		cv_.notify_all();
		worker_.join();
		kv::io_memory::unmap(buf_, (size_t)QD * cfg_.pool->slab_bytes());
		close(fd_);
	}
	const char *name() const override { return "emulated"; }
	int submit(const ScoreJob &job) override
	{
		std::lock_guard l(mu_);
		job_ = job;
		q_.assign(job.q, job.q + (size_t)cfg_.geometry.q_heads * cfg_.geometry.head_dim);
		job_.q = q_.data();
		pending_ = true;
		done_ = false;
		error_ = 0;
		blocks_.clear();
		cv_.notify_all();
		return 0;
	}
	int wait(const BlockFn &fn, std::string &err) override
	{
		std::unique_lock l(mu_);
		if (!pending_)
			return 0;
		for (;;) {
			cv_.wait(l, [&] { return !blocks_.empty() || done_; });
			while (!blocks_.empty()) {
				std::vector<csd_score> b = std::move(blocks_.front());
				blocks_.pop_front();
				l.unlock();
				fn(b.data(), b.size());
				l.lock();
			}
			if (done_ && blocks_.empty())
				break;
		}
		pending_ = false;
		if (error_)
			err = error_msg_;
		return error_;
	}

private:
	void loop()
	{
		std::unique_lock l(mu_);
		for (;;) {
			cv_.wait(l, [&] { return stop_ || (pending_ && !done_ && !running_); });
			if (stop_)
				return;
			running_ = true;
			const ScoreJob job = job_;
			l.unlock();
			std::string msg;
			const int e = run(job, msg);
			l.lock();
			running_ = false;
			done_ = true;
			error_ = e;
			error_msg_ = msg;
			cv_.notify_all();
		}
	}

	// Verifies and scores one slab read into buf, pacing its Score Blocks.
	int score_slab(const ScoreJob &job, const PageRef &p, const uint8_t *buf, ssize_t n, Clock::time_point start,
		       double &t_read, double &t_comp, std::string &msg)
	{
		const KvGeometry &g = cfg_.geometry;
		const uint64_t sb = cfg_.pool->slab_bytes();
		if (n != (ssize_t)sb) {
			msg = "emulated device: cannot read the K slab at byte offset " + std::to_string(p.k_offset) + " of " +
			      cfg_.pool->path() + ": " + (n < 0 ? std::strerror((int)-n) : "short read");
			return n < 0 ? (int)n : -EIO;
		}
		const kv::SlabId id{cfg_.pool->pool_id(), job.layer, p.page, kv::SlabKind::K};
		if (int e = kv::slab_verify(buf, sb, id, p.k_offset, cfg_.pool->path(), msg))
			return e;
		t_read += (double)sb / cfg_.emulated.internal_bandwidth;
		const double macs = job.estimator == Estimator::Exact ? (double)p.n_tokens * g.dims() : 2.0 * g.dims();
		t_comp += macs / cfg_.emulated.compute_rate;
		score_page(g, job.estimator, job.q, buf, p.first_pos, p.n_tokens, job.block_tokens,
			   [&](const csd_score *s, size_t cnt) {
				   std::this_thread::sleep_until(start +
								 std::chrono::duration<double>(std::max(t_read, t_comp)));
				   std::lock_guard l(mu_);
				   blocks_.emplace_back(s, s + cnt);
				   cv_.notify_all();
			   });
		return 0;
	}

	// Reads the K slabs QD at a time (flash channels work in parallel inside the drive) and scores
	// each as it lands; without io_uring, one pread at a time.
	int run(const ScoreJob &job, std::string &msg)
	{
		const uint64_t sb = cfg_.pool->slab_bytes();
		const auto start = Clock::now();
		double t_read = 0, t_comp = 0;
		if (!ring_ok_) {
			for (const PageRef &p : job.pages) {
				const ssize_t n = pread(fd_, buf_, sb, (off_t)p.k_offset);
				if (int e = score_slab(job, p, buf_, n < 0 ? -errno : n, start, t_read, t_comp, msg))
					return e;
			}
			return 0;
		}
		std::vector<unsigned> idle;
		for (unsigned b = QD; b-- > 0;)
			idle.push_back(b);
		size_t page_of[QD], next = 0, inflight = 0;
		int first = 0;
		while ((next < job.pages.size() && !first) || inflight) {
			while (!first && next < job.pages.size() && !idle.empty()) {
				io_uring_sqe *sqe = ring_.get_sqe();
				if (!sqe)
					break;
				const unsigned b = idle.back();
				idle.pop_back();
				sqe->opcode = IORING_OP_READ;
				sqe->fd = fd_;
				sqe->addr = (uint64_t)(uintptr_t)(buf_ + (size_t)b * sb);
				sqe->len = (uint32_t)sb;
				sqe->off = job.pages[next].k_offset;
				sqe->user_data = b;
				page_of[b] = next++;
				inflight++;
			}
			if (int r = ring_.submit(1); r < 0) {
				msg = std::string("emulated device: io_uring failed: ") + std::strerror(-r);
				return r; // the ring is unusable; nothing more completes
			}
			io_uring_cqe cqe;
			while (ring_.pop(cqe)) {
				const unsigned b = (unsigned)cqe.user_data;
				inflight--;
				if (!first)
					first = score_slab(job, job.pages[page_of[b]], buf_ + (size_t)b * sb, cqe.res, start, t_read,
							   t_comp, msg);
				idle.push_back(b);
			}
		}
		return first;
	}

	BackendConfig cfg_;
	int fd_;
	uint8_t *buf_; // QD slabs
	kv::Uring ring_;
	bool ring_ok_ = false;
	std::thread worker_;
	std::mutex mu_;
	std::condition_variable cv_;
	bool stop_ = false, pending_ = false, done_ = false, running_ = false;
	ScoreJob job_;
	std::vector<float> q_;
	std::deque<std::vector<csd_score>> blocks_;
	int error_ = 0;
	std::string error_msg_;
};

} // namespace

int make_emulated_backend(const BackendConfig &cfg, std::unique_ptr<Backend> &out, std::string &err)
{
	if (!cfg.pool)
		return err = "emulated backend: no storage pool to score", -EINVAL;
	if (!(cfg.emulated.internal_bandwidth > 0) || !(cfg.emulated.compute_rate > 0))
		return err = "emulated backend: internal bandwidth and compute rate must be positive", -EINVAL;
	const int fd = open(cfg.pool->path().c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return err = "emulated backend: cannot open " + cfg.pool->path() + ": " + std::strerror(errno), -errno;
	uint8_t *buf = kv::io_memory::map((size_t)EmulatedBackend::QD * cfg.pool->slab_bytes(), false);
	if (!buf) {
		close(fd);
		return err = "emulated backend: out of memory", -ENOMEM;
	}
	out = std::make_unique<EmulatedBackend>(cfg, fd, buf);
	return 0;
}

} // namespace llmcache::csd
