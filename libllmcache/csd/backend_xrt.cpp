// SPDX-License-Identifier: MIT
/*
 * The `xrt` backend: a real Samsung SmartSSD through the Xilinx Runtime (Debian's libxrt-dev 2.13).
 * It opens the FPGA as xrt::device, loads the xclbin built from csd/kernels/ by Vitis, and for each
 * spilled page has the NVMe side DMA the K slab straight into FPGA memory: the slab buffer is an
 * xrt::bo with xrt::bo::flags::p2p, mapped into the host's address space, and pread() on the O_DIRECT
 * NVMe descriptor targets that mapping, so the keys cross the drive's internal switch, not the host
 * bus. The kernel (xrt::kernel "score_exact" or "score_quest_bounds") then scores the page in place and
 * only the Score Block is synced back.
 * Compiled in when CMake finds libxrt-dev (LLMCACHE_WITH_XRT, linked with libxrt_coreutil);
 * otherwise, or with no card, make_xrt_backend() says why and the caller falls back to emulated.
 */
#include "csd/backend.hpp"
#include "kvio/storage_pool.hpp"

#include <cerrno>

#ifdef LLMCACHE_WITH_XRT
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

namespace llmcache::csd {
namespace {

class XrtBackend final : public Backend {
public:
	XrtBackend(const BackendConfig &cfg, int fd) : cfg_(cfg), fd_(fd) {}
	~XrtBackend() override { close(fd_); }
	int open_card(std::string &err)
	{
		try {
			dev_ = xrt::device(cfg_.xrt_device);
			auto uuid = dev_.load_xclbin(cfg_.xclbin);
			exact_ = xrt::kernel(dev_, uuid, "score_exact");
			bounds_ = xrt::kernel(dev_, uuid, "score_quest_bounds");
			const uint64_t sb = cfg_.pool->slab_bytes();
			const auto &g = cfg_.geometry;
			slab_ = xrt::bo(dev_, sb, xrt::bo::flags::p2p, exact_.group_id(1));
			q_ = xrt::bo(dev_, sizeof(float) * g.q_heads * g.head_dim, exact_.group_id(0));
			out_ = xrt::bo(dev_, sizeof(csd_score) * g.page_tokens, exact_.group_id(9));
			done_ = xrt::bo(dev_, sizeof(uint32_t), exact_.group_id(10));
			slab_map_ = slab_.map<uint8_t *>();
		} catch (const std::exception &e) {
			err = std::string("no usable SmartSSD: ") + e.what();
			return -ENODEV;
		}
		return 0;
	}
	const char *name() const override { return "xrt"; }
	int submit(const ScoreJob &job) override
	{
		job_ = job;
		return 0;
	}
	int wait(const BlockFn &fn, std::string &err) override
	{
		const auto &g = cfg_.geometry;
		const uint64_t sb = cfg_.pool->slab_bytes(), keys_at = 8ull * g.dims(); // the payload starts the slab
		try {
			q_.write(job_.q);
			q_.sync(XCL_BO_SYNC_BO_TO_DEVICE);
			std::vector<csd_score> out(g.page_tokens);
			for (const PageRef &p : job_.pages) {
				if (pread(fd_, slab_map_, sb, (off_t)p.k_offset) != (ssize_t)sb)
					return err = "xrt: p2p read of the K slab at offset " + std::to_string(p.k_offset) +
						     " failed: " + std::strerror(errno),
					       -EIO;
				// Not yet checksummed on the card (the kernel must learn CRC32C): a corrupted key
				// can only mislead the ranking, since the KV handed out is read and verified by the pool.
				xrt::bo keys(slab_, sb - keys_at, keys_at);
				auto run = exact_(q_, keys, p.n_tokens, p.first_pos, g.q_heads, g.kv_heads, g.head_dim, g.dtype,
						  job_.block_tokens, out_, done_);
				run.wait();
				out_.sync(XCL_BO_SYNC_BO_FROM_DEVICE);
				out_.read(out.data(), sizeof(csd_score) * p.n_tokens, 0);
				for (uint32_t i = 0; i < p.n_tokens; i += job_.block_tokens)
					fn(out.data() + i, std::min(job_.block_tokens, p.n_tokens - i));
			}
		} catch (const std::exception &e) {
			err = std::string("xrt: ") + e.what();
			return -EIO;
		}
		job_.pages.clear();
		return 0;
	}

private:
	BackendConfig cfg_;
	int fd_;
	ScoreJob job_;
	xrt::device dev_;
	xrt::kernel exact_, bounds_;
	xrt::bo slab_, q_, out_, done_;
	uint8_t *slab_map_ = nullptr;
};

} // namespace

int make_xrt_backend(const BackendConfig &cfg, std::unique_ptr<Backend> &out, std::string &err)
{
	if (!cfg.pool)
		return err = "no storage pool", -EINVAL;
	if (cfg.xclbin.empty())
		return err = "no xclbin given (build csd/kernels/ with Vitis v++ for the SmartSSD platform)", -ENOENT;
	const int fd = open(cfg.pool->path().c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return err = "cannot open " + cfg.pool->path() + ": " + std::strerror(errno), -errno;
	auto b = std::make_unique<XrtBackend>(cfg, fd);
	if (int r = b->open_card(err))
		return r;
	out = std::move(b);
	return 0;
}

} // namespace llmcache::csd

#else

namespace llmcache::csd {

int make_xrt_backend(const BackendConfig &, std::unique_ptr<Backend> &, std::string &err)
{
	err = "this libllmcache was built without XRT: install libxrt-dev (make deps) and rebuild";
	return -ENOTSUP;
}

} // namespace llmcache::csd

#endif
