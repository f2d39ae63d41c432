// SPDX-License-Identifier: MIT
/*
 * The `emulated` backend: a SmartSSD without the card. A dedicated thread plays the FPGA: it reads the
 * K slabs straight from the device node through its own O_DIRECT descriptor and io_uring, 8 reads in
 * flight (the flash-to-FPGA path of the drive's internal PCIe switch), verifies them as the kernel
 * would, runs the same kernel source (csd/kernels/) and streams the Score Blocks back through a queue
 * while the caller scores its CPU pool. It is paced to the configured internal bandwidth and compute
 * rate, reading and computing overlapped as in an HLS dataflow pipeline: a page finishes no earlier
 * than start + max(bytes read / bandwidth, multiply-accumulates / rate). Only scores cross to the host.
 * With DeviceSelect::BoundsFirst (select_bounds_first.hpp) a job runs in two stages: the bounds blocks
 * of every page (read, checked against the page's block CRCs, scored by score_quest_bounds), then the
 * key blocks of the pages bounds_first_pages() takes, checked likewise and scored by score_exact; the
 * second stage starts when the first is done (paced time included), as the page choice needs every bound.
 */
#include "csd/backend.hpp"
#include "csd/select_bounds_first.hpp"
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

	DeviceCounters counters() const override
	{
		std::lock_guard l(mu_);
		return counters_;
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

	struct Pace {
		Clock::time_point start;
		double read = 0, comp = 0; // seconds of paced reading and computing since start
	};

	void count(const DeviceCounters &d)
	{
		std::lock_guard l(mu_);
		counters_.flash_bytes += d.flash_bytes;
		counters_.bound_pages += d.bound_pages;
		counters_.exact_pages += d.exact_pages;
		counters_.exact_tokens += d.exact_tokens;
		counters_.score_entries += d.score_entries;
	}

	// Scores one page whose K payload is at k_payload and hands its Score Blocks over, paced.
	void emit(const ScoreJob &job, const PageRef &p, const uint8_t *k_payload, Pace &pace)
	{
		const KvGeometry &g = cfg_.geometry;
		const double macs = job.estimator == Estimator::Exact ? (double)p.n_tokens * g.dims() : 2.0 * g.dims();
		pace.comp += macs / cfg_.emulated.compute_rate;
		DeviceCounters d;
		d.exact_pages = job.estimator == Estimator::Exact;
		d.exact_tokens = job.estimator == Estimator::Exact ? p.n_tokens : 0;
		d.score_entries = p.n_tokens;
		count(d);
		score_page(g, job.estimator, job.q, k_payload, p.first_pos, p.n_tokens, job.block_tokens,
			   [&](const csd_score *s, size_t cnt) {
				   std::this_thread::sleep_until(pace.start +
								 std::chrono::duration<double>(std::max(pace.read, pace.comp)));
				   std::lock_guard l(mu_);
				   blocks_.emplace_back(s, s + cnt);
				   cv_.notify_all();
			   });
	}

	// The result of a read: n bytes (negative errno) wanted `want`.
	int check_read(ssize_t n, uint64_t want, uint64_t at, std::string &msg)
	{
		if (n == (ssize_t)want)
			return 0;
		msg = "emulated device: cannot read the K slab at byte offset " + std::to_string(at) + " of " +
		      cfg_.pool->path() + ": " + (n < 0 ? std::strerror((int)-n) : "short read");
		return n < 0 ? (int)n : -EIO;
	}

	// Reads n pieces, QD in flight (flash channels work in parallel inside the drive); piece i is
	// where(i) = {device offset, length at most a slab, offset in its slot buffer}, and done(i, slot,
	// result) gets each as it lands. Without io_uring, one pread at a time. Stops at the first error.
	struct Piece {
		uint64_t offset;
		uint32_t len, at;
	};
	template <class Where, class Done>
	int read_pieces(size_t n, Where where, Done done, std::string &msg)
	{
		const uint64_t sb = cfg_.pool->slab_bytes();
		if (!ring_ok_) {
			for (size_t i = 0; i < n; i++) {
				const Piece pc = where(i);
				const ssize_t r = pread(fd_, buf_ + pc.at, pc.len, (off_t)pc.offset);
				if (int e = done(i, buf_, r < 0 ? -errno : r))
					return e;
			}
			return 0;
		}
		std::vector<unsigned> idle;
		for (unsigned b = QD; b-- > 0;)
			idle.push_back(b);
		size_t piece_of[QD], next = 0, inflight = 0;
		int first = 0;
		while ((next < n && !first) || inflight) {
			while (!first && next < n && !idle.empty()) {
				io_uring_sqe *sqe = ring_.get_sqe();
				if (!sqe)
					break;
				const unsigned b = idle.back();
				idle.pop_back();
				const Piece pc = where(next);
				sqe->opcode = IORING_OP_READ;
				sqe->fd = fd_;
				sqe->addr = (uint64_t)(uintptr_t)(buf_ + (size_t)b * sb + pc.at);
				sqe->len = pc.len;
				sqe->off = pc.offset;
				sqe->user_data = b;
				piece_of[b] = next++;
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
					first = done(piece_of[b], buf_ + (size_t)b * sb, cqe.res);
				idle.push_back(b);
			}
		}
		return first;
	}

	int run(const ScoreJob &job, std::string &msg)
	{
		Pace pace{Clock::now()};
		if (job.device_select == DeviceSelect::BoundsFirst && job.estimator == Estimator::Exact)
			return run_bounds_first(job, pace, msg);
		const uint64_t sb = cfg_.pool->slab_bytes();
		return read_pieces(
			job.pages.size(), [&](size_t i) { return Piece{job.pages[i].k_offset, (uint32_t)sb, 0}; },
			[&](size_t i, const uint8_t *slot, ssize_t n) {
				const PageRef &p = job.pages[i];
				if (int e = check_read(n, sb, p.k_offset, msg))
					return e;
				const kv::SlabId id{cfg_.pool->pool_id(), job.layer, p.page, kv::SlabKind::K};
				if (int e = kv::slab_verify(slot, sb, id, p.k_offset, cfg_.pool->path(), msg))
					return e;
				pace.read += (double)sb / cfg_.emulated.internal_bandwidth;
				DeviceCounters d;
				d.flash_bytes = sb;
				count(d);
				emit(job, p, slot, pace);
				return 0;
			},
			msg);
	}

	// Stage 1: every page's bounds blocks, kept and scored by bound; stage 2: the key blocks of the
	// pages bounds_first_pages() takes, scored exactly (select_bounds_first.hpp).
	int run_bounds_first(const ScoreJob &job, Pace &pace, std::string &msg)
	{
		const KvGeometry &g = cfg_.geometry;
		const uint64_t sb = cfg_.pool->slab_bytes();
		const BoundsLayout L = bounds_layout(g);
		const uint64_t head = (uint64_t)L.bound_blocks * kv::SLAB_ALIGN;
		for (const PageRef &p : job.pages)
			if (!p.k_block_crcs)
				return msg = "emulated device: a bounds-first job needs every page's block checksums", -EINVAL;
		auto slab_id = [&](const PageRef &p) { return kv::SlabId{cfg_.pool->pool_id(), job.layer, p.page, kv::SlabKind::K}; };
		heads_.resize(job.pages.size() * head);
		std::vector<PageBound> bounds(job.pages.size());
		int r = read_pieces(
			job.pages.size(), [&](size_t i) { return Piece{job.pages[i].k_offset, (uint32_t)head, 0}; },
			[&](size_t i, const uint8_t *slot, ssize_t n) {
				const PageRef &p = job.pages[i];
				if (int e = check_read(n, head, p.k_offset, msg))
					return e;
				if (int e = kv::slab_verify_blocks(slot, sb, 0, L.bound_blocks, p.k_block_crcs, slab_id(p), p.k_offset,
								   cfg_.pool->path(), msg))
					return e;
				std::memcpy(&heads_[i * head], slot, head);
				const auto kmin = reinterpret_cast<const float *>(slot);
				csd_score b;
				uint32_t blocks = 0;
				score_quest_bounds(job.q, kmin, kmin + g.dims(), 1, &p.first_pos, g.q_heads, g.kv_heads, g.head_dim, 1,
						   &b, &blocks);
				bounds[i] = {p.first_pos, p.n_tokens, b.score};
				pace.read += (double)head / cfg_.emulated.internal_bandwidth;
				pace.comp += 2.0 * g.dims() / cfg_.emulated.compute_rate;
				DeviceCounters d;
				d.flash_bytes = head;
				d.bound_pages = 1;
				count(d);
				return 0;
			},
			msg);
		if (r)
			return r;
		// The choice needs every bound: stage 2 starts when stage 1 is done.
		pace.read = pace.comp = std::max(pace.read, pace.comp);
		const std::vector<uint32_t> taken = bounds_first_pages(bounds, job.top_k, job.margin);
		return read_pieces(
			taken.size(),
			[&](size_t j) {
				const PageRef &p = job.pages[taken[j]];
				const uint64_t len = (uint64_t)(L.key_end(g, p.n_tokens) - L.bound_blocks) * kv::SLAB_ALIGN;
				return Piece{p.k_offset + head, (uint32_t)len, (uint32_t)head};
			},
			[&](size_t j, uint8_t *slot, ssize_t n) {
				const PageRef &p = job.pages[taken[j]];
				const uint32_t blocks = L.key_end(g, p.n_tokens) - L.bound_blocks;
				const uint64_t len = (uint64_t)blocks * kv::SLAB_ALIGN;
				if (int e = check_read(n, len, p.k_offset + head, msg))
					return e;
				if (int e = kv::slab_verify_blocks(slot + head, sb, L.bound_blocks, blocks, p.k_block_crcs, slab_id(p),
								   p.k_offset, cfg_.pool->path(), msg))
					return e;
				std::memcpy(slot, &heads_[(size_t)taken[j] * head], head); // what stage 1 read
				pace.read += (double)len / cfg_.emulated.internal_bandwidth;
				DeviceCounters d;
				d.flash_bytes = len;
				count(d);
				emit(job, p, slot, pace);
				return 0;
			},
			msg);
	}

	BackendConfig cfg_;
	int fd_;
	uint8_t *buf_; // QD slabs
	kv::Uring ring_;
	bool ring_ok_ = false;
	std::thread worker_;
	mutable std::mutex mu_;
	std::condition_variable cv_;
	bool stop_ = false, pending_ = false, done_ = false, running_ = false;
	ScoreJob job_;
	std::vector<float> q_;
	std::deque<std::vector<csd_score>> blocks_;
	int error_ = 0;
	std::string error_msg_;
	DeviceCounters counters_;
	std::vector<uint8_t> heads_; // bounds-first: each page's bounds blocks from stage 1 (the card's DDR)
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
