// SPDX-License-Identifier: MIT
// A memory bound for tools that expand a trace into per-block data (llmreplay keeps 16 bytes per block
// access): the readers bound each record, this bounds their sum. A trace of a few megabytes can claim
// 2^20 blocks per 40-byte record, so without it a hostile or corrupt trace ends in std::bad_alloc after
// gigabytes; with it the tool stops at the record that passes the bound and names its offset or line.
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "io_internal.hpp"

namespace llmcache::trace {
namespace {

class LimitReader final : public Reader {
public:
	LimitReader(std::unique_ptr<Reader> inner, std::string name, uint64_t max_blocks, std::string why)
		: inner_(std::move(inner)), name_(std::move(name)), why_(std::move(why)), max_blocks_(max_blocks)
	{
	}

	bool next(llmcache_access &out) override
	{
		if (!inner_->next(out))
			return false;
		records_++;
		blocks_ += out.nr_blocks;
		if (blocks_ > max_blocks_) {
			Position p = position();
			throw TraceError(name_, p.kind, p.where,
					 "the trace claims more than " + std::to_string(max_blocks_) + " block accesses by this record " +
						 "(" + std::to_string(blocks_) + "): " + why_);
		}
		return true;
	}

	const PathMap &paths() const override { return inner_->paths(); }
	std::vector<std::string> notes() const override { return inner_->notes(); }
	std::string producer() const override { return inner_->producer(); }
	uint32_t flags() const override { return inner_->flags(); }
	uint64_t block_accesses_hint() const override { return std::min(inner_->block_accesses_hint(), max_blocks_); }
	Position position() const override
	{
		Position p = inner_->position();
		return p.kind.empty() ? Position{"record", records_} : p;
	}

private:
	std::unique_ptr<Reader> inner_;
	std::string name_, why_;
	uint64_t max_blocks_, blocks_ = 0, records_ = 0;
};

} // namespace

std::unique_ptr<Reader> limit_blocks(std::unique_ptr<Reader> inner, const std::string &name, uint64_t max_blocks,
				     std::string why)
{
	return std::make_unique<LimitReader>(std::move(inner), name, max_blocks, std::move(why));
}

uint64_t available_memory()
{
	uint64_t avail = 0;
	std::ifstream meminfo("/proc/meminfo");
	for (std::string line; std::getline(meminfo, line);)
		if (line.starts_with("MemAvailable:")) {
			std::istringstream(line.substr(13)) >> avail;
			avail *= 1024; // kB
			break;
		}
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (avail == 0 || rl.rlim_cur < avail))
		avail = rl.rlim_cur;
	return avail;
}

} // namespace llmcache::trace
