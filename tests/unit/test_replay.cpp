// SPDX-License-Identifier: MIT
// The replay engine: trace loading, single runs, sweeps, cache-size parsing, and the report writers. Uses
// its own reader and policies (an exact LRU and a FIFO on std::list, fine in a test) so that it depends on
// nothing but the engine.
#include <algorithm>
#include <list>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

// After the C++ headers: cmocka defines a fail() macro that breaks <sstream>.
#include "cmocka_cpp.hpp"

#include "sim/replay.hpp"
#include "sim/report.hpp"

using namespace llmcache;
using namespace llmcache::sim;

namespace {

class VectorReader : public trace::Reader {
public:
	std::vector<llmcache_access> records;
	trace::PathMap names;
	size_t pos = 0;
	bool next(llmcache_access &out) override
	{
		if (pos == records.size())
			return false;
		out = records[pos++];
		return true;
	}
	const trace::PathMap &paths() const override { return names; }
	std::vector<std::string> notes() const override { return {"a note"}; }
	std::string producer() const override { return "unit test"; }
};

llmcache_access rec(uint32_t dev, uint64_t inode, uint64_t first, uint32_t nr, uint64_t time = 0, uint32_t pid = 1,
		    uint8_t op = LLMCACHE_OP_READ)
{
	llmcache_access a{};
	a.time_ns = time;
	a.inode = inode;
	a.first_block = first;
	a.pid = pid;
	a.dev = dev;
	a.nr_blocks = nr;
	a.op = op;
	return a;
}

// Exact LRU (FIFO when `fifo`), and a record of the calls the engine made.
class ListPolicy : public Policy {
public:
	ListPolicy(uint64_t capacity, bool fifo) : Policy(capacity), fifo_(fifo) {}
	void prepare(std::span<const Request> all) override { prepared_ = all; }
	bool access(const Request &r) override
	{
		if (calls_ < prepared_.size() && prepared_[calls_].key != r.key)
			out_of_order_ = true;
		calls_++;
		auto it = where_.find(r.key);
		if (it != where_.end()) {
			if (!fifo_)
				order_.splice(order_.begin(), order_, it->second);
			return true;
		}
		if (order_.size() == capacity_) {
			where_.erase(order_.back());
			order_.pop_back();
		}
		order_.push_front(r.key);
		where_[r.key] = order_.begin();
		return false;
	}
	std::string_view name() const override { return fifo_ ? "tfifo" : "tlru"; }

	std::span<const Request> prepared_;
	uint64_t calls_ = 0;
	bool out_of_order_ = false;

private:
	bool fifo_;
	std::list<uint64_t> order_;
	std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

// Counts every access as a LOOP hit, to check that class statistics reach the result.
class ClassPolicy : public Policy {
public:
	using Policy::Policy;
	bool access(const Request &) override
	{
		stats_.accesses[LLMCACHE_CLASS_LOOP]++;
		stats_.hits[LLMCACHE_CLASS_LOOP]++;
		return true;
	}
	std::string_view name() const override { return "tclass"; }
	const ClassStats *class_stats() const override { return &stats_; }

private:
	ClassStats stats_;
};

std::unique_ptr<Policy> test_factory(std::string_view name, uint64_t capacity, const PolicyOptions &)
{
	if (name == "tlru" || name == "tfifo")
		return std::make_unique<ListPolicy>(capacity, name == "tfifo");
	if (name == "tclass")
		return std::make_unique<ClassPolicy>(capacity);
	throw std::invalid_argument("unknown test policy " + std::string(name));
}

// A mixed stream: a loop over file 0, a hot set in file 1, and scans of file 2, interleaved.
Trace mixed_trace(size_t n)
{
	VectorReader rd;
	uint64_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		switch ((x >> 60) % 4) {
		case 0:
		case 1: rd.records.push_back(rec(1, 10, i % 300, 1 + (x >> 20) % 3)); break;
		case 2: rd.records.push_back(rec(1, 11, (x >> 30) % 40, 1)); break;
		default: rd.records.push_back(rec(1, 12, i, 2)); break;
		}
	}
	return load_trace(rd);
}

} // namespace

static void load_trace__multi_block_record__one_request_per_block(void **)
{
	VectorReader rd;
	rd.records = {rec(3, 77, 5, 3, 1000, 42, LLMCACHE_OP_WRITE), rec(3, 77, 9, 0), rec(3, 77, 1, 1, 2000)};
	Trace t = load_trace(rd);
	assert_int_equal(t.records, 3);
	assert_int_equal(t.requests.size(), 4);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(t.requests[i].key, request_key(0, 5 + i));
		assert_int_equal(t.requests[i].time_ns, 1000);
	}
	assert_int_equal(t.requests[3].key, request_key(0, 1));
	assert_int_equal(t.requests[3].time_ns, 2000);
	assert_true(t.notes == std::vector<std::string>{"a note"});
	assert_true(t.producer == "unit test");
}

static void load_trace__files__numbered_densely_in_order_of_appearance(void **)
{
	VectorReader rd;
	// inode 100 on dev 1, inode 7 on dev 1, inode 100 again, inode 100 on dev 2 (another file).
	rd.records = {rec(1, 100, 0, 1), rec(1, 7, 0, 1), rec(1, 100, 1, 1), rec(2, 100, 0, 1), rec(1, 7, 3, 1)};
	rd.names[{1, 100}] = "/models/a.bin";
	rd.names[{2, 100}] = "/other/c.bin";
	Trace t = load_trace(rd);
	const uint32_t want[] = {0, 1, 0, 2, 1};
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(key_file(t.requests[i].key), want[i]);
	assert_int_equal(t.files.size(), 3);
	assert_true(t.files[1] == (trace::FileKey{1, 7}));
	assert_true(t.files[2] == (trace::FileKey{2, 100}));
	assert_true(t.paths == (std::vector<std::string>{"/models/a.bin", "", "/other/c.bin"}));
}

static void load_trace__repeated_and_overlapping_blocks__footprint_counts_distinct(void **)
{
	VectorReader rd;
	// File 0: blocks 0-9, then 5-14 (5 new), then 0-9 again; file 1: block 0 (same block number, new key).
	rd.records = {rec(1, 1, 0, 10), rec(1, 1, 5, 10), rec(1, 1, 0, 10), rec(1, 2, 0, 1)};
	Trace t = load_trace(rd);
	assert_int_equal(t.requests.size(), 31);
	assert_int_equal(t.footprint, 16);
	// Across 64-block words, leaving a word and coming back: 60-70, 0-5, 65-130 = 11 + 6 + 60 distinct.
	VectorReader rd2;
	rd2.records = {rec(1, 1, 60, 11), rec(1, 1, 0, 6), rec(1, 1, 65, 66)};
	assert_int_equal(load_trace(rd2).footprint, 77);
}

static void load_trace__block_beyond_40_bits__throws(void **)
{
	VectorReader rd;
	rd.records = {rec(1, 1, 0, 1), rec(1, 1, (uint64_t(1) << 40) - 2, 4)};
	bool threw = false;
	try {
		load_trace(rd);
	} catch (const std::runtime_error &e) {
		threw = std::string(e.what()).find("record 2") != std::string::npos;
	}
	assert_true(threw);
}

static void run_policy__loop_of_4_blocks__lru_hits_only_when_it_fits(void **)
{
	VectorReader rd;
	for (int it = 0; it < 3; it++)
		rd.records.push_back(rec(1, 1, 0, 4));
	Trace t = load_trace(rd);
	ListPolicy small(3, false), fits(4, false);
	std::atomic<uint64_t> progress{0};
	RunResult a = run_policy(small, t.requests, &progress);
	RunResult b = run_policy(fits, t.requests);
	assert_int_equal(a.hits, 0);
	assert_int_equal(a.misses, 12);
	assert_int_equal(b.hits, 8);
	assert_int_equal(b.misses, 4);
	assert_int_equal(progress.load(), 12);
	assert_false(a.has_classes);
	// prepare() saw the whole stream and access() was called in its order.
	assert_int_equal(fits.prepared_.size(), 12);
	assert_int_equal(fits.calls_, 12);
	assert_false(fits.out_of_order_);
}

static void run_policy__class_stats__copied_into_result(void **)
{
	Trace t = mixed_trace(100);
	ClassPolicy p(10);
	RunResult r = run_policy(p, t.requests);
	assert_true(r.has_classes);
	assert_int_equal(r.classes.accesses[LLMCACHE_CLASS_LOOP], t.requests.size());
	assert_int_equal(r.classes.hits[LLMCACHE_CLASS_LOOP], t.requests.size());
	assert_int_equal(r.classes.accesses[LLMCACHE_CLASS_SEQ], 0);
}

static void sweep__two_policies_two_sizes__equals_single_runs(void **)
{
	Trace t = mixed_trace(20000);
	const std::vector<std::string> policies{"tlru", "tfifo"};
	const std::vector<uint64_t> caps{50, 400};
	SweepOptions opt;
	opt.jobs = 2;
	std::vector<RunResult> res = sweep(t.requests, policies, caps, test_factory, opt);
	assert_int_equal(res.size(), 4);
	bool differ = false;
	for (size_t p = 0; p < 2; p++)
		for (size_t c = 0; c < 2; c++) {
			ListPolicy single(caps[c], p == 1);
			RunResult want = run_policy(single, t.requests);
			assert_int_equal(res[p * 2 + c].hits, want.hits);
			assert_int_equal(res[p * 2 + c].misses, want.misses);
			differ |= res[p * 2 + c].hits != res[c].hits;
		}
	// The two policies and the two sizes really give different answers, so the order is checked too.
	assert_true(differ);
	assert_true(res[0].hits < res[1].hits);
}

static void sweep__four_threads__equals_one_thread(void **)
{
	Trace t = mixed_trace(30000);
	const std::vector<std::string> policies{"tlru", "tfifo", "tclass"};
	const std::vector<uint64_t> caps{1, 10, 40, 100, 300, 1000};
	SweepOptions one, four;
	one.jobs = 1;
	four.jobs = 4;
	std::vector<RunResult> a = sweep(t.requests, policies, caps, test_factory, one);
	std::vector<RunResult> b = sweep(t.requests, policies, caps, test_factory, four);
	assert_int_equal(a.size(), 18);
	for (size_t i = 0; i < a.size(); i++) {
		assert_int_equal(a[i].hits, b[i].hits);
		assert_int_equal(a[i].misses, b[i].misses);
		assert_int_equal(a[i].has_classes, b[i].has_classes);
		assert_int_equal(a[i].accesses(), t.requests.size());
	}
	assert_true(b[16].has_classes);
}

static void sweep__progress__ends_at_total(void **)
{
	Trace t = mixed_trace(5000);
	uint64_t last_done = 0, last_total = 0, calls = 0;
	SweepOptions opt;
	opt.jobs = 2;
	opt.progress_interval_ms = 1;
	opt.on_progress = [&](uint64_t done, uint64_t total) {
		assert_true(done >= last_done);
		last_done = done;
		last_total = total;
		calls++;
	};
	sweep(t.requests, {"tlru", "tfifo"}, {10, 20, 30}, test_factory, opt);
	assert_true(calls >= 1);
	assert_int_equal(last_total, 6 * t.requests.size());
	assert_int_equal(last_done, last_total);
}

static void sweep__factory_throws__rethrows_after_joining(void **)
{
	Trace t = mixed_trace(1000);
	bool threw = false;
	try {
		sweep(t.requests, {"tlru", "nosuch"}, {10, 20}, test_factory, SweepOptions{});
	} catch (const std::invalid_argument &e) {
		threw = std::string(e.what()).find("nosuch") != std::string::npos;
	}
	assert_true(threw);
}

static void resolve_cache_size__percent_and_bytes__nearest_block_at_least_one(void **)
{
	assert_int_equal(resolve_cache_size(parse_cache_size("10%"), 1234), 123);  // 123.4
	assert_int_equal(resolve_cache_size(parse_cache_size("15%"), 10), 2);      // 1.5 rounds up
	assert_int_equal(resolve_cache_size(parse_cache_size("12.5%"), 1000), 125);
	assert_int_equal(resolve_cache_size(parse_cache_size("1%"), 10), 1);       // 0.1 -> at least 1
	assert_int_equal(resolve_cache_size(parse_cache_size("150%"), 100), 150);
	assert_int_equal(resolve_cache_size(parse_cache_size("64MiB"), 5), 16384);
	assert_int_equal(resolve_cache_size(parse_cache_size("6KiB"), 5), 2);      // 1.5 blocks
	assert_int_equal(resolve_cache_size(parse_cache_size("100B"), 5), 1);
	assert_int_equal(resolve_cache_size(parse_cache_size("1000"), 5), 1000);   // plain = blocks
	assert_int_equal(parse_cache_size(" 20% ").kind, CacheSize::Kind::fraction);
	assert_true(parse_cache_size("1GB").kind == CacheSize::Kind::bytes);
	assert_true(parse_cache_size("1GB").value == 1e9);
}

static void parse_cache_size__bad_text__throws_saying_why(void **)
{
	const char *bad[] = {"0", "0%", "0MiB", "-5%", "abc", "1.5", "%", "10%%", "", "64XB", "99999999999999999999"};
	for (const char *s : bad) {
		bool threw = false;
		try {
			parse_cache_size(s);
		} catch (const std::invalid_argument &e) {
			threw = std::string(e.what()).find("cache size '") == 0;
		}
		if (!threw)
			fail_msg("'%s' was accepted", s);
	}
}

static void parse_cache_sizes__list__in_order_and_empty_item_rejected(void **)
{
	std::vector<CacheSize> v = parse_cache_sizes("5%,64MiB,1000");
	assert_int_equal(v.size(), 3);
	assert_true(v[0].kind == CacheSize::Kind::fraction && v[0].value == 0.05);
	assert_true(v[1].kind == CacheSize::Kind::bytes && v[1].text == "64MiB");
	assert_true(v[2].kind == CacheSize::Kind::blocks && v[2].value == 1000);
	bool threw = false;
	try {
		parse_cache_sizes("5%,,10%");
	} catch (const std::invalid_argument &) {
		threw = true;
	}
	assert_true(threw);
	std::vector<CacheSize> d = default_cache_sizes();
	assert_int_equal(d.size(), 10);
	assert_true(d.front().text == "10%" && d.back().text == "100%");
	assert_int_equal(resolve_cache_size(d.back(), 777), 777);
}

static Report small_report()
{
	Trace t = mixed_trace(2000);
	Report r;
	r.set_trace(t, "/tmp/dir/app.csv", "csv");
	r.policies = {"tlru", "tclass"};
	r.sizes = parse_cache_sizes("10%,50%");
	for (const auto &s : r.sizes)
		r.capacities.push_back(resolve_cache_size(s, t.footprint));
	r.results = sweep(t.requests, r.policies, r.capacities, test_factory, SweepOptions{});
	r.bandwidths = {100000000, 1000000000};
	r.latency_policy = "tclass";
	return r;
}

static void write_csv__two_policies_two_sizes__header_and_one_row_each(void **)
{
	Report r = small_report();
	std::ostringstream os;
	write_csv(os, r);
	std::istringstream is(os.str());
	std::string line;
	std::vector<std::string> lines;
	while (std::getline(is, line))
		lines.push_back(line);
	assert_int_equal(lines.size(), 5);
	assert_string_equal(lines[0].c_str(),
			    "policy,size,capacity_blocks,capacity_bytes,capacity_fraction,accesses,hits,misses,hit_ratio,"
			    "seq_accesses,seq_hits,loop_accesses,loop_hits,hot_accesses,hot_hits,fetch_s@100MB/s,"
			    "fetch_s@1GB/s");
	for (const auto &l : lines)
		assert_int_equal(std::count(l.begin(), l.end(), ','), 16);
	assert_true(lines[1].rfind("tlru,10%," + std::to_string(r.capacities[0]) + ",", 0) == 0);
	assert_true(lines[1].find(",,,,,,") != std::string::npos); // no classes for tlru
	assert_true(lines[3].rfind("tclass,10%,", 0) == 0);
}

static void write_tables__class_policy__breakdown_and_latency_shown(void **)
{
	Report r = small_report();
	std::ostringstream os;
	write_summary(os, r);
	write_tables(os, r);
	const std::string s = os.str();
	assert_true(s.find("files: 3") != std::string::npos);
	assert_true(s.find("note: a note") != std::string::npos);
	assert_true(s.find("tclass hits by class:") != std::string::npos);
	assert_true(s.find("tlru hits by class:") == std::string::npos);
	assert_true(s.find("100MB/s") != std::string::npos);
	assert_true(s.find("1GB/s") != std::string::npos);
	assert_true(s.find("100.00") != std::string::npos); // tclass hits everything
}

static void write_svg__hit_ratio__one_polyline_per_policy(void **)
{
	Report r = small_report();
	std::ostringstream os;
	write_hit_ratio_svg(os, r);
	const std::string s = os.str();
	size_t polylines = 0;
	for (size_t p = s.find("<polyline"); p != std::string::npos; p = s.find("<polyline", p + 1))
		polylines++;
	assert_int_equal(polylines, 2);
	assert_true(s.find("app.csv") != std::string::npos);
	assert_true(s.find("% of footprint") != std::string::npos);
	assert_true(s.rfind("</svg>\n") == s.size() - 7);
	std::ostringstream lat;
	write_latency_svg(lat, r);
	assert_true(lat.str().find(">1GB/s</text>") != std::string::npos);
}

static void format_bandwidth__paper_values__short_names(void **)
{
	assert_string_equal(format_bandwidth(100000000).c_str(), "100MB/s");
	assert_string_equal(format_bandwidth(1000000000).c_str(), "1GB/s");
	assert_string_equal(format_bandwidth(1500000000).c_str(), "1.5GB/s");
	assert_string_equal(format_bandwidth(20000000000).c_str(), "20GB/s");
	assert_string_equal(format_bandwidth(1234567).c_str(), "1234567B/s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(load_trace__multi_block_record__one_request_per_block),
		cmocka_unit_test(load_trace__files__numbered_densely_in_order_of_appearance),
		cmocka_unit_test(load_trace__repeated_and_overlapping_blocks__footprint_counts_distinct),
		cmocka_unit_test(load_trace__block_beyond_40_bits__throws),
		cmocka_unit_test(run_policy__loop_of_4_blocks__lru_hits_only_when_it_fits),
		cmocka_unit_test(run_policy__class_stats__copied_into_result),
		cmocka_unit_test(sweep__two_policies_two_sizes__equals_single_runs),
		cmocka_unit_test(sweep__four_threads__equals_one_thread),
		cmocka_unit_test(sweep__progress__ends_at_total),
		cmocka_unit_test(sweep__factory_throws__rethrows_after_joining),
		cmocka_unit_test(resolve_cache_size__percent_and_bytes__nearest_block_at_least_one),
		cmocka_unit_test(parse_cache_size__bad_text__throws_saying_why),
		cmocka_unit_test(parse_cache_sizes__list__in_order_and_empty_item_rejected),
		cmocka_unit_test(write_csv__two_policies_two_sizes__header_and_one_row_each),
		cmocka_unit_test(write_tables__class_policy__breakdown_and_latency_shown),
		cmocka_unit_test(write_svg__hit_ratio__one_polyline_per_policy),
		cmocka_unit_test(format_bandwidth__paper_values__short_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
