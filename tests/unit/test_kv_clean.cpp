// SPDX-License-Identifier: MIT
// Clean demotion (Documentation/kv.md, "Clean demotion and the pool update"): a page the pool update
// brings back to memory keeps its device copy, and when it is spilled again nothing is written. On a
// real block device (a loop device when root, kv_test_device.hpp), with the none, emulated and
// bounds-first backends and with two-plane precision: every spill either writes the page's K and V
// slabs or is clean, some are clean, the rows read back afterwards (selected, and one by one) equal
// those appended bit for bit, the device's slots in use are always those of the spilled pages and of
// the copies kept (none leak over promote and spill cycles, none after the store is closed), and a full
// device gives up the slots of copies held by resident pages before it refuses a spill. With
// write-through (kv.md, "Writing full pages through"), pages are written when they fill, and their
// first spill is clean.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"
#include "kv_test_store.hpp"

#include "kv/kv_store.hpp"

#include <unistd.h>

#include <cstring>
#include <random>

using namespace llmcache::kv;

namespace {

using kv_test::cleanup_devices;
using kv_test::make_device;

constexpr uint32_t PAGE = 16;

KvShape shape()
{
	KvShape s;
	s.layers = 1;
	s.q_heads = 8;
	s.kv_heads = 2;
	s.head_dim = 16;
	s.dtype = CSD_FP32;
	s.max_context = 4096;
	return s;
}

// Bytes of one fp32 page of 16 tokens in memory: K min/max, K rows, V rows.
constexpr uint64_t PAGE_BYTES = 8 * 32 + 2 * PAGE * 32 * 4;

KvOptions options(const std::string &dev, const char *backend)
{
	KvOptions o;
	o.cpu_budget = 12 * PAGE_BYTES; // the sink page, 3 recent pages, the rest to move
	o.device = dev;
	o.page_tokens = PAGE;
	o.sink_tokens = 4;
	o.recent_tokens = 32;
	o.score_block = 8;
	o.queue_depth = 8;
	o.backend = backend;
	return o;
}

std::unique_ptr<KvStore> open_store(const KvOptions &o) { return kv_test::open_store(shape(), o); }

// n tokens of normally distributed fp32 K and V rows, appended; the rows, token after token.
struct Rows {
	std::vector<uint8_t> k, v;
};
void append_rows(KvStore &kv, Rows &d, uint32_t n, std::mt19937 &rng)
{
	std::normal_distribution<float> nd;
	const uint64_t row = kv.row_bytes();
	for (uint32_t t = 0; t < n; t++) {
		std::vector<float> k(row / 4), v(row / 4);
		for (float &x : k)
			x = nd(rng);
		for (float &x : v)
			x = nd(rng);
		const int r = kv.append(0, k.data(), v.data());
		if (r)
			fprintf(stderr, "append: %s\n", kv.error().c_str());
		assert_int_equal(r, 0);
		d.k.insert(d.k.end(), (const uint8_t *)k.data(), (const uint8_t *)k.data() + row);
		d.v.insert(d.v.end(), (const uint8_t *)v.data(), (const uint8_t *)v.data() + row);
	}
}

// A query along token pos's keys: its page ranks first.
std::vector<float> query_at(const KvShape &s, const Rows &d, uint64_t row, uint32_t pos)
{
	std::vector<float> q(s.q_heads * s.head_dim);
	const float *k = reinterpret_cast<const float *>(&d.k[pos * row]);
	const uint32_t group = s.q_heads / s.kv_heads;
	for (uint32_t h = 0; h < s.q_heads; h++)
		for (uint32_t x = 0; x < s.head_dim; x++)
			q[h * s.head_dim + x] = 10.0f * k[(h / group) * s.head_dim + x];
	return q;
}

// The accounting that must hold at any time: each spill wrote the page's K and V slabs or was clean
// (a page spilled is spilled now or was brought back since), the other slabs written are those of
// pages written through as they filled, and the pool's slots in use are two per page with a device
// copy, spilled or resident.
void check_accounting(const KvStore &kv)
{
	const KvStats st = kv.stats();
	assert_int_equal(st.storage.slabs_written % 2, 0);
	assert_int_equal(st.storage.slabs_written / 2 - st.written_through + st.clean_spills, st.spilled_pages + st.promoted_pages);
	assert_int_equal(st.storage_slots_used, 2 * (st.spilled_pages + st.resident_copies));
	assert_int_equal(st.storage_bytes, st.storage_slots_used * (uint64_t)4096);
	assert_int_equal(st.spill_failures, 0);
}

void check_rows(KvStore &kv, const Rows &d)
{
	const uint64_t row = kv.row_bytes();
	std::vector<uint8_t> k(row), v(row);
	for (uint32_t t = 0; t < kv.tokens(0); t++) {
		assert_int_equal(kv.read(0, t, k.data(), v.data()), 0);
		assert_memory_equal(k.data(), &d.k[t * row], row);
		assert_memory_equal(v.data(), &d.v[t * row], row);
	}
}

// Queries that move from page to page, each held for a few selects so that its page is brought back,
// then left behind so that it goes out again: promote and spill cycles. Every selection's rows are the
// appended ones.
void cycle(KvStore &kv, const Rows &d, uint32_t rounds)
{
	const KvShape s = shape();
	const uint64_t row = kv.row_bytes();
	const uint32_t focus[] = {100, 200, 300, 150, 250, 60, 330};
	KvSelection sel;
	for (uint32_t r = 0; r < rounds; r++)
		for (uint32_t f : focus) {
			const std::vector<float> q = query_at(s, d, row, f);
			for (int i = 0; i < 4; i++) {
				assert_int_equal(kv.select(0, q.data(), 60, sel), 0);
				for (size_t j = 0; j < sel.positions.size(); j++) {
					assert_memory_equal(&sel.k[j * row], &d.k[sel.positions[j] * row], row);
					assert_memory_equal(&sel.v[j * row], &d.v[sel.positions[j] * row], row);
				}
				check_accounting(kv);
			}
		}
}

void run_cycles(const KvOptions &o)
{
	uint64_t clean = 0;
	{
		auto kv = open_store(o);
		Rows d;
		std::mt19937 rng(7);
		append_rows(*kv, d, 400, rng);
		check_accounting(*kv);
		const KvStats before = kv->stats();
		cycle(*kv, d, 3);
		const KvStats st = kv->stats();
		assert_true(st.promoted_pages >= 2);
		assert_true(st.clean_spills > 0); // pages went out again without a write: fewer writes than spills
		assert_true((st.storage.slabs_written - before.storage.slabs_written) / 2 <
			    st.spilled_pages + st.promoted_pages - before.spilled_pages - before.promoted_pages);
		clean = st.clean_spills;
		append_rows(*kv, d, 5 * PAGE, rng); // appends spill too, clean or not
		cycle(*kv, d, 1);
		check_rows(*kv, d);
	}
	assert_true(clean > 0);
	// Closed: a store opened again on the same region starts with every slot free.
	auto again = open_store(o);
	assert_int_equal(again->stats().storage_slots_used, 0);
}

void clean_demotion__none_backend__no_write_and_rows_bit_identical(void **)
{
	run_cycles(options(make_device(16 << 20), "none"));
}

void clean_demotion__emulated_backends__no_write_and_rows_bit_identical(void **)
{
	run_cycles(options(make_device(16 << 20), "emulated"));
	KvOptions o = options(make_device(16 << 20), "emulated");
	o.device_select = llmcache::csd::DeviceSelect::BoundsFirst;
	run_cycles(o);
}

// The V slab on the device holds two planes and the page in memory holds rows: the copy kept is the
// planar one, with its block table, and a clean demotion reads back right.
void clean_demotion__two_planes__device_copy_read_back_bit_identical(void **)
{
	KvOptions o = options(make_device(16 << 20), "none");
	o.planes.on = true;
	o.planes.full = 1; // every selected row with both planes: exact
	run_cycles(o);
}

// Every page that was never written (or, generally, not as the device holds it) is written when it
// leaves memory: right after the appends nothing is clean, and every spilled page wrote its slabs.
void changed_page__spilled__written(void **)
{
	auto kv = open_store(options(make_device(16 << 20), "none"));
	Rows d;
	std::mt19937 rng(3);
	append_rows(*kv, d, 400, rng);
	const KvStats st = kv->stats();
	assert_true(st.spilled_pages > 10);
	assert_int_equal(st.clean_spills, 0);
	assert_int_equal(st.resident_copies, 0);
	assert_int_equal(st.storage.slabs_written, 2 * st.spilled_pages);
	check_accounting(*kv);
	check_rows(*kv, d);
}

// A device with room for the pages spilled by the appends alone: the pages brought back keep their
// slots, so it is full; the next spills need slots for pages never written, and the copies of resident
// pages give theirs up (most selected first) instead of the spill failing. Once no copy is left, a
// full device refuses as before (test_kv_store's device_full test).
void device_full__clean_copies__dropped_before_refusing(void **)
{
	const std::string dev = make_device(16 << 20);
	uint64_t spilled = 0;
	{ // how many pages the appends spill, on a large device
		auto kv = open_store(options(dev, "none"));
		Rows d;
		std::mt19937 rng(11);
		append_rows(*kv, d, 400, rng);
		spilled = kv->stats().spilled_pages;
	}
	KvOptions o = options(dev, "none");
	o.device_capacity = spilled * 2 * 4096;
	auto kv = open_store(o);
	Rows d;
	std::mt19937 rng(11);
	append_rows(*kv, d, 400, rng);
	assert_int_equal(kv->stats().spilled_pages, spilled);
	assert_int_equal(kv->stats().storage_slots_used, 2 * spilled); // full
	const uint64_t row = kv->row_bytes();
	KvSelection sel;
	for (uint32_t f : {100u, 200u, 150u})
		for (int i = 0; i < 4; i++) {
			const std::vector<float> q = query_at(shape(), d, row, f);
			assert_int_equal(kv->select(0, q.data(), 60, sel), 0);
		}
	// The pool update's spills needed slots for pages never written: the copies gave theirs up.
	KvStats st = kv->stats();
	assert_true(st.promoted_pages >= 2);
	assert_true(st.copies_dropped > 0);
	assert_int_equal(st.storage_slots_used, 2 * spilled); // full all along
	check_accounting(*kv);
	check_rows(*kv, d);
	// More appends: the device refuses a spill only once no resident page holds a copy.
	std::normal_distribution<float> nd;
	int r = 0;
	for (uint32_t t = 0; t < 8 * PAGE && r == 0; t++) {
		std::vector<float> k(row / 4), v(row / 4);
		for (float &x : k)
			x = nd(rng);
		for (float &x : v)
			x = nd(rng);
		r = kv->append(0, k.data(), v.data()); // stored even when its spill fails
		d.k.insert(d.k.end(), (const uint8_t *)k.data(), (const uint8_t *)k.data() + row);
		d.v.insert(d.v.end(), (const uint8_t *)v.data(), (const uint8_t *)v.data() + row);
	}
	assert_int_equal(r, -ENOSPC);
	assert_non_null(std::strstr(kv->error().c_str(), "is full"));
	assert_null(std::strstr(kv->error().c_str(), "was not stored"));
	assert_int_equal(kv->stats().resident_copies, 0);
	assert_int_equal(kv->stats().storage_slots_used, 2 * spilled);
	check_rows(*kv, d); // nothing lost
}

// Write-through (kv.md, "Writing full pages through"): every page is written when its last token is
// appended and keeps that copy while in memory. So the appends' spills are clean, and the pool update's
// swaps in the selects afterwards write nothing at all, while pages go out and come back; the pages
// that were in memory after the appends and left during the selects are read back from the device
// (the copy written at append time) equal to what was appended. With and without two-plane precision.
void write_through__page_written_at_append__demoted_clean_and_read_back_equal(void **)
{
	for (const bool planes : {false, true}) {
		KvOptions o = options(make_device(16 << 20), "none");
		o.write_through = true;
		o.planes.on = planes;
		o.planes.full = 1; // every selected row with both planes: exact
		auto kv = open_store(o);
		Rows d;
		std::mt19937 rng(5);
		append_rows(*kv, d, 400, rng); // 25 full pages
		const KvStats a = kv->stats();
		assert_int_equal(a.written_through, 400 / PAGE);
		assert_int_equal(a.write_through_failures, 0);
		assert_int_equal(a.storage.slabs_written, 2 * a.written_through); // no spill wrote anything
		assert_true(a.spilled_pages > 10);
		assert_int_equal(a.clean_spills, a.spilled_pages);
		assert_int_equal(a.resident_copies, a.cpu_pages); // every page in memory has its copy
		check_accounting(*kv);
		std::vector<bool> was_resident;
		for (uint32_t pos = 0; pos < 400; pos += PAGE)
			was_resident.push_back(kv->resident(0, pos));
		cycle(*kv, d, 1); // selects only: the pool update brings pages back and spills others
		const KvStats st = kv->stats();
		assert_true(st.promoted_pages >= 2);
		assert_true(st.clean_spills > a.clean_spills);
		assert_int_equal(st.storage.bytes_written, a.storage.bytes_written); // zero bytes written in the selects
		assert_int_equal(st.storage.slabs_written, a.storage.slabs_written);
		uint32_t left = 0; // pages in memory after the appends, on the device now: their first demotion
		for (uint32_t pg = 0; pg < was_resident.size(); pg++)
			if (was_resident[pg] && !kv->resident(0, pg * PAGE)) {
				left++;
				assert_true(kv->slab_offset(0, pg * PAGE, SlabKind::K) >= 0);
			}
		assert_true(left > 0);
		check_rows(*kv, d); // read from the device where spilled: what memory held
		check_accounting(*kv);
	}
}

// Off (the default), nothing is written before a page spills.
void write_through__off__nothing_written_by_appends_alone(void **)
{
	auto kv = open_store(options(make_device(16 << 20), "none"));
	Rows d;
	std::mt19937 rng(5);
	append_rows(*kv, d, 6 * PAGE, rng); // within the budget: nothing spills
	const KvStats st = kv->stats();
	assert_int_equal(st.spilled_pages, 0);
	assert_int_equal(st.written_through, 0);
	assert_int_equal(st.storage.slabs_written, 0);
	assert_int_equal(st.resident_copies, 0);
}

int teardown(void **)
{
	cleanup_devices();
	return 0;
}

} // namespace

int main()
{
	std::atexit(cleanup_devices);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(clean_demotion__none_backend__no_write_and_rows_bit_identical),
		cmocka_unit_test(clean_demotion__emulated_backends__no_write_and_rows_bit_identical),
		cmocka_unit_test(clean_demotion__two_planes__device_copy_read_back_bit_identical),
		cmocka_unit_test(changed_page__spilled__written),
		cmocka_unit_test(device_full__clean_copies__dropped_before_refusing),
		cmocka_unit_test(write_through__page_written_at_append__demoted_clean_and_read_back_equal),
		cmocka_unit_test(write_through__off__nothing_written_by_appends_alone),
	};
	printf("storage: %s\n", geteuid() == 0 ? "loop devices (losetup) over files in /tmp" : "files in /var/tmp");
	return cmocka_run_group_tests(tests, nullptr, teardown);
}
