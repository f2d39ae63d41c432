// SPDX-License-Identifier: MIT
/*
 * The `emulated` backend: a SmartSSD without the card. A dedicated thread plays the FPGA: it reads the
 * K slabs straight from the device node through its own O_DIRECT descriptor (the flash-to-FPGA path of
 * the device's internal PCIe switch), verifies them as the kernel would, runs the same kernel source
 * (csd/kernels/) and streams the Score Blocks back through a queue while the caller scores its CPU
 * pool. It is paced to the configured internal bandwidth and compute rate, reading and computing
 * overlapped as in an HLS dataflow pipeline: a page finishes no earlier than
 * start + max(bytes read / bandwidth, multiply-accumulates / rate). Only scores cross to the host.
 */
#include "csd/backend.hpp"
#include "kv/storage_pool.hpp"

#include <fcntl.h>
#include <sys/mman.h>
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
	EmulatedBackend(const BackendConfig &cfg, int fd, uint8_t *buf) : cfg_(cfg), fd_(fd), buf_(buf)
	{
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
		munmap(buf_, cfg_.pool->slab_bytes());
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

	int run(const ScoreJob &job, std::string &msg)
	{
		const KvGeometry &g = cfg_.geometry;
		const uint64_t sb = cfg_.pool->slab_bytes();
		const auto start = Clock::now();
		double t_read = 0, t_comp = 0;
		for (const PageRef &p : job.pages) {
			const ssize_t n = pread(fd_, buf_, sb, (off_t)p.k_offset);
			if (n != (ssize_t)sb) {
				msg = "emulated device: cannot read the K slab at byte offset " + std::to_string(p.k_offset) +
				      " of " + cfg_.pool->path() + ": " + (n < 0 ? std::strerror(errno) : "short read");
				return n < 0 ? -errno : -EIO;
			}
			const kv::SlabId id{cfg_.pool->pool_id(), job.layer, p.page, kv::SlabKind::K};
			if (int e = kv::slab_verify(buf_, sb, id, p.k_offset, cfg_.pool->path(), msg))
				return e;
			t_read += (double)sb / cfg_.emulated.internal_bandwidth;
			const double macs = job.estimator == Estimator::Exact ? (double)p.n_tokens * g.dims() : 2.0 * g.dims();
			t_comp += macs / cfg_.emulated.compute_rate;
			score_page(g, job.estimator, job.q, buf_ + sizeof(kv::SlabHeader), p.first_pos, p.n_tokens,
				   job.block_tokens, [&](const csd_score *s, size_t n) {
					   std::this_thread::sleep_until(
						   start + std::chrono::duration<double>(std::max(t_read, t_comp)));
					   std::lock_guard l(mu_);
					   blocks_.emplace_back(s, s + n);
					   cv_.notify_all();
				   });
		}
		return 0;
	}

	BackendConfig cfg_;
	int fd_;
	uint8_t *buf_;
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
	void *buf = mmap(nullptr, cfg.pool->slab_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		close(fd);
		return err = "emulated backend: out of memory", -ENOMEM;
	}
	out = std::make_unique<EmulatedBackend>(cfg, fd, static_cast<uint8_t *>(buf));
	return 0;
}

} // namespace llmcache::csd
