// SPDX-License-Identifier: MIT
/*
 * The storage pool: spilled KV slabs on a block-device node (a SmartSSD's NVMe namespace, any
 * /dev/nvme*, /dev/loop*) or a regular file, read and written with io_uring and O_DIRECT through
 * registered buffers, queue_depth requests in flight so the device stays busy. Slots of
 * slab_bytes are handed out from a free list; a write that fails (device full, I/O error) gives its
 * slot back and reports, so the caller keeps the data it still holds. Every read is verified
 * (slab.hpp) before the caller sees it.
 */
#pragma once
#include "kvio/slab.hpp"
#include "kvio/uring.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llmcache::kv {

struct StorageConfig {
	std::string path;
	uint64_t offset = 0;	 // first byte of the device this pool uses (a multiple of 4096)
	uint64_t capacity = 0;	 // bytes of the device to use from offset; 0 = all the rest
	uint64_t slab_bytes = 0; // multiple of SLAB_ALIGN
	unsigned queue_depth = 32;
	bool use_io_uring = true; // false: synchronous pread/pwrite (also the fallback when io_uring is refused)
};

// One slab to write: its identity and its payload as up to two pieces laid end to end. When slab is
// set, the payload (a, a_len) already sits at the start of that SlabBuffer of the pool's slab size: the
// pool seals the header in place (the slab's last 64 bytes) and writes the buffer itself, without
// copying it. crc, when crc_known, is the
// payload's CRC32C computed by the caller while the data was hot (it is not recomputed).
struct SlabWrite {
	SlabId id;
	uint32_t n_tokens;
	const void *a;
	size_t a_len;
	const void *b;
	size_t b_len;
	uint8_t *slab = nullptr;
	uint32_t crc = 0;
	bool crc_known = false;
};

// Memory laid out as a slab (SLAB_ALIGN-aligned, payload, zero tail, header room at the end): the CPU
// pool keeps its pages in these so that a spill writes them straight to the device (O_DIRECT needs the
// alignment). Carved from huge-page regions (io_memory.hpp).
class SlabBuffer {
public:
	SlabBuffer() = default;
	SlabBuffer(uint64_t slab_bytes, uint64_t payload_bytes); // tail and header room zeroed
	uint8_t *get() const { return base_.get(); }		 // the payload, at the start of the slab
	uint8_t *slab() const { return base_.get(); }
	explicit operator bool() const { return base_ != nullptr; }
	void reset() { base_.reset(); }

private:
	struct Free {
		uint64_t slab_bytes; // value-initialized (0) in an empty SlabBuffer
		void operator()(uint8_t *p) const;
	};
	std::unique_ptr<uint8_t, Free> base_;
};

// One read: a whole slab (count 0), checked by its header and payload CRC32C, or a run of blocks
// [first, first + count) of it, checked against the slab's block table (BlockCrcs, held by the
// caller; block_crcs is the whole table). dst, for a whole slab: the payload is copied there while
// it is verified (one pass over the data); the caller uses dst only if the read succeeded.
struct SlabRead {
	SlabId id;
	uint64_t offset;
	const uint32_t *block_crcs = nullptr;
	uint32_t first = 0, count = 0;
	uint8_t *dst = nullptr;
};

struct StorageStats {
	uint64_t slabs_written = 0, slabs_read = 0, bytes_written = 0, bytes_read = 0, errors = 0;
	uint64_t runs_read = 0; // partial reads (runs of blocks); their bytes are in bytes_read
	uint64_t write_ns = 0, read_ns = 0; // wall time inside write() and read(): I/O plus checksums
};

class StoragePool {
public:
	static int open(const StorageConfig &cfg, std::unique_ptr<StoragePool> &out, std::string &err);
	~StoragePool();

	// Writes every slab. result[i] is the slab's byte offset, or -errno if that slab was not stored
	// (its slot is free again). Returns 0 if all were stored, else the first error (message in err).
	int write(std::span<const SlabWrite> slabs, std::vector<int64_t> &result, std::string &err);
	// Reads and verifies the slabs or runs of blocks; fn(i, data) sees each intact one in completion
	// order: a whole slab from its start (the payload), a run from slab byte first * SLAB_ALIGN on. Returns 0,
	// the first error of a read or a verification (-EBADMSG), or fn's error.
	int read(std::span<const SlabRead> slabs, const std::function<int(size_t, const uint8_t *)> &fn,
		 std::string &err);
	void release(uint64_t offset);

	const std::string &path() const { return cfg_.path; }
	uint64_t slab_bytes() const { return cfg_.slab_bytes; }
	uint64_t slots() const { return slots_; }
	uint64_t slots_free() const { return free_.size(); }
	uint64_t pool_id() const { return pool_id_; }
	const StorageStats &stats() const { return stats_; }
	const std::string &note() const { return note_; } // why the pool runs without io_uring, if it does

private:
	StoragePool() = default;
	using Prep = std::function<void(size_t item, unsigned buf, io_uring_sqe *)>;
	using Done = std::function<int(size_t item, unsigned buf, int res)>;
	int run(size_t n, const Prep &prep, const Done &done);
	int setup_ring(const char *&step); // (re)creates the ring for the calling thread, buffers and file registered
	// Registered I/O buffers: queue_depth in flight and as many completed, waiting to be handled.
	unsigned buffer_count() const { return 2 * cfg_.queue_depth; }

	StorageConfig cfg_;
	int fd_ = -1;
	uint64_t slots_ = 0, pool_id_ = 0, seq_ = 0;
	std::vector<uint64_t> free_; // free slot indices, lowest last
	uint8_t *bufs_ = nullptr;
	size_t bufs_len_ = 0;
	Uring ring_;
	bool sync_ = false;
	std::string note_;
	StorageStats stats_;
};

} // namespace llmcache::kv
