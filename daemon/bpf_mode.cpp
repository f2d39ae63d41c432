// SPDX-License-Identifier: MIT
#include "bpf_mode.hpp"

#include "pagecache/manager.hpp"
#include "pagecache/memlock.hpp"
#include "util/units.hpp"

#include "names.hpp"

#ifdef LLMCACHED_WITH_BPF
#include "feed.hpp"
#endif

#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <ctime>

#include <atomic>
#include <mutex>
#include <thread>

namespace po = boost::program_options;
using namespace llmcache;

namespace llmcached {

void add_bpf_mode_options(po::options_description &d, BpfModeConfig &c)
{
	d.add_options()
		("manage", po::value(&c.manage)->composing(), "bpf mode: a file to manage (repeatable)")
		("pid", po::value(&c.pid_args)->composing(), "bpf mode: manage every file >= min-size this process and its children read (repeatable)")
		("cgroup", po::value(&c.cgroup), "bpf mode: the same for a cgroup v2 directory and its descendants")
		("min-size", po::value(&c.min_size)->default_value(c.min_size), "bpf mode: smallest file managed automatically")
		("pin-budget", po::value(&c.pin_budget)->default_value(c.pin_budget), "bpf mode: most memory pinned (mlock) for loops")
		("hot-reserve", po::value(&c.hot_reserve)->default_value(c.hot_reserve), "bpf mode: HOT reserve (reported, as in the module)")
		("bw", po::value(&c.bw)->default_value(c.bw), "bpf mode: storage bandwidth for the sizing rule")
		("t", po::value(&c.t)->default_value(c.t), "bpf mode: allowed fetch delay per loop iteration (sizing rule)")
		("scan-idle", po::value(&c.scan_idle)->default_value(c.scan_idle), "bpf mode: a scan untouched this long is finished and dropped (0: scans are kept)")
		("memcg-headroom", po::value(&c.memcg_headroom)->default_value(c.memcg_headroom), "bpf mode: pins stay this far below the engine's memory cgroup limit (for mmap engines: below the limit less what they use)")
		("no-prefetch", po::bool_switch(&c.no_prefetch), "bpf mode: do not read mmap engines' unpinned loop blocks ahead of them")
		("ring-size", po::value(&c.ring)->default_value(c.ring), "bpf mode: BPF ring buffer, a power of two")
		("hooks", po::value(&c.hooks)->default_value(c.hooks), "bpf mode: auto, filemap or syscalls");
}

void check_bpf_mode_options(BpfModeConfig &c)
{
	auto bad = [](const char *opt, const std::string &text, const std::string &why) {
		return po::error(std::string("--") + opt + " " + text + ": " + why);
	};
	auto parsed = [&](const char *opt, const std::string &text, auto parse) {
		try {
			return parse(text);
		} catch (const std::exception &e) {
			throw bad(opt, text, e.what());
		}
	};
	parsed("pin-budget", c.pin_budget, units::parse_bytes);
	parsed("hot-reserve", c.hot_reserve, units::parse_bytes);
	parsed("memcg-headroom", c.memcg_headroom, units::parse_bytes);
	parsed("min-size", c.min_size, units::parse_bytes);
	parsed("scan-idle", c.scan_idle, units::parse_duration_ns);
	parsed("ring-size", c.ring, llmtrace::parse_ring_size);
	const uint64_t bw_blocks = parsed("bw", c.bw, units::parse_bandwidth) / 4096;
	if (!bw_blocks)
		throw bad("bw", c.bw, "must be at least one 4 KiB block per second");
	const uint64_t t_ns = parsed("t", c.t, units::parse_duration_ns);
	// The sizing rule computes BW*T as blocks/s x ns in 64 bits (as llmcachectl size checks it).
	if ((unsigned __int128)bw_blocks * t_ns + 1'000'000'000u > UINT64_MAX)
		throw po::error("--bw " + c.bw + " x --t " + c.t + " is beyond what the sizing rule computes exactly (BW in "
				"4 KiB blocks/s times T in ns must stay below 2^64, e.g. 1.8e9 blocks/s at T = 10 s): lower "
				"--bw or --t");
	if (c.hooks != "auto" && c.hooks != "filemap" && c.hooks != "syscalls")
		throw bad("hooks", c.hooks, "use auto, filemap or syscalls");
	c.pids.clear();
	for (const std::string &p : c.pid_args)
		c.pids.push_back(parsed("pid", p, llmtrace::parse_pid));
}

#ifdef LLMCACHED_WITH_BPF
static uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}
#endif

struct BpfMode::Impl {
	std::unique_ptr<pagecache::Manager> mgr;
#ifdef LLMCACHED_WITH_BPF
	std::unique_ptr<llmtrace::Feed> feed;
#endif
	std::mutex lock;
	std::atomic<bool> stop{false};
	std::thread thread;
	std::function<void(const std::string &)> log;

	pagecache::FeedInfo info()
	{
#ifdef LLMCACHED_WITH_BPF
		return {feed->filemap() ? "filemap" : "syscalls", feed->lost(), feed->inserted(), feed->evicted()};
#else
		return {};
#endif
	}

	void run()
	{
#ifdef LLMCACHED_WITH_BPF
		uint64_t last_tick = 0;
		bool tails_pending = false;
		while (!stop) {
			std::unique_lock g(lock, std::defer_lock);
			try {
				// Unlocked: status() must never queue behind an idle ring. Passed loop tails go every
				// 10 ms: at 1 GB/s an engine passes 50 MB in one 50 ms tick. The read-ahead follows the
				// engine every 5 ms: its window is consumed in 20-30 ms at such a rate.
				feed->wait(mgr->prefetching() ? 5 : tails_pending ? 10 : 50);
				g.lock();
				feed->poll(0);
			} catch (const std::exception &e) {
				if (!g.owns_lock())
					g.lock();
				log(std::string("the BPF feed failed: ") + e.what() + "; page-cache policy stopped, pins released");
				mgr->release();
				return;
			}
			const uint64_t now = now_ns();
			if (now - last_tick >= 50'000'000) {
				mgr->tick(now);
				last_tick = now;
			} else {
				mgr->drop_tails();
				mgr->prefetch();
			}
			tails_pending = mgr->tails_pending();
		}
#endif
	}
};

int BpfMode::start(const BpfModeConfig &c, std::function<void(const std::string &)> log, std::unique_ptr<BpfMode> &out,
		   std::string &err)
{
	std::unique_ptr<BpfMode> m(new BpfMode());
	m->impl_ = std::make_unique<Impl>();
	Impl &im = *m->impl_;
	im.log = log;
	pagecache::Options o;
	uint64_t min_size, ring;
	try {
		o.pin_budget = units::parse_bytes(c.pin_budget);
		o.hot_reserve = units::parse_bytes(c.hot_reserve);
		o.bw = units::parse_bandwidth(c.bw);
		o.t_ns = units::parse_duration_ns(c.t);
		o.scan_idle_ns = units::parse_duration_ns(c.scan_idle);
		o.memcg_headroom = units::parse_bytes(c.memcg_headroom);
		o.prefetch = !c.no_prefetch;
		min_size = units::parse_bytes(c.min_size);
		ring = units::parse_bytes(c.ring);
	} catch (const std::exception &e) {
		return err = std::string("bad option: ") + e.what(), -EINVAL;
	}
	if (c.manage.empty() && c.pids.empty() && c.cgroup.empty())
		return err = "--mode=bpf needs the files to manage: --manage PATH, --pid PID or --cgroup DIR", -EINVAL;
	// Checked here, not at the first event: a wrong target would otherwise serve nothing, silently.
	for (uint32_t pid : c.pids)
		if (pid == 0 || pid > 4194304 || (kill(pid_t(pid), 0) < 0 && errno == ESRCH))
			return err = "--pid " + std::to_string(pid) + ": no such process (a process id is 1-4194304; start the "
				     "engine first, or follow its cgroup with --cgroup)", -ESRCH;
	if (struct statfs fs; !c.cgroup.empty() && (statfs(c.cgroup.c_str(), &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC))
		return err = "--cgroup " + c.cgroup + ": not a cgroup v2 directory (e.g. /sys/fs/cgroup/NAME)", -EINVAL;
#ifndef LLMCACHED_WITH_BPF
	(void)min_size, (void)ring;
	return err = "this llmcached was built without BPF support (scripts/install-deps.sh bpf, then rebuild)", -ENOTSUP;
#else
	o.automatic = !c.pids.empty() || !c.cgroup.empty();
	o.min_size = min_size;
	llmtrace::FeedOptions fo;
	for (const std::string &p : c.manage) {
		char real[PATH_MAX];
		if (!realpath(p.c_str(), real))
			return err = "--manage " + p + ": " + std::strerror(errno), -errno;
		o.manage.push_back(real);
	}
	if (!o.automatic)
		fo.path_prefixes = o.manage; // only the managed files leave the kernel
	fo.min_size = o.manage.empty() ? min_size : 0;
	fo.pid = c.pids.empty() ? 0 : c.pids.front();
	fo.cgroup = c.cgroup;
	fo.ring_bytes = ring;
	fo.hooks = c.hooks;
	if (int r = pagecache::ensure_memlock(o.pin_budget, err); r < 0)
		return r;
	if (int r = pagecache::Manager::open(o, im.mgr, err); r < 0)
		return r;
	im.mgr->log = log;
	try {
		im.feed = std::make_unique<llmtrace::Feed>(fo);
	} catch (const llmtrace::FeedError &e) {
		err = e.what();
		if (err.rfind("llmtrace needs", 0) == 0) // the feed speaks for llmtrace
			err.replace(0, 8, "llmcached --mode=bpf");
		return e.usage() ? -EINVAL : -EPERM;
	}
	for (size_t i = 1; i < c.pids.size(); i++)
		im.feed->follow(c.pids[i]);
	im.feed->on_name = [&im](uint32_t dev, uint64_t inode, const std::string &path) { im.mgr->on_name(dev, inode, path); };
	im.feed->on_access = [&im](const llmcache_access &a) { im.mgr->on_access(a); };
	log("page-cache mode: BPF feed with the " + std::string(im.feed->filemap() ? "filemap" : "syscall") +
	    " hooks (mmap: " + (im.feed->mmap_hooks().empty() ? "unseen" : im.feed->mmap_hooks()) + "), pin budget " + units::format_bytes(o.pin_budget) + (o.automatic ? ", automatic" : "") + ", " +
	    std::to_string(o.manage.size()) + " files named");
	im.thread = std::thread([&im] { im.run(); });
	out = std::move(m);
	return 0;
#endif
}

BpfMode::~BpfMode()
{
	if (!impl_)
		return;
	impl_->stop = true;
	if (impl_->thread.joinable())
		impl_->thread.join();
	if (impl_->mgr)
		impl_->mgr->release();
}

std::string BpfMode::status()
{
	std::lock_guard g(impl_->lock);
	return impl_->mgr->status(impl_->info());
}

} // namespace llmcached
