// SPDX-License-Identifier: MIT
/*
 * The page-cache policy in userspace: llmcached --mode=bpf. File accesses (from the BPF feed, or any
 * caller) go through the same policy core as in llmcache.ko (libllmcache/core); the manager enforces its
 * decisions with what userspace has:
 * - loops are pinned by mlock() of the daemon's own mapping of each managed file (pinned_file.hpp),
 *   following llc_pin_plan() within the budget: loops by increasing period, each from its lowest block;
 * - finished scans (SEQ sequences not touched for scan_idle, llc_plan_scan_finished) are dropped
 *   (scan_drop.hpp): posix_fadvise(DONTNEED), but not for mapped files, whose loops look like one scan;
 * - so are the unpinned loop blocks the engine has passed, when its memory cgroup cannot hold the loop
 *   (they would be evicted before their next use anyway; llc_plan_drop_tails, llc_plan_tail_drops), with
 *   MADV_PAGEOUT for mappers;
 * - the budget is capped below the memory limit of the engines' cgroup (memcg.hpp), since nothing gives
 *   mlocked pages back under pressure the way the module's shrinker does: by what the engine uses besides
 *   the pins, measured (its anonymous memory, its mapped code and libraries), and the room of its reads:
 *   three read-ahead windows for a read()-based engine (llc_plan_read_budget), the stream's room for an
 *   mmap engine (llc_plan_mapped_budget);
 * - a file an mmap engine maps and its cgroup cannot hold is pinned as its head, from the first fault,
 *   read in by a child process in the engine's memory cgroup in PMD-size folios (prefetcher.hpp), and
 *   a window after the engine's position (llc_plan_position), wrapping round to the next iteration
 *   (llc_plan_prefetch), is read in ahead of it where the stream has the room (llc_plan_read_ahead),
 *   and what it passed is paged out
 *   (Documentation/design/planner.md);
 * - the code an mmap engine keeps using (its binary and libraries, present in its page tables once its
 *   loop runs) is locked too, within the room the budget leaves for it (engine_code.hpp);
 * - when every engine has exited, the pins stay within the cap of its cgroup, for the next engine.
 * Managed files are the ones named at start (manage) and, in automatic mode, every file the feed names
 * (the feed applies the pid / cgroup and minimum-size filters). tick() applies the plan and the drops;
 * drop_tails() and prefetch(), called more often, only the loop tails and the read-ahead;
 * status() renders the state as "key value" lines for llmcachectl (Documentation/userspace-mode.md).
 * Not thread-safe: the caller serialises.
 */
#pragma once
#include "pagecache/engine_code.hpp"
#include "pagecache/memcg.hpp"
#include "pagecache/pinned_file.hpp"
#include "pagecache/prefetcher.hpp"
#include "util/flat_map.hpp"

extern "C" {
#include "core/core.h"
#include "core/plan.h"
}

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmcache::pagecache {

struct Options {
	uint64_t pin_budget = 256ull << 20;   // bytes
	uint64_t hot_reserve = 4ull << 20;    // bytes (reported; HOT pages are left to the kernel)
	uint64_t bw = 100'000'000;            // storage bandwidth, bytes/s (sizing rule)
	uint64_t t_ns = 100'000'000;          // allowed fetch delay per iteration (sizing rule)
	uint64_t scan_idle_ns = 1'000'000'000; // a SEQ untouched this long is a finished scan
	uint64_t memcg_headroom = 16ull << 20; // budget cap = engine's memcg limit - this; at least 3 readahead
					      // windows; for mmap engines the margin above what they use
	bool prefetch = true;                 // read mmap engines' unpinned loop blocks ahead of them
	bool automatic = false;               // manage every file the feed names
	uint64_t min_size = 0;                // automatic mode: smaller files are left alone
	std::vector<std::string> manage;      // files managed from the start
};

// What the access source reports about itself, for status().
struct FeedInfo {
	std::string hooks;
	uint64_t lost = 0, inserted = 0, evicted = 0;
};

class Manager {
public:
	static int open(const Options &o, std::unique_ptr<Manager> &out, std::string &err);
	~Manager();

	// The feed names a file before its first access. dev is st_dev in the trace's encoding.
	void on_name(uint32_t dev, uint64_t inode, const std::string &path);
	void on_access(const llmcache_access &a);
	// Apply the pin plan and drop finished scans. now_ns is CLOCK_MONOTONIC, as in the records.
	void tick(uint64_t now_ns);
	// Drop the passed loop tails only (tick() does too). Between ticks, while tails_pending(): a fast
	// engine passes more than its cgroup's headroom in one tick.
	void drop_tails();
	bool tails_pending() const;
	// Ask for the read-ahead of the mmap engines' loops, from where the engines are now.
	void prefetch();
	bool prefetching() const { return prefetcher_ != nullptr; }
	void release(); // unlock every pin

	std::string status(const FeedInfo &feed) const;
	uint64_t pinned_blocks() const;
	uint64_t engine_code_locked() const; // blocks of the engines' code locked
	uint64_t budget_blocks(uint64_t configured) const; // a pin budget after the memcg cap
	uint64_t budget_blocks() const { return budget_blocks(o_.pin_budget); }
	std::function<void(const std::string &)> log = [](const std::string &) {};

private:
	static constexpr uint32_t TAIL_RUNS = 16; // per file; accesses beyond them are left to the kernel's reclaim
	struct File {
		std::unique_ptr<PinnedFile> pf;
		// Runs of LOOP blocks accessed since the last drop_tails() and in the call before, not dropped yet.
		std::array<llc_span, TAIL_RUNS> recent_runs{}, aged_runs{};
		uint32_t n_recent = 0, n_aged = 0;
		uint64_t accesses = 0, by_class[LLMCACHE_NR_CLASSES] = {};
		uint64_t dropped = 0, tail = 0, cold = 0; // blocks: scans dropped, loop tails dropped, made cold
		std::vector<uint32_t> mappers; // live pids that faulted it through mmap
		bool mapped = false;           // engines map it (kept after they exit)
		bool looping = false;          // it has a LOOP sequence (tick())
		bool head = false; // an mmap engine's file its cgroup cannot hold: the pins are its head
		uint64_t head_blocks = 0;
		// The engine's position (llc_plan_position), where the last window ended (llc_plan_prefetch).
		uint64_t position = UINT64_MAX, asked_to = UINT64_MAX;
		uint64_t populated_to = 0; // the head's blocks below this were asked to be read in
		uint64_t dropped_to = UINT64_MAX; // where the last drop of what the engine passed ended
		uint32_t iterations = 0;   // a head file's passes, seen where the engine's position goes round
		uint64_t iter_start_ns = 0, period_ns = 0;
	};
	struct SeqState {
		uint64_t created_vt = 0, last_ns = 0, dropped_to = 0; // dropped_to: scan blocks below it are done
		bool written = false;                                 // a write brought blocks of it: never dropped
	};
	Manager() = default;
	// Manage path; with expect_id (automatic mode), only if it is still that file and not too small.
	int add_file(const std::string &path, std::string &err, uint64_t expect_id = 0);
	void note_pid(uint32_t pid);
	uint64_t window_bytes() const; // the read-ahead window of an mmap engine
	bool any_mapped() const;
	uint64_t mapped_bytes() const; // of the files engines map
	uint64_t stream_unit() const;
	uint64_t kept_code() const;
	bool mapped_files_fit() const;
	void measure_engine(uint64_t now_ns); // usage_ and code_
	void lock_engine_code(const FileIds &managed);
	void engines_exited();
	std::vector<std::vector<Range>> plan_heads(uint64_t budget);
	uint64_t margin() const;      // what the engines' cgroup keeps free besides their own memory
	uint64_t shared_room() const; // what it leaves to the pins and the stream together
	bool start_prefetcher();
	void drop_ranges(File &f, const std::vector<Range> &ranges, uint64_t &counter);
	const std::vector<FileMapping> *mappings(uint32_t pid);
	const std::vector<FileMapping> *mappings(uint32_t pid, dev_t dev, uint64_t inode);
	void forget_mappings(uint32_t pid);
	void drop_scans(uint64_t now_ns);
	void drop_passed(File &f);

	Options o_;
	void *mem_ = nullptr;
	llc_core *core_ = nullptr;
	std::vector<File> files_;                // core file key = index + 1
	llmcache::util::FlatMap<uint32_t> by_id_{64}; // (dev, inode) -> key; 0: not managed
	std::vector<SeqState> seqs_;
	std::vector<std::vector<Range>> planned_; // the last tick's pin plan, per file
	std::vector<uint32_t> pids_;             // engines seen, for the memcg cap
	// Their file mappings as last read from /proc/PID/maps, which the drops of passed blocks look up
	// every 10 ms and the engine code's lock and measure every 100 ms: read again when MAPS_TTL_NS old or
	// when one lacks the file asked for, or process_madvise finds a range gone (reading maps costs the
	// kernel a walk of every mapping's path).
	struct PidMappings {
		uint32_t pid;
		uint64_t read_ns;
		std::vector<FileMapping> maps;
	};
	static constexpr uint64_t MAPS_TTL_NS = 1'000'000'000;
	std::vector<PidMappings> mappings_;
	uint64_t readahead_ = 0; // the largest readahead window of the managed files' devices
	uint64_t memcg_limit_ = UINT64_MAX, released_ = 0, cold_denied_ = 0, last_prune_ns_ = 0;
	// The pins given up to pages faulted again within two periods of the longest-period loop holding
	// pins (llc_plan_reuse_room), that period and the loops the pins hold as of the last tick
	// (llc_plan_pinned_loops), and what the last tick gave up.
	llc_reuse_room reuse_room_{};
	uint64_t reuse_period_vt_ = 0, reuse_given_ = 0;
	std::vector<llc_pin_range> reuse_loops_;
	std::string memcg_dir_;           // the engines' memory cgroup (the most limited one)
	MemcgUsage usage_;                // its last reading
	uint64_t anon_this_second_ = 0, anon_last_second_ = 0; // the most anonymous memory it had in each
	static constexpr uint32_t CODE_READINGS = 5;
	uint64_t code_ = 0, last_measure_ns_ = 0; // the engines' mapped code and libraries, bytes
	uint64_t code_readings_[CODE_READINGS] = {}, code_at_ = 0; // the last readings, one a second
	struct CodeFile { // a file of the engines' own code (engine_code.hpp)
		std::unique_ptr<PinnedFile> pf;
		std::vector<Range> want; // every block the engines had present since their loop began
	};
	std::vector<CodeFile> code_files_;
	// How often the engines' page tables are looked at for code to lock: a page they fault back costs a
	// read-around window, and reclaim unmaps what they touch once a token within a second.
	static constexpr uint64_t CODE_SCAN_NS = 100'000'000;
	uint64_t last_code_scan_ns_ = 0;
	std::unique_ptr<Prefetcher> prefetcher_;
	bool prefetch_failed_ = false;
	uint32_t laps_ = 0; // the laps of head files' loops since the engines started
	uint32_t code_paged_out_at_ = 0; // the lap at which the engines' code was paged out (0: not yet)
	bool warned_mlock_ = false, warned_cold_ = false;
};

} // namespace llmcache::pagecache
