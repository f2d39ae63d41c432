// SPDX-License-Identifier: MIT
// The trace-replay engine. Loading streams the trace's records into one Request per 4 KiB block; a replay is
// a tight loop over that vector with one virtual call (Policy::access) per request and no allocation; a
// sweep hands (policy, capacity) runs to worker threads, each with its own policy instance, so the results
// are the same whatever the number of threads.
#include "sim/replay.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "util/flat_map.hpp"
#include "util/units.hpp"

namespace llmcache::sim {

namespace {

constexpr uint64_t block_limit = (uint64_t(1) << 40) - 1; // block numbers below this fit request_key()
constexpr uint64_t file_limit = (uint64_t(1) << 24) - 1;  // and file numbers below this

// Room for n requests at once, in transparent huge pages where the kernel gives them (a 10 M-access trace
// is 160 MB: 80 page faults instead of 40,000, and no copy as the vector grows).
void reserve_huge(std::vector<Request> &v, uint64_t n)
{
	v.reserve(n);
	constexpr uintptr_t HUGE = uintptr_t(2) << 20;
	const uintptr_t from = (reinterpret_cast<uintptr_t>(v.data()) + HUGE - 1) & ~(HUGE - 1);
	const uintptr_t to = (reinterpret_cast<uintptr_t>(v.data() + n)) & ~(HUGE - 1);
	if (from < to)
		madvise(reinterpret_cast<void *>(from), to - from, MADV_HUGEPAGE);
}

} // namespace

Trace load_trace(trace::Reader &reader, const std::function<void(uint64_t records)> &on_records)
{
	Trace t;
	// The footprint: a bitmap of 64-block words keyed by key >> 6, with the current word kept aside so that
	// a sequential run costs one lookup per 64 blocks.
	util::FlatMap<uint64_t> seen(uint64_t(1) << 16);
	uint64_t word_key = util::FlatMap<uint64_t>::empty_key, word = 0;
	std::map<trace::FileKey, uint32_t> numbers;
	trace::FileKey last{~0u, ~uint64_t(0)};
	uint32_t file = 0;
	if (const uint64_t n = reader.block_accesses_hint())
		reserve_huge(t.requests, n);
	llmcache_access a;
	while (reader.next(a)) {
		t.records++;
		if (on_records && (t.records & ((uint64_t(1) << 20) - 1)) == 0)
			on_records(t.records);
		if (a.nr_blocks == 0)
			continue;
		trace::FileKey fk{a.dev, a.inode};
		if (fk != last) {
			auto [it, added] = numbers.try_emplace(fk, uint32_t(t.files.size()));
			if (added) {
				if (t.files.size() >= file_limit)
					throw std::runtime_error("record " + std::to_string(t.records) + ": more than " +
								 std::to_string(file_limit) +
								 " distinct files; the simulator numbers files in 24 bits");
				t.files.push_back(fk);
			}
			last = fk;
			file = it->second;
		}
		if (a.first_block >= block_limit || a.nr_blocks > block_limit - a.first_block)
			throw std::runtime_error("record " + std::to_string(t.records) + ": blocks " +
						 std::to_string(a.first_block) + "+" + std::to_string(a.nr_blocks) +
						 " exceed the simulator's 40-bit block numbers (4 PiB per file)");
		if (a.time_ns >> 62)
			throw std::runtime_error("record " + std::to_string(t.records) + ": time " + std::to_string(a.time_ns) +
						 " ns is past the simulator's 62-bit times (146 years)");
		const bool fault = a.op == LLMCACHE_OP_MMAP_FAULT, write = a.op == LLMCACHE_OP_WRITE;
		for (uint64_t b = a.first_block, end = a.first_block + a.nr_blocks; b < end; b++) {
			uint64_t key = request_key(file, b);
			t.requests.push_back(Request{key, a.time_ns, fault, write});
			if (key >> 6 != word_key) {
				if (word_key != util::FlatMap<uint64_t>::empty_key)
					seen.put(word_key, word);
				word_key = key >> 6;
				const uint64_t *w = seen.find(word_key);
				word = w ? *w : 0;
			}
			const uint64_t bit = uint64_t(1) << (key & 63);
			t.footprint += !(word & bit);
			word |= bit;
		}
	}
	const trace::PathMap &paths = reader.paths();
	t.paths.reserve(t.files.size());
	for (const auto &fk : t.files) {
		auto it = paths.find(fk);
		t.paths.push_back(it == paths.end() ? std::string() : it->second);
	}
	t.notes = reader.notes();
	t.producer = reader.producer();
	return t;
}

RunResult run_policy(Policy &policy, std::span<const Request> requests, std::atomic<uint64_t> *progress, bool by_file)
{
	policy.prepare(requests);
	RunResult r;
	const Request *req = requests.data();
	const size_t n = requests.size();
	if (by_file) {
		uint32_t files = 0;
		for (const Request &q : requests)
			files = std::max(files, key_file(q.key) + 1);
		r.file_hits.assign(files, 0);
	}
	for (size_t i = 0; i < n;) {
		const size_t start = i, end = std::min(n, i + progress_stride);
		uint64_t hits = 0;
		if (by_file) {
			for (; i < end; i++)
				if (policy.access(req[i])) {
					hits++;
					r.file_hits[key_file(req[i].key)]++;
				}
		}
		for (; i < end; i++)
			hits += policy.access(req[i]);
		r.hits += hits;
		if (progress)
			progress->fetch_add(end - start, std::memory_order_relaxed);
	}
	r.misses = n - r.hits;
	if (const Policy::ClassStats *cs = policy.class_stats()) {
		r.has_classes = true;
		r.classes = *cs;
	}
	return r;
}

namespace {

std::string_view trim(std::string_view s)
{
	while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
		s.remove_prefix(1);
	while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
		s.remove_suffix(1);
	return s;
}

[[noreturn]] void bad_size(std::string_view text, const std::string &why)
{
	throw std::invalid_argument("cache size '" + std::string(text) + "': " + why);
}

} // namespace

CacheSize parse_cache_size(std::string_view text)
{
	const std::string_view s = trim(text);
	if (s.empty())
		bad_size(text, "empty; give a percentage of the footprint (10%), a size (64MiB) or blocks (1000blocks)");
	if (s.front() == '-')
		bad_size(text, "must be positive");
	CacheSize cs{CacheSize::Kind::blocks, 0, std::string(s)};
	if (s.back() == '%') {
		const std::string num(trim(s.substr(0, s.size() - 1)));
		char *end = nullptr;
		const double v = num.empty() ? NAN : std::strtod(num.c_str(), &end);
		if (num.empty() || *end || !std::isfinite(v))
			bad_size(text, "'" + num + "' is not a number");
		cs.kind = CacheSize::Kind::fraction;
		cs.value = v / 100.0;
	} else if (std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
		if (s.size() > 19)
			bad_size(text, "too many blocks");
		cs.value = double(std::stoull(std::string(s)));
	} else if (std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; })) {
		bad_size(text, "a plain number counts 4 KiB blocks and must be whole; add a unit (MiB) or % for others");
	} else {
		try {
			cs.value = double(units::parse_bytes(s));
		} catch (const std::invalid_argument &e) {
			bad_size(text, std::string(e.what()) + "; give a size with a unit (64MiB), a percentage (10%) or Nblocks");
		}
		cs.kind = CacheSize::Kind::bytes;
	}
	if (!(cs.value > 0))
		bad_size(text, "a cache needs at least one block");
	return cs;
}

std::vector<CacheSize> parse_cache_sizes(std::string_view list)
{
	std::vector<CacheSize> out;
	for (size_t pos = 0;;) {
		const size_t comma = list.find(',', pos);
		const std::string_view item = list.substr(pos, comma == std::string_view::npos ? list.npos : comma - pos);
		if (trim(item).empty())
			throw std::invalid_argument("cache sizes '" + std::string(list) +
						    "': empty item; separate sizes with single commas, e.g. 10%,20%");
		out.push_back(parse_cache_size(item));
		if (comma == std::string_view::npos)
			return out;
		pos = comma + 1;
	}
}

std::vector<CacheSize> default_cache_sizes()
{
	std::vector<CacheSize> out;
	for (int p = 10; p <= 100; p += 10)
		out.push_back(CacheSize{CacheSize::Kind::fraction, p / 100.0, std::to_string(p) + "%"});
	return out;
}

uint64_t resolve_cache_size(const CacheSize &size, uint64_t footprint)
{
	double blocks = size.value;
	if (size.kind == CacheSize::Kind::fraction)
		blocks = size.value * double(footprint);
	else if (size.kind == CacheSize::Kind::bytes)
		blocks = size.value / double(LLMCACHE_BLOCK_SIZE);
	return std::max<uint64_t>(1, uint64_t(std::llround(blocks)));
}

std::vector<RunResult> sweep(std::span<const Request> requests, const std::vector<std::string> &policies,
			     const std::vector<uint64_t> &capacities, const PolicyFactory &factory,
			     const SweepOptions &opt)
{
	const size_t ncap = capacities.size(), ntasks = policies.size() * ncap;
	std::vector<RunResult> results(ntasks);
	if (ntasks == 0)
		return results;
	unsigned jobs = opt.jobs ? opt.jobs : std::max(1u, std::thread::hardware_concurrency());
	jobs = unsigned(std::min<size_t>(jobs, ntasks));

	std::atomic<size_t> next{0};
	std::atomic<uint64_t> done{0};
	std::atomic<bool> failed{false};
	std::exception_ptr error;
	std::mutex mutex;
	std::condition_variable cv;
	unsigned running = jobs;

	auto worker = [&] {
		for (size_t t; !failed.load(std::memory_order_relaxed) && (t = next.fetch_add(1)) < ntasks;) {
			try {
				std::unique_ptr<Policy> p = factory(policies[t / ncap], capacities[t % ncap], opt.policy);
				results[t] = run_policy(*p, requests, &done, opt.by_file);
			} catch (...) {
				std::lock_guard lock(mutex);
				if (!error)
					error = std::current_exception();
				failed = true;
			}
		}
		std::lock_guard lock(mutex);
		running--;
		cv.notify_all();
	};

	std::vector<std::thread> threads;
	threads.reserve(jobs);
	for (unsigned i = 0; i < jobs; i++)
		threads.emplace_back(worker);
	const uint64_t total = uint64_t(requests.size()) * ntasks;
	{
		std::unique_lock lock(mutex);
		while (running) {
			cv.wait_for(lock, std::chrono::milliseconds(opt.progress_interval_ms));
			if (opt.on_progress && running) {
				lock.unlock();
				opt.on_progress(done.load(std::memory_order_relaxed), total);
				lock.lock();
			}
		}
	}
	for (auto &th : threads)
		th.join();
	if (error)
		std::rethrow_exception(error);
	if (opt.on_progress)
		opt.on_progress(done.load(), total);
	return results;
}

} // namespace llmcache::sim
