// SPDX-License-Identifier: MIT
// Fetching only the selected rows: the storage pool reads runs of 4 KiB blocks of a slab, each checked
// against the slab's block CRC32C table held in memory. A partial read equals the whole slab's bytes,
// a corrupted block inside a read run is an error, one outside it does not matter, and the bytes
// counted as read are the bytes read. Also the CRC32C forms these rest on (per-block, fused copy).
// Devices: a loop device over a file in /tmp when root, else a file in /var/tmp, removed at the end.
#include "cmocka_cpp.hpp"
#include "kv_test_device.hpp"

#include "kv/kv_store.hpp"
#include "kvio/crc32c.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

using namespace llmcache::kv;

namespace {

using kv_test::cleanup_devices;
using kv_test::corrupt_byte;
using kv_test::make_device;

// Reads [at, at + len) of the device with O_DIRECT (len and at multiples of 4096).
std::vector<uint8_t> device_bytes(const std::string &dev, uint64_t at, uint64_t len)
{
	const int fd = open(dev.c_str(), O_RDONLY | O_DIRECT);
	assert_true(fd >= 0);
	void *buf = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_int_equal(pread(fd, buf, len, (off_t)at), (ssize_t)len);
	std::vector<uint8_t> out(static_cast<uint8_t *>(buf), static_cast<uint8_t *>(buf) + len);
	munmap(buf, len);
	close(fd);
	return out;
}


void fill_random(uint8_t *p, size_t n, std::mt19937_64 &rng)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rng();
}

void crc32c_blocks_and_copy__random_data__equal_plain_crc(void **)
{
	std::mt19937_64 rng(3);
	std::vector<uint8_t> src(7 * CRC32C_BLOCK + 333), dst(src.size());
	fill_random(src.data(), src.size(), rng);
	for (size_t n : {0, 1, 2, 3, 4, 5, 7}) {
		std::vector<uint32_t> out(n + 1, 0xabcdef01u);
		crc32c_blocks(src.data(), n, out.data());
		for (size_t i = 0; i < n; i++)
			assert_int_equal(out[i], crc32c_portable(src.data() + i * CRC32C_BLOCK, CRC32C_BLOCK));
		assert_int_equal(out[n], 0xabcdef01u); // nothing past the n blocks
	}
	for (size_t len : {0ul, 5ul, 4096ul, 12288ul, 12289ul, src.size() - 1}) {
		std::fill(dst.begin(), dst.end(), 0);
		assert_int_equal(crc32c_copy(dst.data(), src.data() + 1, len, 0x1234), crc32c_portable(src.data() + 1, len, 0x1234));
		assert_memory_equal(dst.data(), src.data() + 1, len);
		assert_int_equal(dst[len], 0);
	}
}

// The plain form runs crc32 streams and a carry-less-multiply fold side by side in rounds of 20480
// bytes, then three-stream rounds of 1024, 256 and 64 bytes, then one chain: every length across
// those boundaries, unaligned starts, a chained initial value, and a flipped bit in either part of a
// round (the streams and the folded region) give the byte table's CRC.
void crc32c__hybrid_rounds__equal_table(void **)
{
	std::mt19937_64 rng(5);
	std::vector<uint8_t> buf(299008 + 16);
	fill_random(buf.data(), buf.size(), rng);
	const size_t round = 20480;
	std::vector<size_t> lens = {round - 1, round, round + 1, 2 * round + 3 * 1024 + 192 + 5, 298944, 299008};
	for (size_t len = 0; len < 2 * round + 200; len += 61)
		lens.push_back(len);
	for (size_t len : lens)
		for (size_t off : {0ul, 3ul, 8ul})
			for (uint32_t init : {0u, 0x89abcdefu})
				assert_int_equal(crc32c(buf.data() + off, len, init), crc32c_portable(buf.data() + off, len, init));
	const uint32_t clean = crc32c(buf.data(), 298944);
	for (size_t at : {size_t(5), size_t(3 * 4096 - 1), size_t(3 * 4096 + 17), size_t(round - 1), size_t(298944 - 1)}) {
		buf[at] ^= 0x10;
		assert_int_equal(crc32c(buf.data(), 298944), crc32c_portable(buf.data(), 298944));
		assert_int_not_equal(crc32c(buf.data(), 298944), clean);
		buf[at] ^= 0x10;
	}
}

// BlockCrcs fed in uneven pieces from a start that is not the slab's, then finished, equals the table
// of the whole slab.
void block_crcs__fed_then_finished__equal_whole_table(void **)
{
	std::mt19937_64 rng(11);
	const uint64_t sb = 7 * SLAB_ALIGN;
	for (uint64_t from : {uint64_t(0), uint64_t(4096), uint64_t(8192)}) {
		std::vector<uint8_t> slab(sb);
		fill_random(slab.data(), sb, rng);
		BlockCrcs b(sb, from);
		// rows of 777 bytes from `from`, or (as K rows after the key bounds) from slab byte 3100
		for (uint64_t off = from ? 3100 : 0, step = 777; off + step <= sb - 1000; off += step)
			b.feed(off, slab.data() + off, step);
		b.finish(slab.data());
		std::vector<uint32_t> whole(sb / SLAB_ALIGN);
		slab_block_crcs(slab.data(), sb, whole.data());
		assert_int_equal(b.size(), whole.size());
		assert_memory_equal(b.data(), whole.data(), whole.size() * 4);
		assert_int_equal(whole[6], crc32c(slab.data() + 6 * SLAB_ALIGN, SLAB_ALIGN - 64)); // nor the header at the end
	}
}

struct PoolFixture {
	std::string dev;
	std::unique_ptr<StoragePool> pool;
	std::vector<SlabBuffer> slabs;
	std::vector<std::vector<uint32_t>> tables;
	std::vector<SlabRead> whole;
};

// Four slabs of 9 blocks of random payload written in place, with their block tables.
PoolFixture write_slabs()
{
	PoolFixture f;
	f.dev = make_device(8 << 20);
	const uint64_t sb = 9 * SLAB_ALIGN;
	std::string err;
	assert_int_equal(StoragePool::open({f.dev, 0, 0, sb, 4, true}, f.pool, err), 0);
	std::mt19937_64 rng(17);
	std::vector<SlabWrite> w;
	for (uint32_t i = 0; i < 4; i++) {
		f.slabs.emplace_back(sb, sb - 64);
		fill_random(f.slabs.back().get(), sb - 64, rng);
		f.tables.emplace_back(sb / SLAB_ALIGN);
		slab_block_crcs(f.slabs.back().slab(), sb, f.tables.back().data());
		w.push_back({{f.pool->pool_id(), 0, i, SlabKind::V}, 32, f.slabs.back().get(), sb - 64, nullptr, 0,
			     f.slabs.back().slab()});
	}
	std::vector<int64_t> res;
	assert_int_equal(f.pool->write(w, res, err), 0);
	for (uint32_t i = 0; i < 4; i++)
		f.whole.push_back({w[i].id, (uint64_t)res[i]});
	return f;
}

int read_runs(PoolFixture &f, const std::vector<SlabRead> &runs, std::vector<std::vector<uint8_t>> &got, std::string &err)
{
	got.assign(runs.size(), {});
	return f.pool->read(runs, [&](size_t i, const uint8_t *data) {
		got[i].assign(data, data + (uint64_t)runs[i].count * SLAB_ALIGN);
		return 0;
	}, err);
}

// The pool's ring takes submissions only from the thread that set it up (SINGLE_ISSUER, as fio's):
// a pool opened on one thread and read on others sets its ring up again there and reads the same bytes.
void storage_read__other_threads__ring_set_up_again_same_bytes(void **)
{
	PoolFixture f = write_slabs();
	const uint64_t sb = f.pool->slab_bytes();
	for (int t = 0; t < 2; t++) {
		int r = -1;
		std::string err;
		std::vector<std::vector<uint8_t>> got(f.whole.size());
		std::thread([&] {
			r = f.pool->read(f.whole, [&](size_t i, const uint8_t *slab) {
				got[i].assign(slab, slab + sb - 64);
				return 0;
			}, err);
		}).join();
		assert_int_equal(r, 0);
		for (size_t i = 0; i < f.whole.size(); i++)
			assert_memory_equal(got[i].data(), f.slabs[i].get(), sb - 64);
	}
	assert_true(f.pool->note().empty()); // still io_uring, not the synchronous fallback
}

void storage_read__block_runs__bit_identical_to_whole_slab_and_bytes_counted(void **)
{
	PoolFixture f = write_slabs();
	const uint64_t sb = f.pool->slab_bytes();
	std::vector<std::vector<uint8_t>> whole(4);
	std::vector<SlabBuffer> copies;
	for (int i = 0; i < 4; i++)
		copies.emplace_back(sb, sb - 64);
	std::vector<SlabRead> wr = f.whole;
	for (int i = 0; i < 4; i++)
		wr[i].dst = copies[i].get(); // the fused verify-and-copy
	std::string err;
	assert_int_equal(f.pool->read(wr, [&](size_t i, const uint8_t *slab) {
		whole[i].assign(slab, slab + sb);
		return 0;
	}, err), 0);
	for (int i = 0; i < 4; i++) {
		assert_memory_equal(copies[i].get(), f.slabs[i].get(), sb - 64);
		assert_memory_equal(whole[i].data(), f.slabs[i].get(), sb - 64);
	}
	std::vector<SlabRead> runs;
	uint64_t want = 0;
	for (uint32_t i = 0; i < 4; i++)
		for (auto [first, count] : {std::pair{0u, 1u}, {2u, 3u}, {8u, 1u}, {i, 9 - i}}) {
			SlabRead r = f.whole[i];
			r.block_crcs = f.tables[i].data(), r.first = first, r.count = count;
			runs.push_back(r);
			want += count * SLAB_ALIGN;
		}
	const StorageStats before = f.pool->stats();
	std::vector<std::vector<uint8_t>> got;
	assert_int_equal(read_runs(f, runs, got, err), 0);
	for (size_t j = 0; j < runs.size(); j++) {
		const uint64_t at = runs[j].first * SLAB_ALIGN, len = runs[j].count * SLAB_ALIGN;
		assert_memory_equal(got[j].data(), whole[j / 4].data() + at, len);
		assert_memory_equal(got[j].data(), device_bytes(f.dev, runs[j].offset + at, len).data(), len);
	}
	const StorageStats after = f.pool->stats();
	assert_int_equal(after.bytes_read - before.bytes_read, want);
	assert_int_equal(after.runs_read - before.runs_read, runs.size());
	assert_int_equal(after.slabs_read, before.slabs_read);
	// A run past the slab's end or without a table is refused before any I/O.
	SlabRead bad = runs[0];
	bad.first = 8, bad.count = 2;
	assert_int_equal(read_runs(f, {bad}, got, err), -EINVAL);
	bad.first = 0, bad.count = 1, bad.block_crcs = nullptr;
	assert_int_equal(read_runs(f, {bad}, got, err), -EINVAL);
	assert_int_equal(f.pool->stats().bytes_read, after.bytes_read);
}

void storage_read__corrupted_block__error_inside_run_only(void **)
{
	PoolFixture f = write_slabs();
	// Block 4 of slab 1 has a bit flipped on the device (and, for the whole-slab read, the payload).
	corrupt_byte(f.dev, f.whole[1].offset + 4 * SLAB_ALIGN + 123);
	auto run = [&](uint32_t first, uint32_t count) {
		SlabRead r = f.whole[1];
		r.block_crcs = f.tables[1].data(), r.first = first, r.count = count;
		return r;
	};
	std::vector<std::vector<uint8_t>> got;
	std::string err;
	for (auto [first, count] : {std::pair{4u, 1u}, {3u, 2u}, {0u, 9u}, {4u, 5u}}) {
		got.clear();
		assert_int_equal(read_runs(f, {run(first, count)}, got, err), -EBADMSG);
		assert_true(got[0].empty()); // the consumer never saw it
		assert_non_null(std::strstr(err.c_str(), "payload checksum mismatch in block 4"));
		assert_non_null(std::strstr(err.c_str(), std::to_string(f.whole[1].offset + 4 * SLAB_ALIGN).c_str()));
	}
	const std::vector<SlabRead> clean = {run(0, 4), run(5, 4), run(3, 1)};
	assert_int_equal(read_runs(f, clean, got, err), 0);
	for (size_t j = 0; j < clean.size(); j++) {
		const uint64_t at = clean[j].first * SLAB_ALIGN;
		const uint8_t *want = f.slabs[1].slab() + at;
		const uint64_t header = clean[j].first + clean[j].count == 9 ? 64 : 0; // sealed on the device
		assert_memory_equal(got[j].data(), want, clean[j].count * SLAB_ALIGN - header);
	}
	assert_int_equal(f.pool->read(std::span(&f.whole[1], 1), [](size_t, const uint8_t *) { return 0; }, err), -EBADMSG);
}

// A store whose rows straddle 4 KiB blocks (3 KV heads x 128, fp16: 768-byte rows), pages of 32
// tokens: K slab 7 blocks (bounds, then keys from byte 3072), V slab 7 blocks (rows in blocks 0-5).
KvShape row_shape()
{
	KvShape s;
	s.layers = 1, s.q_heads = 6, s.kv_heads = 3, s.head_dim = 128, s.dtype = CSD_FP16, s.max_context = 8192;
	return s;
}

struct StoreFixture {
	std::string dev;
	std::unique_ptr<KvStore> kv;
	std::vector<uint8_t> k, v;
	uint32_t n = 0;
};

StoreFixture make_store(uint32_t n)
{
	StoreFixture f;
	f.dev = make_device(64 << 20);
	KvOptions o;
	o.device = f.dev;
	o.page_tokens = 32, o.sink_tokens = 4, o.recent_tokens = 64, o.score_block = 16, o.queue_depth = 8;
	o.backend = "emulated"; // scores on its own fd: the pool's reads are the fetches alone
	const KvShape s = row_shape();
	const uint64_t page = 8ull * 384 + 2ull * 32 * 768;
	o.cpu_budget = 8 * page;
	std::string err;
	assert_int_equal(KvStore::open(s, o, f.kv, err), 0);
	const uint64_t row = f.kv->row_bytes();
	assert_int_equal(row, 768);
	std::mt19937_64 rng(29);
	f.n = n;
	f.k.resize(n * row), f.v.resize(n * row);
	for (size_t i = 0; i < f.k.size() / 2; i++) {
		// keys: finite fp16 of magnitude 1/8 to 8, random signs; values: any bits
		const uint16_t hk = (uint16_t)((rng() & 0x83ff) | (12 + rng() % 6) << 10), hv = (uint16_t)rng();
		std::memcpy(&f.k[2 * i], &hk, 2), std::memcpy(&f.v[2 * i], &hv, 2);
	}
	for (uint32_t t = 0; t < n; t++)
		assert_int_equal(f.kv->append(0, &f.k[t * row], &f.v[t * row]), 0);
	assert_true(f.kv->stats().spilled_pages >= 20);
	return f;
}

std::vector<float> query(uint32_t seed)
{
	std::mt19937 rng(seed);
	std::normal_distribution<float> nd;
	std::vector<float> q(6 * 128);
	for (auto &x : q)
		x = nd(rng);
	return q;
}

// Blocks of a slab holding rows t of a page: K rows start after the header and the key bounds.
std::vector<uint32_t> blocks_of(const std::vector<uint32_t> &rows, SlabKind kind)
{
	std::vector<uint32_t> b;
	for (uint32_t t : rows) {
		const uint64_t a = (kind == SlabKind::K ? 8 * 384 : 0) + t * 768ull;
		for (uint64_t x = a / 4096; x <= (a + 767) / 4096; x++)
			b.push_back((uint32_t)x);
	}
	std::sort(b.begin(), b.end());
	b.erase(std::unique(b.begin(), b.end()), b.end());
	return b;
}

// The rows fetched from spilled pages are the appended rows and the rows of the whole slabs on the
// device, and the pool read exactly the blocks holding them (plus whole slabs for promoted pages).
void select__spilled_rows__partial_fetch_bit_identical_and_bytes_exact(void **)
{
	StoreFixture f = make_store(1200);
	KvStore &kv = *f.kv;
	const uint64_t row = kv.row_bytes(), sb = 7 * 4096;
	for (uint32_t step = 0; step < 5; step++) {
		const std::vector<float> q = query(step);
		std::vector<bool> spilled(f.n);
		std::vector<int64_t> koff(f.n), voff(f.n);
		for (uint32_t t = 0; t < f.n; t++) {
			spilled[t] = !kv.resident(0, t);
			koff[t] = kv.slab_offset(0, t, SlabKind::K), voff[t] = kv.slab_offset(0, t, SlabKind::V);
		}
		const KvStats before = kv.stats();
		KvSelection sel;
		assert_int_equal(kv.select(0, q.data(), 150, sel), 0);
		const KvStats after = kv.stats();
		uint64_t want = 0, partial_pages = 0;
		for (size_t i = 0; i < sel.positions.size();) {
			const uint32_t pg = sel.positions[i] / 32;
			std::vector<uint32_t> rows;
			size_t j = i;
			for (; j < sel.positions.size() && sel.positions[j] / 32 == pg; j++)
				rows.push_back(sel.positions[j] % 32);
			const uint32_t t0 = sel.positions[i];
			for (size_t x = i; x < j; x++) {
				assert_memory_equal(&sel.k[x * row], &f.k[sel.positions[x] * row], row);
				assert_memory_equal(&sel.v[x * row], &f.v[sel.positions[x] * row], row);
			}
			if (spilled[t0] && kv.resident(0, t0)) { // promoted: both slabs read whole (their slots may be reused)
				want += 2 * sb;
			} else if (spilled[t0]) {
				const auto kslab = device_bytes(f.dev, (uint64_t)koff[t0], sb), vslab = device_bytes(f.dev, (uint64_t)voff[t0], sb);
				for (size_t x = i; x < j; x++) {
					const uint32_t t = sel.positions[x] % 32;
					assert_memory_equal(&sel.k[x * row], kslab.data() + 8 * 384 + t * row, row);
					assert_memory_equal(&sel.v[x * row], vslab.data() + t * row, row);
				}
				want += 4096 * (blocks_of(rows, SlabKind::K).size() + blocks_of(rows, SlabKind::V).size());
				partial_pages++;
			}
			i = j;
		}
		assert_true(partial_pages > 0);
		assert_int_equal(after.storage.bytes_read - before.storage.bytes_read, want);
		assert_true(want < (after.fetched_pages - before.fetched_pages) * 2 * sb);
	}
}

// A flipped bit in a V block that holds a selected row fails the select; one in a block of the same
// slab that holds none does not.
void select__corrupted_block__error_inside_selected_rows_only(void **)
{
	StoreFixture f = make_store(1200);
	KvStore &kv = *f.kv;
	const std::vector<float> q = query(42);
	KvSelection first;
	assert_int_equal(kv.select(0, q.data(), 150, first), 0);
	// A page still spilled after the select, holding a selected row, and a V block of it without one.
	// The last such page: the pool update promotes the most selected pages first, ties in page order.
	int64_t hit_block = -1, free_block = -1, voff = -1;
	uint32_t page_pos = 0;
	for (size_t i = first.positions.size(); i-- > 0 && free_block < 0;) {
		const uint32_t pos = first.positions[i], pg = pos / 32;
		if (kv.resident(0, pos))
			continue;
		std::vector<uint32_t> rows;
		for (uint32_t p : first.positions)
			if (p / 32 == pg)
				rows.push_back(p % 32);
		const auto used = blocks_of(rows, SlabKind::V);
		for (uint32_t b = 0; b < 7 && free_block < 0; b++)
			if (!std::binary_search(used.begin(), used.end(), b))
				free_block = b, hit_block = used.front(), voff = kv.slab_offset(0, pos, SlabKind::V), page_pos = pos;
	}
	assert_true(free_block >= 0 && voff >= 0);
	corrupt_byte(f.dev, (uint64_t)voff + (uint64_t)free_block * 4096 + 5);
	KvSelection again;
	assert_int_equal(kv.select(0, q.data(), 150, again), 0);
	assert_true(again.positions == first.positions && again.k == first.k && again.v == first.v);
	assert_int_equal(kv.slab_offset(0, page_pos, SlabKind::V), voff); // still spilled: read in part, not promoted
	corrupt_byte(f.dev, (uint64_t)voff + (uint64_t)hit_block * 4096 + 100);
	assert_int_equal(kv.select(0, q.data(), 150, again), -EBADMSG);
	assert_true(again.positions.empty() && again.k.empty());
	assert_non_null(std::strstr(kv.error().c_str(), ("payload checksum mismatch in block " + std::to_string(hit_block)).c_str()));
	// read() of a token goes the same way: its own blocks only.
	std::vector<uint8_t> k(768), v(768);
	for (uint32_t t = 0; t < f.n; t++)
		if (kv.slab_offset(0, t, SlabKind::V) == voff) {
			const auto b = blocks_of({t % 32}, SlabKind::V);
			const bool bad = std::binary_search(b.begin(), b.end(), (uint32_t)hit_block) ||
					 std::binary_search(b.begin(), b.end(), (uint32_t)free_block);
			assert_int_equal(kv.read(0, t, k.data(), v.data()), bad ? -EBADMSG : 0);
			if (!bad)
				assert_memory_equal(v.data(), &f.v[t * 768], 768);
		}
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc32c_blocks_and_copy__random_data__equal_plain_crc),
		cmocka_unit_test(crc32c__hybrid_rounds__equal_table),
		cmocka_unit_test(block_crcs__fed_then_finished__equal_whole_table),
		cmocka_unit_test(storage_read__block_runs__bit_identical_to_whole_slab_and_bytes_counted),
		cmocka_unit_test(storage_read__other_threads__ring_set_up_again_same_bytes),
		cmocka_unit_test(storage_read__corrupted_block__error_inside_run_only),
		cmocka_unit_test(select__spilled_rows__partial_fetch_bit_identical_and_bytes_exact),
		cmocka_unit_test(select__corrupted_block__error_inside_selected_rows_only),
	};
	const int r = cmocka_run_group_tests(tests, nullptr, nullptr);
	cleanup_devices();
	return r;
}
