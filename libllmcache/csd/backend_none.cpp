// SPDX-License-Identifier: MIT
/*
 * The `none` backend: no computation in storage. The host reads the K slabs of the spilled pages back
 * through the storage pool (io_uring, O_DIRECT, checksummed) and scores them with the same kernel the
 * device would run. Every spilled key crosses the bus: this is the baseline the in-storage backends
 * are measured against.
 */
#include "csd/backend.hpp"
#include "kvio/storage_pool.hpp"

#include <cerrno>

namespace llmcache::csd {
namespace {

class NoneBackend final : public Backend {
public:
	explicit NoneBackend(const BackendConfig &cfg) : cfg_(cfg) {}
	const char *name() const override { return "none"; }
	int submit(const ScoreJob &job) override
	{
		job_ = job;
		return 0;
	}
	int wait(const BlockFn &fn, std::string &err) override
	{
		if (job_.pages.empty())
			return 0;
		if (!cfg_.pool)
			return err = "none backend: no storage pool", -EINVAL;
		std::vector<kv::SlabRead> reads;
		for (const PageRef &p : job_.pages)
			reads.push_back({{cfg_.pool->pool_id(), job_.layer, p.page, kv::SlabKind::K}, p.k_offset});
		int r = cfg_.pool->read(reads, [&](size_t i, const uint8_t *slab) {
			const PageRef &p = job_.pages[i];
			score_page(cfg_.geometry, job_.estimator, job_.q, slab, p.first_pos, p.n_tokens,
				   job_.block_tokens, fn);
			return 0;
		}, err);
		job_.pages.clear();
		return r;
	}

private:
	BackendConfig cfg_;
	ScoreJob job_;
};

} // namespace

std::unique_ptr<Backend> make_none_backend(const BackendConfig &cfg) { return std::make_unique<NoneBackend>(cfg); }

} // namespace llmcache::csd
