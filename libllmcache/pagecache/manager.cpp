// SPDX-License-Identifier: MIT
#include "pagecache/manager.hpp"

#include "pagecache/scan_drop.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

namespace llmcache::pagecache {

namespace {

constexpr uint64_t BS = LLMCACHE_BLOCK_SIZE;
constexpr uint32_t PLAN_MAX = 256, PIDS_MAX = 64;
constexpr uint64_t FOLIO_BLOCKS = 512; // a PMD-size folio (2 MiB)


// Paths are the last value of a line; spaces and newlines in them are escaped as %20, %0a (and % as %25).
std::string escape(const std::string &s)
{
	std::string out;
	for (char c : s)
		out += c == ' ' ? "%20" : c == '\n' ? "%0a" : c == '%' ? "%25" : std::string(1, c);
	return out;
}

uint64_t vm_locked_bytes()
{
	std::ifstream in("/proc/self/status");
	for (std::string line; std::getline(in, line);)
		if (line.rfind("VmLck:", 0) == 0)
			return std::stoull(line.substr(6)) * 1024;
	return 0;
}

} // namespace

int Manager::open(const Options &o, std::unique_ptr<Manager> &out, std::string &err)
{
	std::unique_ptr<Manager> m(new Manager());
	m->o_ = o;
	llc_config cfg;
	llc_config_default(&cfg);
	const uint64_t size = llc_core_size(&cfg);
	m->mem_ = std::aligned_alloc(8, (size + 7) & ~uint64_t(7));
	if (!m->mem_ || !(m->core_ = llc_core_init(m->mem_, size, &cfg)))
		return err = "cannot allocate the policy core", -ENOMEM;
	m->seqs_.resize(cfg.max_seqs + 1);
	for (const std::string &p : o.manage)
		if (int r = m->add_file(p, err); r < 0)
			return r;
	out = std::move(m);
	return 0;
}

Manager::~Manager()
{
	files_.clear();
	std::free(mem_);
}

int Manager::add_file(const std::string &path, std::string &err, uint64_t expect_id)
{
	std::unique_ptr<PinnedFile> pf;
	if (int r = PinnedFile::open(path, pf, err); r < 0)
		return r;
	const uint64_t id = llmcache_file_key(llmcache_encode_dev(major(pf->dev()), minor(pf->dev())), pf->inode());
	if (expect_id && id != expect_id)
		return err = "it was replaced after it was read", -ESTALE;
	if (expect_id && pf->blocks() * BS < o_.min_size)
		return 0; // automatic mode leaves small files alone
	if (const uint32_t *k = by_id_.find(id); k && *k)
		return 0; // the same file under another name
	readahead_ = std::max(readahead_, readahead_bytes(pf->dev()));
	files_.emplace_back();
	files_.back().pf = std::move(pf);
	by_id_.put(id, uint32_t(files_.size()));
	log("managing " + path + " (" + std::to_string(files_.back().pf->blocks()) + " blocks)");
	return 0;
}

void Manager::on_name(uint32_t dev, uint64_t inode, const std::string &path)
{
	const uint64_t id = llmcache_file_key(dev, inode);
	if (by_id_.find(id) || !o_.automatic)
		return;
	by_id_.put(id, 0); // not managed unless add_file() takes it
	std::string err;
	if (add_file(path, err, id) < 0)
		log("not managing " + path + ": " + err);
}

void Manager::note_pid(uint32_t pid)
{
	if (std::find(pids_.begin(), pids_.end(), pid) != pids_.end() || pids_.size() >= PIDS_MAX)
		return;
	pids_.push_back(pid);
	const std::string dir = memcg_dir(pid_t(pid));
	const MemcgUsage u = memcg_usage(dir);
	if (u.limit < memcg_limit_) {
		memcg_limit_ = u.limit;
		memcg_dir_ = dir;
		usage_ = u;
		anon_this_second_ = std::max(anon_this_second_, u.anon);
		log("pid " + std::to_string(pid) + " runs in a memory cgroup limited to " + std::to_string(u.limit >> 20) +
		    " MiB: pins are capped at " + std::to_string(budget_blocks() * BS >> 20) + " MiB");
	}
}

void Manager::on_access(const llmcache_access &a)
{
	const uint32_t *k = by_id_.find(llmcache_file_key(a.dev, a.inode));
	if (!k || !*k || a.op == LLMCACHE_OP_PATH || (prefetcher_ && pid_t(a.pid) == prefetcher_->pid()))
		return; // the prefetcher's reads are the daemon's own, not the engine's
	File &f = files_[*k - 1];
	note_pid(a.pid);
	f.mapped |= a.op == LLMCACHE_OP_MMAP_FAULT;
	const uint64_t was = f.position;
	const llc_span head{0, f.head_blocks};
	if (f.head)
		f.position = llc_plan_position(0, f.pf->blocks(), &head, 1, f.position, a.first_block + a.nr_blocks - 1,
					       window_bytes() / BS);
	if (f.head && was != UINT64_MAX && f.position < was && a.time_ns > f.iter_start_ns) {
		// Round the end, or a restart: an iteration. (Records of different CPUs can arrive out of order.)
		f.period_ns = f.iter_start_ns ? a.time_ns - f.iter_start_ns : 0;
		f.iter_start_ns = a.time_ns;
		f.iterations++;
		laps_++;
	}
	if (a.op == LLMCACHE_OP_MMAP_FAULT && f.mappers.size() < PIDS_MAX &&
	    std::find(f.mappers.begin(), f.mappers.end(), a.pid) == f.mappers.end())
		f.mappers.push_back(a.pid);
	// A fault's own page (a one-block fault record; fault-around's cover a window) that is not a loop's nor
	// in one the pins hold, and came back within two periods of the longest-period loop holding pins,
	// takes one of its pins.
	const bool fault = a.op == LLMCACHE_OP_MMAP_FAULT && a.nr_blocks == 1;
	for (uint64_t b = a.first_block; b < a.first_block + a.nr_blocks; b++) {
		const llc_verdict v = llc_access_req(core_, *k, b, a.nr_blocks, a.time_ns); // one access of the record
		if (fault && llc_plan_reuse_counts(&v, reuse_period_vt_, reuse_loops_.data(), uint32_t(reuse_loops_.size()),
						   *k, b))
			llc_plan_reuse_room(&reuse_room_, llc_vtime(core_), reuse_period_vt_, 1);
		if (v.cls == LLMCACHE_CLASS_LOOP && !f.head && memcg_limit_ != UINT64_MAX) // else tails are kept
			llc_plan_note_run(f.recent_runs.data(), &f.n_recent, f.recent_runs.size(), b, 1);
		f.accesses++;
		f.by_class[v.cls]++;
		SeqState &s = seqs_[v.seq];
		const uint64_t created = llc_seq_get(core_, v.seq)->created_vt;
		if (s.created_vt != created)
			s = {created}; // a recycled sequence id
		s.last_ns = a.time_ns;
		s.written |= a.op == LLMCACHE_OP_WRITE;
	}
}

bool Manager::any_mapped() const
{
	return std::any_of(files_.begin(), files_.end(), [](const File &f) { return f.mapped; });
}

uint64_t Manager::mapped_bytes() const
{
	uint64_t bytes = 0;
	for (const File &f : files_)
		if (f.mapped)
			bytes += f.pf->blocks() * BS;
	return bytes;
}

// The read-ahead of the managed files' devices, LLC_PLAN_STREAM_UNIT at least.
uint64_t Manager::stream_unit() const
{
	return std::max<uint64_t>(readahead_, LLC_PLAN_STREAM_UNIT);
}

// What the engines keep using of the code they mapped: what they have locked, or LLC_PLAN_CODE_KEPT
// before that. The rest they touched at start-up only, and it goes first when the room is needed, as it
// would without llmcache.
uint64_t Manager::kept_code() const
{
	const uint64_t locked = engine_code_locked() * BS;
	return locked ? locked : LLC_PLAN_CODE_KEPT;
}

// Whether the mapped files fit in the engines' cgroup beside their anonymous memory and kept code.
bool Manager::mapped_files_fit() const
{
	return llc_plan_fits(memcg_limit_, std::max(anon_this_second_, anon_last_second_) + std::min(code_, kept_code()),
			     mapped_bytes());
}

// What is read ahead of an mmap engine: four stream units (the kernel's read-around of a fault is one,
// centred on it), an eighth of the engine's memory limit at most. With the two units the drop of passed
// blocks lags, that is six; the stream's room holds eight (llc_plan_stream_room), for what a fault reads
// around before the window and the reads in flight.
uint64_t Manager::window_bytes() const
{
	return llc_plan_window(stream_unit(), memcg_limit_);
}

// What the engines' cgroup keeps free besides their own memory. Until a mapped file has run a loop, since
// the engines started, an engine may still be allocating its context: an eighth of the limit more is kept
// for that (a 512-token context and its compute buffers took 60 MiB of 650). The pins an exited engine
// leaves are sized so too, or the next one would start in what they leave.
uint64_t Manager::margin() const
{
	const bool starting = !laps_ || std::any_of(files_.begin(), files_.end(), [](const File &f) {
		return f.mapped && !f.iterations;
	});
	return std::max(o_.memcg_headroom, 2 * readahead_) + (starting ? memcg_limit_ / 8 : 0);
}

// What the engines' cgroup leaves to the pins and the stream together.
uint64_t Manager::shared_room() const
{
	const uint64_t engine = std::max(anon_this_second_, anon_last_second_) + code_ + margin();
	return memcg_limit_ > engine ? memcg_limit_ - engine : 0;
}

uint64_t Manager::budget_blocks(uint64_t configured) const
{
	if (memcg_limit_ == UINT64_MAX)
		return configured / BS;
	const uint64_t anon = std::max(anon_this_second_, anon_last_second_);
	if (any_mapped()) {
		// None when the mapped files fit (the kernel keeps them: pins would only cost the engine CPU
		// time); else the room the stream needs besides the pins holds the window read ahead.
		const llc_memcg_snapshot m{memcg_limit_, anon, code_, 0, margin()};
		return llc_plan_mapped_budget(configured, &m, kept_code(), stream_unit(), mapped_bytes()) / BS;
	}
	const llc_memcg_snapshot m{memcg_limit_, anon, code_, 0, o_.memcg_headroom};
	return llc_plan_read_budget(configured, &m, readahead_) / BS;
}

void Manager::measure_engine(uint64_t now_ns)
{
	if (memcg_dir_.empty())
		return;
	// Every tick: an engine's context can grow by 100 MiB in one. What the budget leaves for it is the
	// most it had in this second and the last, so that an exiting engine's room is not pinned before
	// the next one starts.
	usage_ = memcg_usage(memcg_dir_);
	anon_this_second_ = std::max(anon_this_second_, usage_.anon);
	FileIds managed;
	for (const File &f : files_)
		managed.emplace_back(f.pf->dev(), f.pf->inode());
	if (now_ns - last_code_scan_ns_ >= CODE_SCAN_NS) {
		last_code_scan_ns_ = now_ns;
		lock_engine_code(managed);
		// What is locked of the engines' code is theirs from now on: the budget leaves it room at once,
		// not at the next reading.
		code_ = std::max(code_, engine_code_locked() * BS);
	}
	if (now_ns - last_measure_ns_ < 1'000'000'000)
		return;
	last_measure_ns_ = now_ns;
	anon_last_second_ = anon_this_second_;
	anon_this_second_ = usage_.anon;
	// The most seen in the last CODE_READINGS seconds: under pressure the engine's code is evicted and
	// faulted back in, and a reading taken in between must not hand its room to the pins; but what an
	// engine touched once at start-up (node maps 100 MiB of binary) is not what it keeps using.
	uint64_t code = 0;
	for (uint32_t pid : pids_)
		if (const std::vector<FileMapping> *maps = mappings(pid))
			code += mapped_file_bytes(pid_t(pid), *maps, managed);
	code_readings_[code_at_++ % CODE_READINGS] = code;
	// Locked code is not evicted, and stays mapped: once there is some, the last reading is what the
	// engines keep.
	code_ = std::max(engine_code_locked() ? code : *std::max_element(std::begin(code_readings_), std::end(code_readings_)),
			 engine_code_locked() * BS);
}

// The engines' own code. Once they went round a head file's loop twice since they started, what they
// map of their other files is paged out (what they touched at start-up only would otherwise stay
// present, mapped, as long as nothing needs the room); two laps later, the blocks of these files present
// in their page tables again, what they use, join what is locked, and stay until every engine has exited. An eighth of the limit at most; the budget leaves the
// room already (code_ counts every present page).
void Manager::lock_engine_code(const FileIds &managed)
{
	if (laps_ < 2 || memcg_limit_ == UINT64_MAX || (code_paged_out_at_ && laps_ < code_paged_out_at_ + 2))
		return;
	for (uint32_t pid : pids_) {
		const std::string proc = "/proc/" + std::to_string(pid);
		const std::vector<FileMapping> *maps = mappings(pid);
		if (!maps)
			continue;
		std::vector<FileMapping> code = *maps;
		std::erase_if(code, [&](const FileMapping &m) {
			return m.offset % BS || std::any_of(managed.begin(), managed.end(), [&](const auto &x) {
				       return x.first == m.dev && x.second == m.inode;
			       });
		});
		if (!code_paged_out_at_) {
			cold_mappings(pid_t(pid), code);
			continue;
		}
		const int pagemap = ::open((proc + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
		if (pagemap < 0)
			continue;
		for (const FileMapping &m : code) {
			auto c = std::find_if(code_files_.begin(), code_files_.end(), [&](const CodeFile &x) {
				return x.pf->dev() == m.dev && x.pf->inode() == m.inode;
			});
			if (c == code_files_.end()) {
				char name[64];
				std::snprintf(name, sizeof(name), "/map_files/%lx-%lx", (unsigned long)m.start, (unsigned long)m.end);
				std::unique_ptr<PinnedFile> pf;
				std::string err;
				if (PinnedFile::open(proc + name, pf, err) < 0)
					continue; // unmapped meanwhile, or not a regular file
				code_files_.push_back({std::move(pf), {}});
				c = code_files_.end() - 1;
			}
			std::vector<Range> present;
			if (present_blocks(pagemap, m, present) == 0)
				c->want = union_of(c->want, present);
		}
		::close(pagemap);
	}
	if (!code_paged_out_at_) {
		code_paged_out_at_ = laps_;
		return;
	}
	uint64_t locked = engine_code_locked();
	const uint64_t cap = memcg_limit_ / 8 / BS;
	std::string err;
	for (CodeFile &c : code_files_) {
		const uint64_t before = c.pf->locked();
		c.pf->apply(c.want, cap > locked ? cap - locked : 0, err);
		locked += c.pf->locked() - before;
	}
}

uint64_t Manager::engine_code_locked() const
{
	uint64_t n = 0;
	for (const CodeFile &c : code_files_)
		n += c.pf->locked();
	return n;
}

// The pins stay (a restarted engine maps the head whole at once) and so does the cgroup's cap; what
// followed the engines goes, and so does the prefetcher, which would keep their cgroup alive.
void Manager::engines_exited()
{
	prefetcher_.reset();
	code_files_.clear();
	laps_ = code_paged_out_at_ = 0;
	std::fill(std::begin(code_readings_), std::end(code_readings_), code_);
	for (File &f : files_) // the loop's iterations and period stay, as the core's do
		f.position = f.asked_to = f.dropped_to = UINT64_MAX, f.populated_to = 0, f.iter_start_ns = 0,
		f.n_recent = f.n_aged = 0;
}

uint64_t Manager::pinned_blocks() const
{
	uint64_t n = 0;
	for (const File &f : files_)
		n += f.pf->locked();
	return n;
}

// The heads of the mapped files when the engines' cgroup cannot hold them beside the engines
// (mapped_files_fit(); llc_plan_heads), read in by the prefetcher (in the engines' cgroup, in PMD-size
// folios) as soon as an engine maps the file, before its first pass has filled the cgroup with 4 KiB
// folios.
std::vector<std::vector<Range>> Manager::plan_heads(uint64_t budget)
{
	std::vector<std::vector<Range>> want(files_.size());
	std::vector<llc_pin_range> mapped, heads(files_.size());
	const bool fit = mapped_files_fit();
	for (size_t i = 0; i < files_.size(); i++) {
		files_[i].head = false;
		if (files_[i].mapped && !fit)
			mapped.push_back({i + 1, 0, files_[i].pf->blocks(), 0});
	}
	heads.resize(llc_plan_heads(mapped.data(), uint32_t(mapped.size()), budget, heads.data(), uint32_t(heads.size())));
	for (const llc_pin_range &h : heads) {
		const size_t i = h.file - 1;
		File &f = files_[i];
		f.head = true;
		f.head_blocks = h.count;
		if (!h.count)
			continue;
		want[i] = {Range{0, h.count}};
		if (!o_.prefetch || prefetch_failed_ || f.populated_to >= f.head_blocks)
			continue;
		if (start_prefetcher())
			prefetcher_->read_ahead(uint32_t(i), f.pf->fd(), f.populated_to, f.head_blocks - f.populated_to);
		f.populated_to = f.head_blocks;
	}
	return want;
}

bool Manager::start_prefetcher()
{
	if (prefetcher_)
		return true;
	std::string err;
	if (Prefetcher::start(memcg_dir_, prefetcher_, err) < 0) {
		prefetch_failed_ = true;
		log(err + "; the engines' weights are not read in for them");
		return false;
	}
	log("reading in for the engines of " + memcg_dir_ + ", " + std::to_string(window_bytes() >> 20) + " MiB ahead");
	return true;
}

void Manager::tick(uint64_t now_ns)
{
	if (now_ns - last_prune_ns_ > 1'000'000'000) { // forget engines that exited
		last_prune_ns_ = now_ns;
		const bool had_engines = !pids_.empty();
		std::erase_if(pids_, [](uint32_t p) { return kill(pid_t(p), 0) && errno == ESRCH; });
		for (File &f : files_)
			std::erase_if(f.mappers, [](uint32_t p) { return kill(pid_t(p), 0) && errno == ESRCH; });
		std::erase_if(mappings_, [](const PidMappings &m) { return kill(pid_t(m.pid), 0) && errno == ESRCH; });
		if (had_engines && pids_.empty())
			engines_exited();
	}
	measure_engine(now_ns);
	for (File &f : files_) // which files have a loop, for the sticky pins of mapped files
		f.looping = false;
	for (uint16_t id = llc_first(core_, LLMCACHE_CLASS_LOOP); id; id = llc_next(core_, id))
		if (const llc_seq *q = llc_seq_get(core_, id); q->file >= 1 && q->file <= files_.size())
			files_[q->file - 1].looping = true;
	// Pins: the plan's ranges per file; first release what left it, then lock within what is left. The
	// budget less what the loops give up to the pages faulted again within their periods.
	const uint64_t effective = budget_blocks();
	reuse_given_ = std::min(effective, llc_plan_reuse_room(&reuse_room_, llc_vtime(core_), reuse_period_vt_, 0));
	const uint64_t budget = effective - reuse_given_;
	std::vector<std::vector<Range>> want = plan_heads(budget);
	if (std::all_of(want.begin(), want.end(), [](const std::vector<Range> &w) { return w.empty(); })) {
		llc_pin_range plan[PLAN_MAX];
		const uint32_t n = llc_pin_plan(core_, budget, plan, PLAN_MAX);
		for (uint32_t i = 0; i < n; i++)
			if (plan[i].file >= 1 && plan[i].file <= files_.size())
				want[plan[i].file - 1].push_back({plan[i].first, plan[i].count});
	}
	// The pins of a mapped file that has a loop are sticky where only the pin budget bounds them
	// (llc_plan_pins, as in the module): they stay, and the plan's other blocks take what is left.
	// Under a memory cgroup limit, and for files read with read(), the pins follow the plan exactly.
	std::vector<llc_pin_range> kept, plan;
	for (size_t i = 0; i < files_.size() && memcg_limit_ == UINT64_MAX; i++)
		if (files_[i].mapped && files_[i].looping)
			for (const Range &r : files_[i].pf->locked_runs())
				kept.push_back({i + 1, r.first, r.count, 0});
	for (size_t i = 0; i < files_.size(); i++)
		for (const Range &r : want[i])
			plan.push_back({i + 1, r.first, r.count, 0});
	std::vector<llc_pin_range> pins(2 * kept.size() + plan.size());
	pins.resize(llc_plan_pins(kept.data(), uint32_t(kept.size()), plan.data(), uint32_t(plan.size()), budget,
				  pins.data(), uint32_t(pins.size())));
	std::vector<std::vector<Range>> hold(files_.size());
	for (const llc_pin_range &p : pins)
		hold[p.file - 1].push_back({p.first, p.count});
	reuse_loops_.resize(pins.size());
	reuse_loops_.resize(llc_plan_pinned_loops(core_, pins.data(), uint32_t(pins.size()), PLAN_MAX, reuse_loops_.data(),
						  &reuse_period_vt_));
	std::string err;
	for (size_t i = 0; i < files_.size(); i++) {
		const uint64_t before = files_[i].pf->locked();
		files_[i].pf->apply({}, 0, err, hold[i]); // release what left them first, in every file
		released_ += before - files_[i].pf->locked();
	}
	for (size_t i = 0; i < files_.size(); i++)
		if (files_[i].pf->apply(hold[i], UINT64_MAX, err) < 0 && !warned_mlock_) {
			warned_mlock_ = true;
			log(err);
		}
	drop_scans(now_ns);
	planned_ = std::move(want);
	drop_tails();
	prefetch();
}

// Follow the mmap engines of head files: ask for the part of the window that is new (drop_tails() drops
// what the engine passed), where the stream has the room for it (llc_plan_read_ahead). The window is not
// locked: locking and unlocking it every few milliseconds cost more of the engine's CPU time than the
// few blocks reclaim takes from it (Documentation/design/planner.md, point 4). A read()-based engine
// has the kernel's readahead, which follows its reads already.
void Manager::prefetch()
{
	if (!o_.prefetch || prefetch_failed_ || memcg_limit_ == UINT64_MAX ||
	    !llc_plan_read_ahead(stream_unit(), shared_room()))
		return;
	constexpr uint32_t MAX_SPANS = 8;
	llc_span spans[MAX_SPANS];
	for (size_t i = 0; i < files_.size() && i < Prefetcher::MAX_FILES; i++) {
		File &f = files_[i];
		if (!f.head || !f.head_blocks || f.position == UINT64_MAX || !start_prefetcher())
			continue;
		const llc_span head{0, f.head_blocks};
		const uint32_t n = llc_plan_prefetch(0, f.pf->blocks(), &head, 1, f.position, window_bytes() / BS, &f.asked_to,
						     spans, MAX_SPANS);
		for (uint32_t k = 0; k < n; k++)
			prefetcher_->read_ahead(uint32_t(i), f.pf->fd(), spans[k].first, spans[k].count);
	}
}

void Manager::drop_ranges(File &f, const std::vector<Range> &ranges, uint64_t &counter)
{
	if (ranges.empty())
		return;
	uint64_t blocks = 0;
	for (const Range &r : ranges) {
		blocks += r.count;
		if (!drop_blocks(f.pf->fd(), r.first, r.count))
			counter += r.count;
	}
	for (uint32_t pid : f.mappers) {
		const std::vector<FileMapping> *maps = mappings(pid, f.pf->dev(), f.pf->inode());
		const long r = maps ? cold_blocks(pid_t(pid), *maps, f.pf->dev(), f.pf->inode(), ranges) : -ESRCH;
		if (r == -ENOMEM)
			forget_mappings(pid); // unmapped since they were read: not a refusal
		if (r > 0)
			f.cold += uint64_t(r) / BS;
		else if (r < 0 && r != -ESRCH && r != -ENOMEM) {
			cold_denied_ += blocks;
			if (!warned_cold_) {
				warned_cold_ = true;
				log("process_madvise(MADV_PAGEOUT) on pid " +
				    std::to_string(pid) + " refused: " +
				    std::strerror(int(-r)) +
				    " (needs CAP_SYS_NICE and ptrace access to the engine, Linux 5.10+); its mapped pages "
				    "age normally");
			}
		}
	}
}

// pid's file mappings, read again when they are MAPS_TTL_NS old; nullptr when pid is gone.
const std::vector<FileMapping> *Manager::mappings(uint32_t pid)
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	const uint64_t now = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
	auto m = std::find_if(mappings_.begin(), mappings_.end(), [&](const PidMappings &x) { return x.pid == pid; });
	if (m != mappings_.end() && now - m->read_ns < MAPS_TTL_NS)
		return &m->maps;
	std::vector<FileMapping> maps;
	if (read_file_mappings(pid_t(pid), maps) < 0) {
		forget_mappings(pid);
		return nullptr;
	}
	if (m == mappings_.end())
		m = mappings_.insert(mappings_.end(), {pid, 0, {}});
	m->read_ns = now;
	m->maps = std::move(maps);
	return &m->maps;
}

// The same, read again also when they lack the file (dev, inode): the engine may have mapped it since.
const std::vector<FileMapping> *Manager::mappings(uint32_t pid, dev_t dev, uint64_t inode)
{
	const std::vector<FileMapping> *maps = mappings(pid);
	if (maps && !maps_file(*maps, dev, inode)) {
		forget_mappings(pid);
		maps = mappings(pid);
	}
	return maps;
}

void Manager::forget_mappings(uint32_t pid)
{
	std::erase_if(mappings_, [&](const PidMappings &x) { return x.pid == pid; });
}

void Manager::drop_scans(uint64_t now_ns)
{
	for (uint16_t id = llc_first(core_, LLMCACHE_CLASS_SEQ); id; id = llc_next(core_, id)) {
		const llc_seq *q = llc_seq_get(core_, id);
		SeqState &s = seqs_[id];
		if (s.created_vt != q->created_vt || q->file < 1 || q->file > files_.size())
			continue;
		// Finished (llc_plan_scan_finished: untouched for scan_idle, and neither a mapped file's, whose
		// engine's next start would read it again, nor written): everything up to the cursor goes.
		const uint64_t from = std::max(q->start, s.dropped_to), to = q->cursor + 1;
		File &f = files_[q->file - 1];
		if (!llc_plan_scan_finished(f.mapped, s.written, now_ns > s.last_ns ? now_ns - s.last_ns : 0,
					    o_.scan_idle_ns) ||
		    to <= from)
			continue;
		// Only the blocks still in this sequence: re-read blocks moved to HOT or LOOP sequences stay.
		std::vector<Range> ranges;
		for (uint64_t b = from; b < to;) {
			uint64_t e = b;
			while (e < to && llc_lookup(core_, q->file, e) == id)
				e++;
			if (e > b)
				ranges.push_back({b, e - b});
			b = e + 1;
		}
		drop_ranges(f, ranges, f.dropped);
		s.dropped_to = to;
	}
}

// Loop tails. When the engine's memory cgroup cannot hold a loop, the unpinned blocks the engine has
// passed are evicted before the next iteration anyway. Dropping them at once leaves the room to the
// readahead of the blocks ahead: otherwise reclaim gives an mmap engine's just-used pages (young in its
// page tables, and activated at once when a large folio has several young entries) a second chance
// and takes the readahead pages instead, which are then read twice.
//
// The passed blocks are the runs of LOOP accesses noted before the last call less those noted since
// (llc_plan_note_run, llc_plan_tail_drops: the module's rule), not the core's cursor: an mmap engine
// does not fault on the pinned first blocks of a loop again, so the core never sees that loop start a
// new iteration, and its cursor stays at the end. A block goes 10-20 ms after its last access, when the
// read that touched it is done. Pinned blocks stay, and so do planned ones while the pins have room
// left. A head file's are found from the engine's position instead (drop_passed()).
void Manager::drop_tails()
{
	if (memcg_limit_ == UINT64_MAX)
		return; // no known limit: the loop may well fit, and on_access() noted nothing
	const uint64_t room = budget_blocks(UINT64_MAX); // what the cgroup leaves the managed files' cache
	const bool pins_full = pinned_blocks() >= budget_blocks(), mapped_fit = mapped_files_fit();
	for (size_t i = 0; i < files_.size(); i++) {
		File &f = files_[i];
		if (f.head) {
			drop_passed(f);
			continue;
		}
		if (!llc_plan_drop_tails(f.pf->blocks(), 0, room) || (f.mapped && mapped_fit)) {
			f.n_recent = f.n_aged = 0; // the whole file fits in what the cgroup leaves
			continue;
		}
		auto keep = [&](uint64_t b) {
			if (f.pf->locked_in(b, 1))
				return true;
			if (!pins_full && i < planned_.size())
				for (const Range &r : planned_[i])
					if (b >= r.first && b < r.first + r.count)
						return true;
			return false;
		};
		std::array<llc_span, TAIL_RUNS *(TAIL_RUNS + 1)> tails; // each aged run split by every recent one at most
		const uint32_t n = llc_plan_tail_drops(f.aged_runs.data(), f.n_aged, f.recent_runs.data(), f.n_recent,
						       tails.data(), tails.size());
		std::vector<Range> ranges;
		for (uint32_t k = 0; k < n; k++)
			for (uint64_t b = tails[k].first, to = b + tails[k].count; b < to;) {
				uint64_t e = b;
				while (e < to && !keep(e))
					e++;
				if (e > b)
					ranges.push_back({b, e - b});
				b = e + 1;
			}
		drop_ranges(f, ranges, f.tail);
		f.aged_runs = f.recent_runs;
		f.n_aged = std::exchange(f.n_recent, 0);
	}
}

// A head file's engine goes through the file in order: what it passed, two stream units behind it (its
// threads split each matrix, a tensor apart at most), goes in whole PMD-size folios, so that the engine's
// mapping of a folio is not split into 4 KiB entries for good. A window behind (32 MiB) held more of the
// stream's room than the stream could spare: see Documentation/design/planner.md.
void Manager::drop_passed(File &f)
{
	constexpr uint32_t MAX_SPANS = 8;
	llc_span spans[MAX_SPANS];
	const llc_span head{0, f.head_blocks};
	const uint32_t n = llc_plan_passed(0, f.pf->blocks(), &head, 1, f.position, 2 * stream_unit() / BS, FOLIO_BLOCKS,
					   &f.dropped_to, spans, MAX_SPANS);
	std::vector<Range> ranges;
	for (uint32_t k = 0; k < n; k++)
		ranges.push_back({spans[k].first, spans[k].count});
	drop_ranges(f, ranges, f.tail);
}

bool Manager::tails_pending() const
{
	for (const File &f : files_)
		if (f.n_recent || f.n_aged)
			return true;
	return false;
}

void Manager::release()
{
	for (File &f : files_)
		f.pf->release();
}

std::string Manager::status(const FeedInfo &feed) const
{
	const uint64_t *st = llc_stats(core_);
	const uint64_t pinned = pinned_blocks();
	uint64_t dropped = 0, cold = 0, tail = 0;
	for (const File &f : files_)
		dropped += f.dropped, cold += f.cold, tail += f.tail;
	auto kv = [](const char *k, uint64_t v) { return std::string(" ") + k + " " + std::to_string(v); };
	std::string out = "global mode bpf" + kv("enable", 1) + kv("pin_budget", o_.pin_budget) +
			  kv("hot_reserve", o_.hot_reserve) + kv("bw", o_.bw) + kv("t_ns", o_.t_ns) + " hook_mode bpf-" +
			  feed.hooks + kv("registered", files_.size()) + kv("effective_budget", budget_blocks() * BS) +
			  kv("memcg_limit", memcg_limit_ == UINT64_MAX ? 0 : memcg_limit_) +
			  kv("vm_locked", vm_locked_bytes()) + kv("scan_idle_ns", o_.scan_idle_ns) +
			  kv("engine_anon", usage_.anon) + kv("engine_code", code_) +
			  kv("engine_code_locked", engine_code_locked() * BS) +
			  kv("prefetch_window", o_.prefetch ? window_bytes() : 0) + "\n";
	const uint64_t misses = std::min(feed.inserted, st[LLMCACHE_STAT_ACCESSES]);
	out += "stats" + kv("accesses", st[LLMCACHE_STAT_ACCESSES]) + kv("hits", st[LLMCACHE_STAT_ACCESSES] - misses) +
	       kv("misses", misses) + kv("seq_blocks", st[LLMCACHE_STAT_SEQ_BLOCKS]) +
	       kv("loop_blocks", st[LLMCACHE_STAT_LOOP_BLOCKS]) + kv("hot_blocks", st[LLMCACHE_STAT_HOT_BLOCKS]) +
	       kv("loop_iterations", st[LLMCACHE_STAT_LOOP_ITERATIONS]) + kv("seqs_created", st[LLMCACHE_STAT_SEQS_CREATED]) +
	       kv("seqs_recycled", st[LLMCACHE_STAT_SEQS_RECYCLED]) +
	       kv("chunks_recycled", st[LLMCACHE_STAT_CHUNKS_RECYCLED]) + kv("pinned", pinned) +
	       kv("shrinker_released", released_) + kv("events_dropped", feed.lost) + kv("reuse_room", reuse_given_) +
	       kv("seq_seqs", llc_class_count(core_, LLMCACHE_CLASS_SEQ)) +
	       kv("loop_seqs", llc_class_count(core_, LLMCACHE_CLASS_LOOP)) +
	       kv("hot_seqs", llc_class_count(core_, LLMCACHE_CLASS_HOT)) + kv("dropped_blocks", dropped) + kv("loop_tail_dropped", tail) +
	       kv("cold_blocks", cold) + kv("cold_denied", cold_denied_) + kv("page_cache_added", feed.inserted) +
	       kv("page_cache_removed", feed.evicted) + kv("prefetched", prefetcher_ ? prefetcher_->asked() : 0) +
	       kv("prefetch_skipped", prefetcher_ ? prefetcher_->skipped() : 0) + "\n";
	constexpr size_t MAX_TEXT = 96 << 10; // one SOCK_SEQPACKET reply must fit the socket's send buffer
	size_t shown = 0;
	for (size_t i = 0; i < files_.size() && out.size() < MAX_TEXT; i++, shown++) {
		const File &f = files_[i];
		out += "file" + kv("id", i + 1) + kv("accesses", f.accesses) + kv("seq_blocks", f.by_class[LLMCACHE_CLASS_SEQ]) +
		       kv("loop_blocks", f.by_class[LLMCACHE_CLASS_LOOP]) + kv("hot_blocks", f.by_class[LLMCACHE_CLASS_HOT]) +
		       kv("pinned", f.pf->locked()) + kv("blocks", f.pf->blocks()) +
		       kv("resident", f.pf->resident(0, f.pf->blocks())) + kv("dropped", f.dropped) + kv("tail_dropped", f.tail) + kv("cold", f.cold) +
		       " path " + escape(f.pf->path()) + "\n";
	}
	if (shown < files_.size())
		out += "truncated files " + std::to_string(files_.size() - shown) + "\n";
	const uint64_t bw_blocks = o_.bw / BS;
	for (uint16_t id = llc_first(core_, LLMCACHE_CLASS_LOOP); id && out.size() < 2 * MAX_TEXT;
	     id = llc_next(core_, id)) {
		const llc_seq *q = llc_seq_get(core_, id);
		if (q->file < 1 || q->file > files_.size() || files_[q->file - 1].head)
			continue;
		const uint64_t n_blocks = q->end - q->start + 1, s_min = llc_size_min_blocks(n_blocks, bw_blocks, o_.t_ns);
		const uint64_t pin = files_[q->file - 1].pf->locked_in(q->start, n_blocks);
		out += "loop" + kv("seq", id) + kv("file", q->file) + kv("first", q->start) + kv("n", n_blocks) +
		       kv("iterations", q->iterations) + kv("period_ns", q->period_ns) + kv("s_min", s_min) +
		       kv("pinned", pin) + kv("deficit", s_min > pin ? s_min - pin : 0) +
		       kv("stall_ns", llc_stall_ns(n_blocks, pin, bw_blocks, o_.t_ns)) + "\n";
	}
	// A head file is one loop, the engine's pass over the whole file, counted where its position goes
	// round; seq 0: not one of the core's sequences.
	for (size_t i = 0; i < files_.size(); i++) {
		const File &f = files_[i];
		if (!f.head)
			continue;
		const uint64_t n_blocks = f.pf->blocks(), s_min = llc_size_min_blocks(n_blocks, bw_blocks, o_.t_ns);
		const uint64_t pin = f.pf->locked();
		out += "loop" + kv("seq", 0) + kv("file", i + 1) + kv("first", 0) + kv("n", n_blocks) +
		       kv("iterations", f.iterations) + kv("period_ns", f.period_ns) + kv("s_min", s_min) + kv("pinned", pin) +
		       kv("deficit", s_min > pin ? s_min - pin : 0) +
		       kv("stall_ns", llc_stall_ns(n_blocks, pin, bw_blocks, o_.t_ns)) + "\n";
	}
	return out;
}

} // namespace llmcache::pagecache
