// SPDX-License-Identifier: MIT
// make bench: spill and restore bandwidth of the KV storage pool (io_uring, O_DIRECT, registered
// buffers, CRC32C-sealed slabs) against fio on the same target, block size and queue depth, in the same
// run. Each round runs fio write, pool spill, fio read, pool restore back to back, so both see the same
// load from whatever else runs on the machine; the ratio is taken per round and the median round is
// reported, with every round's two bandwidths. Reads alternate which of the two goes first (fio's write
// must come first: it overwrites the pool's slabs), and the target is flushed (fsync) before every
// timed phase, so that neither pays for writing back what the other left dirty (a loop device's backing
// file sits in the page cache, and the kernel writes it back at moments of its own). One untimed fio
// write of the pass comes first, so that the first round's write does not also fill the target. A spill
// is StoragePool::write of pages held in SlabBuffers, as the CPU pool holds them: the payload's CRC32C
// was computed when it was filled (the CPU pool chains it as tokens are appended), the header is sealed
// in place and io_uring writes the page itself. fio's job is one stream, so the pool's comparable unit
// is one call for the whole pass; passes of 128-slab calls (37 MiB, the spill batch of the default 256
// MiB budget) show what the queue drain at the end of each synchronous call costs. A restore is
// StoragePool::read (io_uring, verification of every slab in the I/O buffer: fio's work plus the
// checksums); a restore into memory is what the pool update does when a page comes back: each payload
// is copied into a SlabBuffer of its own while its CRC32C is computed (SlabRead::dst, one pass over the
// data). The copy's CPU rate without I/O, verify-then-copy against the fused form, is printed first.
// fio's buffers are in hugetlb pages when they can be reserved, as the pool's are in transparent huge
// pages (fio_memory()).
#include "kvio/crc32c.hpp"
#include "kvio/storage_pool.hpp"

#include <fcntl.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>
#include "machine.hpp"

using namespace llmcache::kv;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string &msg)
{
	std::fprintf(stderr, "bench_kv_storage: %s\n", msg.c_str());
	std::exit(1);
}

double json_number(const std::string &out, const std::string &key, size_t from)
{
	const size_t at = out.find("\"" + key + "\" : ", from);
	if (at == std::string::npos)
		die("cannot find " + key + " in fio's output");
	return std::strtod(out.c_str() + at + key.size() + 5, nullptr);
}

// fio's bandwidth in bytes/s for one sequential pass (rw = write or read) with O_DIRECT, io_uring,
// registered buffers and a registered file: the same mechanisms the pool uses. cpu_per_gb: fio's CPU
// seconds (user + system, from its own accounting) per GB moved.
// fio_mem: fio's --mem, the kind of memory its buffers are in.
double fio_bw(const std::string &target, const char *rw, uint64_t bs, unsigned qd, uint64_t bytes,
	      const std::string &fio_mem, double &cpu_per_gb)
{
	const std::string cmd = "fio --name=kv --filename=" + target + " --rw=" + rw + " --bs=" + std::to_string(bs) +
				" --iodepth=" + std::to_string(qd) + " --size=" + std::to_string(bytes) +
				" --ioengine=io_uring --direct=1 --fixedbufs=1 --registerfiles=1 --offset=0"
				" --mem=" + fio_mem + " --numjobs=1 --output-format=json 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		die("cannot run fio");
	std::string out;
	char buf[4096];
	for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
		out.append(buf, n);
	if (pclose(p) != 0)
		die("fio failed: " + cmd + "\n" + out);
	const size_t job = out.find("\"jobs\" : [");
	const size_t sec = out.find(std::string("\"") + rw + "\" : {", job);
	if (job == std::string::npos || sec == std::string::npos)
		die("cannot find the " + std::string(rw) + " section in fio's output");
	const double bw = json_number(out, "bw_bytes", sec), io = json_number(out, "io_bytes", sec);
	const double runtime_s = json_number(out, "job_runtime", job) / 1e3;
	cpu_per_gb = (json_number(out, "usr_cpu", sec) + json_number(out, "sys_cpu", sec)) / 100 * runtime_s / (io / 1e9);
	return bw;
}

// The number after "key:" in a /proc file of such lines (/proc/meminfo, smaps_rollup); 0 if absent.
uint64_t proc_field(const char *path, const std::string &key)
{
	std::ifstream in(path);
	for (std::string line; std::getline(in, line);)
		if (line.compare(0, key.size() + 1, key + ":") == 0)
			return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
	return 0;
}

// The pool's I/O buffers and slabs sit in transparent huge pages (kvio/io_memory.hpp), which fio's
// default buffers do not: fio gets hugetlb pages (--mem=mmaphuge) for its buffers, reserved here for
// the run and given back at exit, so both sides move data to and from physically contiguous memory.
// Returns fio's --mem and says which memory each side uses.
std::string fio_memory(unsigned qd, uint64_t sb)
{
	static long old_pages = -1;
	const uint64_t huge = proc_field("/proc/meminfo", "Hugepagesize") << 10;
	const long need = huge ? long((qd * sb + huge - 1) / huge) + 2 : 0;
	std::string why = "no hugetlb page size in /proc/meminfo";
	if (huge) {
		std::ifstream("/proc/sys/vm/nr_hugepages") >> old_pages;
		if (old_pages >= 0 && std::ofstream("/proc/sys/vm/nr_hugepages") << old_pages + need << std::endl &&
		    proc_field("/proc/meminfo", "HugePages_Free") >= (uint64_t)need) {
			std::atexit([] {
				std::ofstream("/proc/sys/vm/nr_hugepages") << old_pages << std::endl;
			});
			std::printf("buffers: fio's in %ld hugetlb pages of %llu KiB, reserved for the run (--mem=mmaphuge); the "
				    "pool's in transparent huge pages\n",
				    need, (unsigned long long)(huge >> 10));
			return "mmaphuge";
		}
		why = old_pages < 0 ? "cannot read /proc/sys/vm/nr_hugepages" : "cannot reserve them (not root, or memory too fragmented)";
		if (old_pages >= 0)
			std::ofstream("/proc/sys/vm/nr_hugepages") << old_pages << std::endl;
	}
	std::printf("buffers: fio's in 4 KiB pages (no hugetlb pages for fio: %s); the pool's in transparent huge "
		    "pages, which favours the pool\n",
		    why.c_str());
	return "malloc";
}

// The share of this process's anonymous memory that transparent huge pages back: how much of the
// pool's memory the kernel gave huge pages (the I/O buffers, the pages spilled and restored).
double anon_huge_share()
{
	const uint64_t anon = proc_field("/proc/self/smaps_rollup", "Anonymous");
	return anon ? (double)proc_field("/proc/self/smaps_rollup", "AnonHugePages") / (double)anon : 0;
}

// Writes back what an earlier phase left dirty (a loop device's backing file) before a timed phase.
void flush(const std::string &target)
{
	const int fd = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		die("cannot flush " + target + ": " + std::strerror(errno));
	close(fd);
}

struct PoolRun {
	// restore: verified in the I/O buffers (fio's work plus the checksums); mem: verified as copied into pages
	double spill_bw = 0, restore_bw = 0, mem_bw = 0, spill_cpu = 0, restore_cpu = 0, mem_cpu = 0; // CPU s per GB
};

double process_cpu()
{
	timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Spills n_slabs in calls of `batch` slabs (one distinct buffer each); fills `reads` with their slots.
void spill(const std::string &target, StoragePool &pool, const std::vector<SlabBuffer> &payloads,
	   const std::vector<uint32_t> &crcs, uint64_t n_slabs, uint64_t batch, std::vector<SlabRead> &reads, PoolRun &r)
{
	std::vector<SlabWrite> w;
	std::vector<int64_t> res;
	std::string err;
	reads.clear();
	flush(target);
	const double c0 = process_cpu();
	const auto t0 = Clock::now();
	for (uint64_t s = 0; s < n_slabs; s += batch) {
		w.clear();
		for (uint64_t i = s; i < std::min<uint64_t>(n_slabs, s + batch); i++) {
			const SlabBuffer &p = payloads[i];
			w.push_back({{pool.pool_id(), 0, (uint32_t)i, SlabKind::K}, 32, p.get(), pool.slab_bytes() - sizeof(SlabHeader),
				     nullptr, 0, p.slab(), crcs[i], true});
		}
		if (pool.write(w, res, err))
			die("spill failed: " + err);
		for (size_t i = 0; i < w.size(); i++)
			reads.push_back({w[i].id, (uint64_t)res[i], nullptr, 0, 0, nullptr});
	}
	r.spill_bw = (double)(n_slabs * pool.slab_bytes()) / std::chrono::duration<double>(Clock::now() - t0).count();
	r.spill_cpu = (process_cpu() - c0) / ((double)(n_slabs * pool.slab_bytes()) / 1e9);
}

// Restores the slabs in calls of `batch`: verified where they land, or (dst) verified as copied into
// pages in memory.
void restore(const std::string &target, StoragePool &pool, std::vector<SlabRead> &reads, std::vector<SlabBuffer> *dst,
	     uint64_t batch, PoolRun &r)
{
	std::string err;
	for (SlabRead &rd : reads)
		rd.dst = dst ? (*dst)[&rd - reads.data()].get() : nullptr;
	flush(target);
	const double gb = (double)(reads.size() * pool.slab_bytes()) / 1e9;
	const double c0 = process_cpu();
	const auto t1 = Clock::now();
	for (size_t s = 0; s < reads.size(); s += batch) {
		const size_t n = std::min<size_t>(batch, reads.size() - s);
		if (pool.read(std::span(reads).subspan(s, n), [](size_t, const uint8_t *) { return 0; }, err))
			die("restore failed: " + err);
	}
	(dst ? r.mem_bw : r.restore_bw) = gb * 1e9 / std::chrono::duration<double>(Clock::now() - t1).count();
	(dst ? r.mem_cpu : r.restore_cpu) = (process_cpu() - c0) / gb;
}

// Gives the slots back and checks that the restore into memory brought back what was spilled. The
// slots go back last first: the pool hands out the last slot released first, so the next pass writes
// ascending offsets again, as fio does (released first to last, every pass after the first ran
// backwards through the target).
void finish(StoragePool &pool, const std::vector<SlabBuffer> &payloads, std::vector<SlabBuffer> &dst,
	    const std::vector<SlabRead> &reads)
{
	const uint64_t len = pool.slab_bytes() - sizeof(SlabHeader);
	for (auto rd = reads.rbegin(); rd != reads.rend(); ++rd)
		pool.release(rd->offset);
	for (size_t i = 0; i < reads.size(); i++)
		if (std::memcmp(dst[i].get(), payloads[i].get(), len))
			die("slab " + std::to_string(i) + " restored different from what was spilled");
	for (SlabBuffer &d : dst) // cleared outside the measure: a restore that did nothing shows
		std::memset(d.get(), 0, len);
}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double cpu_now()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// CRC32C over a slab-sized buffer, per second of this thread's CPU time.
double crc_rate(uint32_t (*fn)(const void *, size_t, uint32_t))
{
	std::vector<uint8_t> b(299008, 0x5a);
	uint32_t c = 0;
	const double t0 = cpu_now();
	for (int i = 0; i < 256; i++)
		c = fn(b.data(), b.size(), c);
	const double s = cpu_now() - t0;
	if (c == 1)
		std::puts("");
	return 256.0 * (double)b.size() / s;
}

// Restore's CPU work without the I/O, per CPU-second: 32 slab-sized I/O buffers (the registered
// buffers) copied in turn into `dst`, verify then copy (crc32c + memcpy) against the fused crc32c_copy.
void restore_copy_rates(std::vector<SlabBuffer> &dst, uint64_t sb, double &two_pass, double &fused)
{
	std::vector<uint8_t> io(32 * sb);
	for (size_t i = 0; i < io.size(); i++)
		io[i] = (uint8_t)(i * 2654435761u >> 13);
	const uint64_t len = sb - sizeof(SlabHeader);
	for (int form = 0; form < 2; form++) {
		uint32_t c = 0;
		const double t0 = cpu_now();
		for (size_t i = 0; i < dst.size(); i++) {
			const uint8_t *src = io.data() + (i % 32) * sb;
			if (form == 0) {
				c ^= crc32c(src, len);
				std::memcpy(dst[i].get(), src, len);
			} else {
				c ^= crc32c_copy(dst[i].get(), src, len);
			}
		}
		const double s = cpu_now() - t0;
		(form ? fused : two_pass) = (double)(dst.size() * len) / s;
		if (c == 1)
			std::puts("");
	}
}
} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		std::fprintf(stderr, "usage: bench_kv_storage TARGET[,TARGET...] [MiB per pass (1024)] [rounds (9)] "
				     "[queue depth (32)] [slab bytes (299008)]\n"
				     "TARGET: a block device or a file on a file system with O_DIRECT; it is overwritten\n");
		return 2;
	}
	const uint64_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
	const int rounds = argc > 3 ? std::atoi(argv[3]) : 9;
	const unsigned qd = argc > 4 ? (unsigned)std::atoi(argv[4]) : 32;
	// The default slab: one page of 32 tokens of LLaMA-2-7B K (32 heads x 128, fp16) with its key
	// bounds and header, rounded up to 4096.
	const uint64_t sb = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 299008;
	const uint64_t n_slabs = (mib << 20) / sb, bytes = n_slabs * sb;
	const unsigned batch = 128; // slabs per call in the second kind of pass
	utsname u{};
	uname(&u);
	std::printf("machine: %s, %ld cores, Linux %s\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN), u.release);
	std::printf("CRC32C per CPU-second: %.1f GB/s (the pool's form), %.1f GB/s (byte table)\n", crc_rate(crc32c) / 1e9,
		    crc_rate(crc32c_portable) / 1e9);
	std::printf("slab %llu bytes, queue depth %u, %llu MiB per pass, %d rounds, median round\n", (unsigned long long)sb, qd,
		    (unsigned long long)(bytes >> 20), rounds);
	std::vector<SlabBuffer> payloads;
	std::vector<uint32_t> crcs;
	std::vector<SlabBuffer> dst; // where restores land, as pages brought back to memory
	uint64_t x = 88172645463325252ull;
	for (uint64_t i = 0; i < n_slabs; i++) {
		payloads.emplace_back(sb, sb - sizeof(SlabHeader));
		for (uint8_t *b = payloads.back().get(); b + 8 <= payloads.back().slab() + sb; b += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			std::memcpy(b, &x, 8);
		}
		crcs.push_back(crc32c(payloads.back().get(), sb - sizeof(SlabHeader)));
		dst.emplace_back(sb, sb - sizeof(SlabHeader));
	}

	{
		uint32_t c = 0;
		const double t0 = cpu_now();
		for (const SlabBuffer &p : payloads)
			c ^= crc32c(p.get(), sb - sizeof(SlabHeader));
		const double s = cpu_now() - t0, rate = (double)(n_slabs * (sb - sizeof(SlabHeader))) / s;
		std::printf("CRC32C over the pass in memory (not in cache), per CPU-second: %.1f GB/s, %.0f ms per GB: what "
			    "verifying a restore costs when the device's data is not in cache%s\n",
			    rate / 1e9, 1e12 / rate, c == 1 ? " " : "");
	}
	double two_pass = 0, fused = 0;
	restore_copy_rates(dst, sb, two_pass, fused); // also faults dst in
	for (SlabBuffer &d : dst)
		std::memset(d.get(), 0, sb - sizeof(SlabHeader));
	std::printf("restore into memory without I/O, per CPU-second: verify then copy %.1f GB/s, fused %.1f GB/s\n",
		    two_pass / 1e9, fused / 1e9);
	const std::string fio_mem = fio_memory(qd, sb);
	std::printf("transparent huge pages back %.0f%% of this process's anonymous memory\n", 100 * anon_huge_share());
	std::string targets = argv[1];
	bool ok = true;
	for (size_t start = 0; start <= targets.size();) {
		size_t end = targets.find(',', start);
		if (end == std::string::npos)
			end = targets.size();
		const std::string target = targets.substr(start, end - start);
		start = end + 1;
		StorageConfig cfg{target, 0, bytes, sb, qd, true};
		std::unique_ptr<StoragePool> pool;
		std::string err;
		if (StoragePool::open(cfg, pool, err))
			die(err);
		if (!pool->note().empty())
			die("the pool does not use io_uring here: " + pool->note());
		if (pool->slots() < n_slabs)
			die(target + " is too small for " + std::to_string(bytes) + " bytes");
		std::vector<double> fw, fr, pw, pr, bw, br, uw, ur, fuw, fur, pm, bm, um;
		{ // untimed: the first write of a pass also fills a loop device's backing cache or allocates a
		  // file's blocks, and it would be fio's in the first round (0.4-1.0 GB/s against 4-6 after)
			double cpu;
			fio_bw(target, "write", sb, qd, bytes, fio_mem, cpu);
		}
		for (int i = 0; i < rounds; i++) {
			double cpu;
			PoolRun one, calls;
			std::vector<SlabRead> reads;
			flush(target);
			fw.push_back(fio_bw(target, "write", sb, qd, bytes, fio_mem, cpu));
			fuw.push_back(cpu);
			spill(target, *pool, payloads, crcs, n_slabs, n_slabs, reads, one);
			if (i % 2)
				restore(target, *pool, reads, nullptr, n_slabs, one);
			flush(target);
			fr.push_back(fio_bw(target, "read", sb, qd, bytes, fio_mem, cpu));
			fur.push_back(cpu);
			if (i % 2 == 0)
				restore(target, *pool, reads, nullptr, n_slabs, one);
			restore(target, *pool, reads, &dst, n_slabs, one);
			finish(*pool, payloads, dst, reads);
			spill(target, *pool, payloads, crcs, n_slabs, batch, reads, calls);
			restore(target, *pool, reads, nullptr, batch, calls);
			restore(target, *pool, reads, &dst, batch, calls);
			finish(*pool, payloads, dst, reads);
			pw.push_back(one.spill_bw / fw.back());
			pr.push_back(one.restore_bw / fr.back());
			bw.push_back(calls.spill_bw / fw.back());
			br.push_back(calls.restore_bw / fr.back());
			pm.push_back(one.mem_bw / fr.back());
			bm.push_back(calls.mem_bw / fr.back());
			uw.push_back(one.spill_cpu);
			ur.push_back(one.restore_cpu);
			um.push_back(one.mem_cpu);
		}
		const double mw = median(pw), mr = median(pr);
		auto row = [](const char *what, double fio, const std::vector<double> &ratio) {
			std::printf("%-30s %9.2f %10.2f %7.0f%% %6.0f%% - %4.0f%%\n", what, fio / 1e9, fio * median(ratio) / 1e9,
				    100 * median(ratio), 100 * *std::min_element(ratio.begin(), ratio.end()),
				    100 * *std::max_element(ratio.begin(), ratio.end()));
		};
		std::printf("\n%s\n", target.c_str());
		std::printf("%-30s %9s %10s %8s %15s\n", "", "fio GB/s", "pool GB/s", "ratio", "ratio range");
		row("spill, one call per pass", median(fw), pw);
		row("restore, one call per pass", median(fr), pr);
		row("spill, 128 slabs per call", median(fw), bw);
		row("restore, 128 slabs per call", median(fr), br);
		row("restore into memory, one call", median(fr), pm);
		row("restore into memory, 128/call", median(fr), bm);
		auto rounds_of = [](const char *what, const std::vector<double> &fio, const std::vector<double> &ratio) {
			std::printf("%s, GB/s per round (fio/pool):", what);
			for (size_t k = 0; k < fio.size(); k++)
				std::printf(" %.2f/%.2f", fio[k] / 1e9, fio[k] * ratio[k] / 1e9);
			std::printf("\n");
		};
		rounds_of("spill", fw, pw);
		rounds_of("restore", fr, pr);
		std::printf("CPU time per GB (user + system of the process; steadier than bandwidth on a shared machine):\n"
			    "  write: fio %.0f ms, pool %.0f ms;  read: fio %.0f ms, pool %.0f ms (verifying every slab's CRC32C), "
			    "%.0f ms into memory (verified as copied)\n",
			    1e3 * median(fuw), 1e3 * median(uw), 1e3 * median(fur), 1e3 * median(ur), 1e3 * median(um));
		std::printf("target >= 90%% of fio (one call per pass): spill %s, restore %s\n", mw >= 0.9 ? "met" : "NOT met",
			    mr >= 0.9 ? "met" : "NOT met");
		ok = ok && mw >= 0.9 && mr >= 0.9;
	}
	return ok ? 0 : 3;
}
