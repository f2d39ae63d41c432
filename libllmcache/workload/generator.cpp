// SPDX-License-Identifier: MIT
// The part every workload generator shares: phases, records, synthetic time, file content.
#include "workload.hpp"

#include <algorithm>
#include <cstring>

namespace llmcache::workload {

std::string_view role_name(Role r)
{
	switch (r) {
	case Role::config: return "config";
	case Role::hot: return "hot";
	case Role::model: return "model";
	case Role::scratch: return "scratch";
	}
	return "?";
}

bool Generator::step(std::vector<llmcache_access> &out)
{
	out.clear();
	if (phase_ > iterations_)
		return false;
	out_ = &out;
	if (phase_ == 0)
		startup();
	else
		iteration(phase_ - 1);
	out_ = nullptr;
	phase_++;
	for (auto &a : out) {
		a.time_ns = clock_ns_;
		clock_ns_ += uint64_t(a.nr_blocks) * ns_per_block;
	}
	return true;
}

uint32_t Generator::add_file(std::string name, uint64_t size, Role role, uint64_t paper_block, uint64_t paper_blocks)
{
	files_.push_back({std::move(name), size, role, paper_block, paper_blocks});
	return uint32_t(files_.size() - 1);
}

void Generator::access(uint32_t file, uint64_t first, uint32_t n, llmcache_op op)
{
	llmcache_access a{};
	a.inode = file;
	a.first_block = first;
	a.nr_blocks = n;
	a.op = uint8_t(op);
	out_->push_back(a);
}

void Generator::sweep(uint32_t file, uint64_t chunk_blocks, llmcache_op op)
{
	uint64_t blocks = files_[file].blocks();
	for (uint64_t b = 0; b < blocks; b += chunk_blocks)
		access(file, b, uint32_t(std::min(chunk_blocks, blocks - b)), op);
}

uint64_t content_seed(std::string_view file_name)
{
	uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a
	for (unsigned char c : file_name)
		h = (h ^ c) * 0x100000001b3ULL;
	return h;
}

void fill_content(uint64_t seed, uint64_t offset, std::span<char> out)
{
	// Word w of the file is splitmix64 output number w of the stream seeded with `seed`: random access.
	size_t i = 0;
	while (i < out.size()) {
		uint64_t pos = offset + i, word = pos / 8;
		Rng r(seed + word * 0x9e3779b97f4a7c15ULL);
		uint64_t v = r.next();
		size_t skip = pos % 8, n = std::min<size_t>(8 - skip, out.size() - i);
		std::memcpy(out.data() + i, reinterpret_cast<const char *>(&v) + skip, n);
		i += n;
	}
}

} // namespace llmcache::workload
