// SPDX-License-Identifier: MIT
// The workload generators' access streams, checked in memory (no files, no trace writer).
#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "workload/workload.hpp"

#include "cmocka_cpp.hpp" // last: cmocka's macros clash with the standard headers

using namespace llmcache::workload;

namespace {

using Phase = std::vector<llmcache_access>;

std::vector<Phase> collect(Generator &g)
{
	std::vector<Phase> phases;
	Phase p;
	while (g.step(p))
		phases.push_back(p);
	return phases;
}

uint32_t file_index(const Generator &g, const std::string &name)
{
	for (size_t i = 0; i < g.files().size(); i++)
		if (g.files()[i].name == name)
			return uint32_t(i);
	fail_msg("no file %s", name.c_str());
	return 0;
}

// The records of one file in a phase.
Phase of_file(const Phase &p, uint32_t f)
{
	Phase r;
	for (const auto &a : p)
		if (a.inode == f)
			r.push_back(a);
	return r;
}

// The records cover blocks [0, blocks) exactly once, in order, with op.
void assert_sweep(const Phase &recs, uint64_t blocks, uint8_t op)
{
	uint64_t next = 0;
	for (const auto &a : recs) {
		assert_int_equal(a.first_block, next);
		assert_int_equal(a.op, op);
		assert_true(a.nr_blocks > 0);
		next += a.nr_blocks;
	}
	assert_int_equal(next, blocks);
}

struct LoopCase {
	const char *app, *file;
	uint64_t n;    // blocks per loop iteration (documented in Documentation/workloads.md)
	uint8_t op;
	uint64_t every; // runs in iterations i with i % every == 0
};

const LoopCase loop_cases[] = {
	{"ai-notes", "ai-notes/nmt-weights.bin", 10000, LLMCACHE_OP_READ, 1},
	{"ai-notes", "ai-notes/handwriting.bin", 5000, LLMCACHE_OP_WRITE, 1},
	{"ai-translate", "ai-translate/dictation-src.bin", 256, LLMCACHE_OP_READ, 1},
	{"ai-translate", "ai-translate/dictation-tgt.bin", 256, LLMCACHE_OP_READ, 1},
	{"ai-translate", "ai-translate/db-copy.tmp", 100, LLMCACHE_OP_WRITE, 100},
	{"text-embedder", "text-embedder/model-copy.tflite", 6500, LLMCACHE_OP_WRITE, 1},
	{"text-classification", "text-classification/model-copy.tflite", 6200, LLMCACHE_OP_WRITE, 1},
};

} // namespace

static void make_app__each_app__config_scan_sequential_once_at_startup(void **)
{
	for (auto name : app_names()) {
		auto g = make_app(name, {.iterations = 3});
		auto phases = collect(*g);
		assert_int_equal(phases.size(), 4);
		int configs = 0;
		for (uint32_t f = 0; f < g->files().size(); f++) {
			if (g->files()[f].role != Role::config)
				continue;
			configs++;
			assert_sweep(of_file(phases[0], f), g->files()[f].blocks(), LLMCACHE_OP_READ);
			for (size_t i = 1; i < phases.size(); i++)
				assert_true(of_file(phases[i], f).empty());
		}
		assert_true(configs >= 1);
		// Start-up is the scan and nothing else.
		for (const auto &a : phases[0])
			assert_true(g->files()[a.inode].role == Role::config);
	}
}

static void make_app__hot_set__referenced_in_every_iteration_and_reused(void **)
{
	for (auto name : app_names()) {
		auto g = make_app(name, {.iterations = 200, .seed = 3});
		auto phases = collect(*g);
		std::map<std::pair<uint64_t, uint64_t>, int> refs;
		uint64_t hot_blocks = 0;
		for (const auto &f : g->files())
			if (f.role == Role::hot)
				hot_blocks += f.blocks();
		assert_true(hot_blocks > 0 && hot_blocks * LLMCACHE_BLOCK_SIZE <= (4u << 20)); // paper: < 4 MB
		for (size_t i = 1; i < phases.size(); i++) {
			int in_phase = 0;
			for (const auto &a : phases[i]) {
				if (g->files()[a.inode].role != Role::hot)
					continue;
				assert_int_equal(a.nr_blocks, 1);
				assert_int_equal(a.op, LLMCACHE_OP_READ);
				assert_true(a.first_block < g->files()[a.inode].blocks());
				refs[{a.inode, a.first_block}]++;
				in_phase++;
			}
			assert_true(in_phase > 0);
		}
		int max_refs = 0;
		for (const auto &[k, n] : refs)
			max_refs = std::max(max_refs, n);
		assert_true(max_refs >= 10); // Zipf: the most popular hot blocks come back again and again
	}
}

static void make_app__hot_refs__interleaved_with_loop_records(void **)
{
	auto g = make_app("ai-notes", {.iterations = 1});
	auto phases = collect(*g);
	const Phase &it = phases[1];
	uint32_t weights = file_index(*g, "ai-notes/nmt-weights.bin");
	// Hot references fall between records of the loops, not all before or after them.
	size_t first_hot = it.size(), last_hot = 0, first_loop = it.size(), last_loop = 0;
	for (size_t i = 0; i < it.size(); i++) {
		bool hot = g->files()[it[i].inode].role == Role::hot;
		(hot ? first_hot : first_loop) = std::min(hot ? first_hot : first_loop, i);
		(hot ? last_hot : last_loop) = i;
	}
	assert_true(first_hot > first_loop && last_hot < last_loop);
	assert_sweep(of_file(it, weights), 10000, LLMCACHE_OP_READ);
}

static void make_app__loops__every_block_once_per_iteration(void **)
{
	for (const auto &c : loop_cases) {
		auto g = make_app(c.app, {.iterations = 201});
		uint32_t f = file_index(*g, c.file);
		assert_int_equal(g->files()[f].blocks(), c.n);
		auto phases = collect(*g);
		int runs = 0;
		for (size_t i = 1; i < phases.size(); i++) {
			Phase recs = of_file(phases[i], f);
			if ((i - 1) % c.every) {
				assert_true(recs.empty());
				continue;
			}
			assert_sweep(recs, c.n, c.op);
			runs++;
		}
		assert_int_equal(runs, (201 + c.every - 1) / c.every);
	}
}

static void make_app__default_iterations__one_to_two_million_blocks(void **)
{
	for (auto name : app_names()) {
		auto g = make_app(name, {});
		uint64_t blocks = 0, last_time = 0;
		Phase p;
		while (g->step(p))
			for (const auto &a : p) {
				assert_true(a.time_ns >= last_time);
				last_time = a.time_ns;
				blocks += a.nr_blocks;
			}
		assert_true(blocks >= 1000000 && blocks <= 2000000);
		assert_true(last_time < blocks * ns_per_block);
	}
}

static void make_app__same_seed__same_stream_other_seed_differs(void **)
{
	auto stream = [](uint64_t seed) {
		auto g = make_app("ai-translate", {.iterations = 50, .seed = seed});
		std::vector<uint64_t> v;
		for (const auto &p : collect(*g))
			for (const auto &a : p)
				v.insert(v.end(), {a.inode, a.first_block, a.nr_blocks, a.op, a.time_ns});
		return v;
	};
	assert_true(stream(11) == stream(11));
	assert_true(stream(11) != stream(12));
}

static void make_app__scale__multiplies_sizes(void **)
{
	auto one = make_app("text-embedder", {.iterations = 1});
	auto half = make_app("text-embedder", {.iterations = 1, .scale = 0.5});
	for (size_t i = 0; i < one->files().size(); i++)
		assert_int_equal(half->files()[i].blocks(), (one->files()[i].blocks() + 1) / 2);
	auto tiny = make_app("text-embedder", {.iterations = 1, .scale = 1e-9});
	for (const auto &f : tiny->files())
		assert_int_equal(f.blocks(), 1);
}

static void make_app__bad_name_or_scale__throws(void **)
{
	try {
		make_app("ai-poetry", {});
		fail_msg("no exception");
	} catch (const std::invalid_argument &e) {
		assert_non_null(std::strstr(e.what(), "ai-poetry"));
		assert_non_null(std::strstr(e.what(), "text-classification"));
	}
	bool threw = false;
	try {
		make_app("ai-notes", {.scale = 0});
	} catch (const std::invalid_argument &) {
		threw = true;
	}
	assert_true(threw);
}

static void make_decoder__pread__startup_then_hot_reads_and_full_weights_per_token(void **)
{
	DecoderOptions o;
	o.weights_size = 2 << 20;
	o.tokenizer_size = 64 << 10;
	o.config_size = (256 << 10) + 100; // not a whole number of blocks: the last record is short
	o.tokens = 3;
	o.read_size = 128 << 10;
	auto g = make_decoder(o);
	auto phases = collect(*g);
	assert_int_equal(phases.size(), 4);
	uint32_t config = file_index(*g, "decoder/config.bin"), tok = file_index(*g, "decoder/tokenizer.bin"),
		 weights = file_index(*g, "decoder/weights.bin");
	assert_sweep(of_file(phases[0], config), 65, LLMCACHE_OP_READ);
	assert_sweep(of_file(phases[0], tok), 16, LLMCACHE_OP_READ);
	assert_int_equal(phases[0].size(), 3 + 1);
	for (size_t t = 1; t < phases.size(); t++) {
		const Phase &p = phases[t];
		assert_int_equal(p.size(), o.hot_reads + 16);
		for (size_t i = 0; i < o.hot_reads; i++) {
			assert_int_equal(p[i].inode, tok);
			assert_int_equal(p[i].nr_blocks, 1);
			assert_true(p[i].first_block < 16);
		}
		Phase w = of_file(p, weights);
		assert_sweep(w, 512, LLMCACHE_OP_READ);
		for (const auto &a : w)
			assert_int_equal(a.nr_blocks, 32);
		assert_true(of_file(p, config).empty());
	}
}

static void make_decoder__mmap__weights_as_mmap_faults_rest_unchanged(void **)
{
	DecoderOptions o;
	o.weights_size = (1 << 20) + 4096;
	o.tokens = 2;
	o.access = Access::mmap;
	o.read_size = 256 << 10;
	auto g = make_decoder(o);
	auto phases = collect(*g);
	uint32_t weights = file_index(*g, "decoder/weights.bin");
	for (size_t t = 1; t < phases.size(); t++) {
		Phase w = of_file(phases[t], weights);
		assert_sweep(w, 257, LLMCACHE_OP_MMAP_FAULT);
		assert_int_equal(w.size(), 5);
		for (const auto &a : phases[t])
			if (a.inode != weights)
				assert_int_equal(a.op, LLMCACHE_OP_READ);
	}
}

static void make_decoder__bad_sizes__throw(void **)
{
	for (uint64_t rs : {uint64_t(0), uint64_t(6000)}) {
		DecoderOptions o;
		o.read_size = rs;
		bool threw = false;
		try {
			make_decoder(o);
		} catch (const std::invalid_argument &e) {
			threw = std::strstr(e.what(), "read size") != nullptr;
		}
		assert_true(threw);
	}
	DecoderOptions o;
	o.weights_size = 0;
	bool threw = false;
	try {
		make_decoder(o);
	} catch (const std::invalid_argument &) {
		threw = true;
	}
	assert_true(threw);
}

static void fill_content__any_chunking__same_bytes(void **)
{
	std::vector<char> whole(10000), parts(10000);
	uint64_t seed = content_seed("decoder/weights.bin");
	fill_content(seed, 0, whole);
	for (size_t off = 0; off < parts.size(); off += 333)
		fill_content(seed, off, {parts.data() + off, std::min<size_t>(333, parts.size() - off)});
	assert_memory_equal(whole.data(), parts.data(), whole.size());
	std::vector<char> other(10000);
	fill_content(content_seed("decoder/config.bin"), 0, other);
	assert_memory_not_equal(whole.data(), other.data(), whole.size());
}

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(make_app__each_app__config_scan_sequential_once_at_startup),
		cmocka_unit_test(make_app__hot_set__referenced_in_every_iteration_and_reused),
		cmocka_unit_test(make_app__hot_refs__interleaved_with_loop_records),
		cmocka_unit_test(make_app__loops__every_block_once_per_iteration),
		cmocka_unit_test(make_app__default_iterations__one_to_two_million_blocks),
		cmocka_unit_test(make_app__same_seed__same_stream_other_seed_differs),
		cmocka_unit_test(make_app__scale__multiplies_sizes),
		cmocka_unit_test(make_app__bad_name_or_scale__throws),
		cmocka_unit_test(make_decoder__pread__startup_then_hot_reads_and_full_weights_per_token),
		cmocka_unit_test(make_decoder__mmap__weights_as_mmap_faults_rest_unchanged),
		cmocka_unit_test(make_decoder__bad_sizes__throw),
		cmocka_unit_test(fill_content__any_chunking__same_bytes),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
