// SPDX-License-Identifier: MIT
// The KV store on a real block device: a loop device over a file in /tmp when root (losetup), else a
// file in /var/tmp; every device is detached and removed at the end. Spill/restore is bit-identical,
// the exact scorer's selection is the exact top-k, the none and emulated backends agree, a corrupted
// slab is an error, and a full or missing device gives its documented error without losing KV.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"
#include "kv_test_store.hpp"

#include "kv/kv_store.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

using namespace llmcache::kv;

namespace {

using kv_test::cleanup_devices;
using kv_test::corrupt_byte;
using kv_test::make_device;
using kv_test::open_store;

KvShape shape(uint32_t dtype, uint32_t layers = 2)
{
	KvShape s;
	s.layers = layers;
	s.q_heads = 8;
	s.kv_heads = 2;
	s.head_dim = 16;
	s.dtype = dtype;
	s.max_context = 4096;
	return s;
}

// Bytes of one page of 16 tokens in memory: K min/max, K rows, V rows.
uint64_t page_bytes(uint32_t dtype) { return 8 * 32 + 2 * 16 * 32 * csd_dtype_bytes(dtype); }

KvOptions options(const std::string &dev, const char *backend = "none", uint32_t dtype = CSD_FP16)
{
	KvOptions o;
	o.cpu_budget = 12 * page_bytes(dtype); // per layer: the sink page, 3 recent pages, 2 to spare
	o.device = dev;
	o.page_tokens = 16;
	o.sink_tokens = 4;
	o.recent_tokens = 32;
	o.score_block = 8;
	o.queue_depth = 8;
	o.backend = backend;
	return o;
}

// Rows of K and V for layers x n tokens; mode 0 random bits, 1 small integers, 2 normal floats.
struct Data {
	std::vector<std::vector<uint8_t>> k, v; // per layer
};
uint16_t int_to_half(int v)
{
	if (v == 0)
		return 0;
	uint32_t a = std::abs(v), e = 0;
	while ((a >> e) > 1)
		e++;
	return (v < 0 ? 0x8000 : 0) | (uint16_t)((e + 15) << 10) | (uint16_t)(((a << 10) >> e) & 0x3ff);
}
Data make_data(KvStore &kv, const KvShape &s, uint32_t n, int mode, uint32_t seed)
{
	std::mt19937 rng(seed);
	std::normal_distribution<float> nd;
	const uint64_t row = kv.row_bytes();
	const uint32_t dims = s.kv_heads * s.head_dim;
	Data d;
	d.k.resize(s.layers);
	d.v.resize(s.layers);
	for (uint32_t l = 0; l < s.layers; l++) {
		for (auto *buf : {&d.k[l], &d.v[l]}) {
			buf->resize(n * row);
			for (size_t i = 0; i < (size_t)n * dims; i++) {
				if (s.dtype == CSD_FP32) {
					const float f = mode == 1 ? (float)((int)(rng() % 9) - 4) : nd(rng);
					std::memcpy(&(*buf)[i * 4], &f, 4);
				} else {
					const uint16_t h = mode == 0 ? (uint16_t)rng() : int_to_half((int)(rng() % 9) - 4);
					std::memcpy(&(*buf)[i * 2], &h, 2);
				}
			}
		}
	}
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t l = 0; l < s.layers; l++) {
			int r = kv.append(l, &d.k[l][t * row], &d.v[l][t * row]);
			if (r)
				fprintf(stderr, "append: %s\n", kv.error().c_str());
			assert_int_equal(r, 0);
		}
	return d;
}

void spill_restore__small_budget__bit_identical(void **)
{
	for (uint32_t dt : {0u + CSD_FP16, 0u + CSD_FP32, 0u + CSD_BF16, 3u}) {
		const bool uring = dt != 3; // the last round: fp16 through the synchronous pread/pwrite path
		if (!uring)
			dt = CSD_FP16;
		const KvShape s = shape(dt);
		KvOptions o = options(make_device(16 << 20), "none", dt);
		o.io_uring = uring;
		auto kv = open_store(s, o);
		assert_int_equal(kv->backend_note().empty(), uring);
		const uint32_t n = 500;
		Data d = make_data(*kv, s, n, 0, 1 + dt);
		const KvStats st = kv->stats();
		assert_true(st.spilled_pages > 20);
		assert_true(st.cpu_bytes <= 12 * page_bytes(dt));
		assert_int_equal(st.storage.slabs_written, 2 * st.spilled_pages);
		const uint64_t row = kv->row_bytes();
		std::vector<uint8_t> k(row), v(row);
		uint32_t spilled = 0;
		for (uint32_t l = 0; l < s.layers; l++)
			for (uint32_t t = 0; t < n; t++) {
				spilled += !kv->resident(l, t);
				assert_int_equal(kv->read(l, t, k.data(), v.data()), 0);
				assert_memory_equal(k.data(), &d.k[l][t * row], row);
				assert_memory_equal(v.data(), &d.v[l][t * row], row);
			}
		assert_true(spilled > n);
		KvSelection sel; // a budget of everything: every row comes back, through the gather path
		std::vector<float> q(s.q_heads * s.head_dim, 0.5f);
		assert_int_equal(kv->select(1, q.data(), n, sel), 0);
		assert_int_equal(sel.positions.size(), n);
		assert_memory_equal(sel.k.data(), d.k[1].data(), n * row);
		assert_memory_equal(sel.v.data(), d.v[1].data(), n * row);
	}
}

std::vector<uint32_t> direct_topk(const KvShape &s, const Data &d, uint32_t layer, const std::vector<float> &q,
				  uint32_t n, uint32_t budget, uint32_t sink, uint32_t recent)
{
	const uint32_t dims = s.kv_heads * s.head_dim, group = s.q_heads / s.kv_heads;
	const uint32_t recent_from = std::max(sink, n - recent);
	std::vector<std::pair<double, uint32_t>> sc;
	for (uint32_t t = sink; t < recent_from; t++) {
		double acc = 0;
		for (uint32_t h = 0; h < s.q_heads; h++)
			for (uint32_t x = 0; x < s.head_dim; x++) {
				const size_t i = (size_t)t * dims + (h / group) * s.head_dim + x;
				const float kf = s.dtype == CSD_FP32 ? reinterpret_cast<const float *>(d.k[layer].data())[i]
								     : csd_half_to_float(reinterpret_cast<const uint16_t *>(d.k[layer].data())[i]);
				acc += (double)q[h * s.head_dim + x] * kf;
			}
		sc.push_back({-acc, t}); // ascending: best score first, then lower position
	}
	std::sort(sc.begin(), sc.end());
	std::vector<uint32_t> out;
	for (uint32_t t = 0; t < sink; t++)
		out.push_back(t);
	for (size_t i = 0; i < budget - sink - (n - recent_from) && i < sc.size(); i++)
		out.push_back(sc[i].second);
	for (uint32_t t = recent_from; t < n; t++)
		out.push_back(t);
	std::sort(out.begin(), out.end());
	return out;
}

void select__exact_scorer__equals_direct_topk(void **)
{
	for (const char *backend : {"none", "emulated"}) {
		const KvShape s = shape(CSD_FP16);
		const KvOptions o = options(make_device(16 << 20), backend);
		auto kv = open_store(s, o);
		assert_string_equal(kv->backend_name(), backend);
		const uint32_t n = 400, budget = 100;
		Data d = make_data(*kv, s, n, 1, 7);
		std::mt19937 rng(5);
		const uint64_t row = kv->row_bytes();
		for (int step = 0; step < 6; step++) {
			std::vector<float> q(s.q_heads * s.head_dim);
			for (auto &x : q)
				x = (float)((int)(rng() % 9) - 4);
			const uint32_t layer = step % 2;
			KvSelection sel;
			assert_int_equal(kv->select(layer, q.data(), budget, sel), 0);
			assert_true(sel.positions == direct_topk(s, d, layer, q, n, budget, o.sink_tokens, o.recent_tokens));
			for (size_t i = 0; i < sel.positions.size(); i++) {
				assert_memory_equal(&sel.k[i * row], &d.k[layer][sel.positions[i] * row], row);
				assert_memory_equal(&sel.v[i * row], &d.v[layer][sel.positions[i] * row], row);
			}
		}
		const KvStats st = kv->stats();
		assert_true(st.scored_storage > 0 && st.scored_cpu > 0 && st.fetched_pages > 0);
		assert_true(st.cpu_score_ns > 0 && st.storage_score_ns > 0 && st.beta() > 0);
	}
}

void backends__none_and_emulated__identical_selections(void **)
{
	for (auto est : {llmcache::csd::Estimator::Exact, llmcache::csd::Estimator::QuestBounds}) {
		const KvShape s = shape(CSD_FP32, 3);
		KvOptions on = options(make_device(16 << 20), "none", CSD_FP32),
			  oe = options(make_device(16 << 20), "emulated", CSD_FP32);
		on.estimator = oe.estimator = est;
		auto a = open_store(s, on), b = open_store(s, oe);
		const uint32_t n = 333;
		make_data(*a, s, n, 2, 9);
		make_data(*b, s, n, 2, 9);
		std::mt19937 rng(2);
		std::normal_distribution<float> nd;
		for (int step = 0; step < 9; step++) {
			std::vector<float> q(s.q_heads * s.head_dim);
			for (auto &x : q)
				x = nd(rng);
			KvSelection sa, sb;
			const uint32_t budget = 40 + 30 * step;
			assert_int_equal(a->select(step % 3, q.data(), budget, sa), 0);
			assert_int_equal(b->select(step % 3, q.data(), budget, sb), 0);
			assert_int_equal(sa.positions.size(), budget);
			assert_true(sa.positions == sb.positions);
			assert_true(sa.k == sb.k && sa.v == sb.v);
		}
		// Emulated scoring reads inside the "device": the host reads only the fetched slabs.
		assert_true(b->stats().storage.bytes_read < a->stats().storage.bytes_read);
	}
}

void pool_update__page_selected_often__promoted_within_budget(void **)
{
	const KvShape s = shape(CSD_FP32, 1);
	auto kv = open_store(s, options(make_device(16 << 20), "none", CSD_FP32));
	const uint32_t n = 400;
	Data d = make_data(*kv, s, n, 2, 21);
	// A query aligned with token 100's key: its page ranks first every time.
	std::vector<float> q(s.q_heads * s.head_dim);
	const float *k100 = reinterpret_cast<const float *>(&d.k[0][100 * kv->row_bytes()]);
	for (uint32_t h = 0; h < s.q_heads; h++)
		for (uint32_t x = 0; x < s.head_dim; x++)
			q[h * s.head_dim + x] = 10.0f * k100[(h / 4) * s.head_dim + x];
	assert_false(kv->resident(0, 100));
	KvSelection sel;
	for (int step = 0; step < 6; step++) {
		assert_int_equal(kv->select(0, q.data(), 60, sel), 0);
		assert_true(std::binary_search(sel.positions.begin(), sel.positions.end(), 100u));
	}
	assert_true(kv->resident(0, 100));
	const uint64_t promoted = kv->stats().promoted_pages, spilled = kv->stats().storage.slabs_written;
	assert_true(promoted > 0);
	for (int step = 0; step < 4; step++) // the same query again: placement is stable, no ping-pong
		assert_int_equal(kv->select(0, q.data(), 60, sel), 0);
	const KvStats st = kv->stats();
	assert_int_equal(st.promoted_pages, promoted);
	assert_int_equal(st.storage.slabs_written, spilled);
	assert_true(st.cpu_bytes <= 12 * page_bytes(CSD_FP32));
	std::vector<uint8_t> k(kv->row_bytes()), v(kv->row_bytes());
	for (uint32_t t = 0; t < n; t++) {
		assert_int_equal(kv->read(0, t, k.data(), v.data()), 0);
		assert_memory_equal(k.data(), &d.k[0][t * kv->row_bytes()], kv->row_bytes());
		assert_memory_equal(v.data(), &d.v[0][t * kv->row_bytes()], kv->row_bytes());
	}
}

void select_begin_end__split__same_as_select_and_guarded(void **)
{
	const KvShape s = shape(CSD_FP16);
	auto a = open_store(s, options(make_device(16 << 20), "emulated"));
	auto b = open_store(s, options(make_device(16 << 20), "emulated"));
	make_data(*a, s, 300, 1, 5);
	Data d = make_data(*b, s, 300, 1, 5);
	std::vector<float> q(s.q_heads * s.head_dim);
	for (size_t i = 0; i < q.size(); i++)
		q[i] = (float)((int)(i % 7) - 3);
	KvSelection sa, sb;
	assert_int_equal(a->select(1, q.data(), 90, sa), 0);
	assert_int_equal(b->select_begin(1, q.data(), 90), 0);
	assert_int_equal(b->select_begin(0, q.data(), 90), -EBUSY);
	assert_int_equal(b->append(0, d.k[0].data(), d.v[0].data()), -EBUSY);
	assert_int_equal(b->select_end(sb), 0);
	assert_true(sa.positions == sb.positions && sa.k == sb.k && sa.v == sb.v);
	assert_int_equal(b->select_end(sb), -EINVAL);
	assert_int_equal(b->append(0, d.k[0].data(), d.v[0].data()), 0);
}


void checksum__corrupted_slab__error_not_data(void **)
{
	for (const char *backend : {"none", "emulated"}) {
		const KvShape s = shape(CSD_FP16);
		const std::string dev = make_device(16 << 20);
		auto kv = open_store(s, options(dev, backend));
		make_data(*kv, s, 300, 1, 3);
		const uint64_t row = kv->row_bytes();
		std::vector<uint8_t> k(row), v(row);
		// V payload byte of token 40: reading it back is an error naming the device and offset.
		const int64_t voff = kv->slab_offset(0, 40, SlabKind::V);
		assert_true(voff >= 0);
		corrupt_byte(dev, voff + 8 * row + 3);
		assert_int_equal(kv->read(0, 40, k.data(), v.data()), -EBADMSG);
		assert_non_null(std::strstr(kv->error().c_str(), "payload checksum mismatch"));
		assert_non_null(std::strstr(kv->error().c_str(), std::to_string(voff).c_str()));
		// A header byte of a K slab (its page number): scoring on the device or host refuses it.
		const int64_t koff = kv->slab_offset(1, 100, SlabKind::K);
		assert_true(koff >= 0);
		corrupt_byte(dev, koff + slab_header_at(4096) + 16); // the test shape's slabs are 4096 bytes
		std::vector<float> q(s.q_heads * s.head_dim, 1.0f);
		KvSelection sel;
		assert_int_equal(kv->select(1, q.data(), 120, sel), -EBADMSG);
		assert_true(sel.positions.empty());
		assert_non_null(std::strstr(kv->error().c_str(), "corrupted KV slab"));
		// Untouched slabs still read fine.
		assert_int_equal(kv->read(0, 200, k.data(), v.data()), 0);
	}
}

void device_full__tiny_device__enospc_and_nothing_lost(void **)
{
	const KvShape s = shape(CSD_FP16, 1);
	KvOptions o = options(make_device(16 << 20));
	o.device_capacity = 6 * 4096; // three pages of K and V
	auto kv = open_store(s, o);
	const uint64_t row = kv->row_bytes();
	std::mt19937 rng(4);
	std::vector<uint8_t> all;
	int full = 0, refused = 0;
	for (uint32_t t = 0; t < 400; t++) {
		std::vector<uint8_t> k(row), v(row);
		for (auto &x : k)
			x = (uint8_t)rng();
		for (auto &x : v)
			x = (uint8_t)rng();
		const int r = kv->append(0, k.data(), v.data());
		if (r) {
			assert_int_equal(r, -ENOSPC);
			assert_non_null(std::strstr(kv->error().c_str(), "is full"));
		}
		if (r && std::strstr(kv->error().c_str(), "was not stored")) {
			refused++;
			continue;
		}
		assert_int_equal(refused, 0); // once refused, every token is: nothing is stored out of order
		if (r) {
			assert_non_null(std::strstr(kv->error().c_str(), "stays in memory"));
			full++;
		}
		all.insert(all.end(), k.begin(), k.end());
		all.insert(all.end(), v.begin(), v.end());
	}
	assert_true(full > 0);
	assert_true(refused > 0);
	// Memory stops a quarter over the budget: 12 pages and 3, with the 3 the device took.
	assert_int_equal(kv->stats().spilled_pages, 3);
	assert_true(kv->stats().cpu_bytes <= o.cpu_budget + o.cpu_budget / 4);
	assert_int_equal(kv->tokens(0), (3 + 15) * 16);
	assert_int_equal(kv->tokens(0), 400 - refused);
	assert_true(kv->stats().spill_failures > 0);
	std::vector<uint8_t> k(row), v(row);
	for (uint32_t t = 0; t < kv->tokens(0); t++) {
		assert_int_equal(kv->read(0, t, k.data(), v.data()), 0);
		assert_memory_equal(k.data(), &all[2 * t * row], row);
		assert_memory_equal(v.data(), &all[(2 * t + 1) * row], row);
	}
}

// A device that cannot take the spills (full here; failing with -EIO in tests/vm/kv-fault-check.sh)
// is tried again when a page fills, not at every token: every token used to rewrite all the pages
// stuck in memory. Every append over the budget still reports the failure, and nothing is lost.
void spill_failure__retried_when_a_page_fills__reported_at_every_token(void **)
{
	const KvShape s = shape(CSD_FP16, 1);
	KvOptions o = options(make_device(16 << 20));
	o.device_capacity = 6 * 4096; // three pages of K and V
	auto kv = open_store(s, o);
	const uint64_t row = kv->row_bytes();
	std::vector<uint8_t> k(row), v(row);
	uint32_t failed_from = 0, ok_after = 0;
	const uint32_t n = 800;
	const auto t0 = std::chrono::steady_clock::now();
	for (uint32_t t = 0; t < n; t++) {
		std::memset(k.data(), (int)t, row);
		std::memset(v.data(), (int)~t, row);
		const int r = kv->append(0, k.data(), v.data());
		if (r) {
			assert_int_equal(r, -ENOSPC);
			assert_non_null(std::strstr(kv->error().c_str(), "is full"));
			failed_from = failed_from ? failed_from : t + 1;
		} else if (failed_from) {
			ok_after++;
		}
	}
	assert_true(failed_from > 0);
	assert_int_equal(ok_after, 0);
	const uint32_t stored = kv->tokens(0), pages_filled_after = (stored - failed_from) / o.page_tokens + 1;
	assert_true(stored > failed_from && stored < n);
	const KvStats st = kv->stats();
	printf("spill batches %llu, pages filled since the first failure %u, tokens stored %u of %u\n",
	       (unsigned long long)st.spill_batches, pages_filled_after, stored, n);
	// One retry per page filled, and one per 100 ms of refused appends.
	const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
	assert_true(st.spill_batches <= failed_from / o.page_tokens + pages_filled_after + 2 + uint64_t(ms) / 100);
	for (uint32_t t = 0; t < stored; t++) {
		assert_int_equal(kv->read(0, t, k.data(), v.data()), 0);
		assert_true(k[0] == (uint8_t)t && k[row - 1] == (uint8_t)t && v[0] == (uint8_t)~t);
	}
}

void missing_device__open__enoent_with_advice(void **)
{
	std::unique_ptr<KvStore> kv;
	std::string err;
	assert_int_equal(KvStore::open(shape(CSD_FP16), options("/nonexistent/llmcache-kv-device"), kv, err), -ENOENT);
	assert_non_null(std::strstr(err.c_str(), "does not exist"));
	assert_null(kv.get());
	assert_int_equal(KvStore::open(shape(CSD_FP16), options("/tmp"), kv, err) < 0, 1);
	assert_true(!err.empty());
}

void memory_only__over_budget__enospc_and_kept(void **)
{
	const KvShape s = shape(CSD_FP16, 1);
	auto kv = open_store(s, options(""));
	const uint64_t row = kv->row_bytes();
	std::vector<uint8_t> k(row, 0x11), v(row, 0x22);
	int r = 0;
	for (uint32_t t = 0; t < 200 && !r; t++)
		r = kv->append(0, k.data(), v.data());
	assert_int_equal(r, -ENOSPC);
	assert_non_null(std::strstr(kv->error().c_str(), "no storage device"));
	std::vector<uint8_t> k2(row), v2(row);
	assert_int_equal(kv->read(0, kv->tokens(0) - 1, k2.data(), v2.data()), 0);
	assert_true(k2 == k && v2 == v);
}

void xrt_backend__no_card__falls_back_to_emulated(void **)
{
	auto kv = open_store(shape(CSD_FP16), options(make_device(1 << 20), "xrt"));
	assert_string_equal(kv->backend_name(), "emulated");
	assert_non_null(std::strstr(kv->backend_note().c_str(), "using the emulated backend"));
	std::unique_ptr<KvStore> bad;
	std::string err;
	assert_int_equal(KvStore::open(shape(CSD_FP16), options(make_device(1 << 20), "fpga"), bad, err), -EINVAL);
	assert_non_null(std::strstr(err.c_str(), "none, emulated or xrt"));
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
		cmocka_unit_test(spill_restore__small_budget__bit_identical),
		cmocka_unit_test(select__exact_scorer__equals_direct_topk),
		cmocka_unit_test(backends__none_and_emulated__identical_selections),
		cmocka_unit_test(pool_update__page_selected_often__promoted_within_budget),
		cmocka_unit_test(select_begin_end__split__same_as_select_and_guarded),
		cmocka_unit_test(checksum__corrupted_slab__error_not_data),
		cmocka_unit_test(device_full__tiny_device__enospc_and_nothing_lost),
		cmocka_unit_test(spill_failure__retried_when_a_page_fills__reported_at_every_token),
		cmocka_unit_test(missing_device__open__enoent_with_advice),
		cmocka_unit_test(memory_only__over_budget__enospc_and_kept),
		cmocka_unit_test(xrt_backend__no_card__falls_back_to_emulated),
	};
	printf("storage: %s\n", geteuid() == 0 ? "loop devices (losetup) over files in /tmp" : "files in /var/tmp");
	return cmocka_run_group_tests(tests, nullptr, teardown);
}
