// SPDX-License-Identifier: MIT
// The GGUF writer, read back by a reader written here from the format's description: the header, every
// key llama.cpp needs for a llama model, the tensor infos (shapes, types, aligned offsets that fit the
// file), the weights' range, and the errors for bad shapes. That llama.cpp itself loads and runs the
// files is tested by tests/integration/test_engine.sh.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <system_error>
#include <string>
#include <vector>

#include "workload/gguf.hpp"

#include "cmocka_cpp.hpp" // last: cmocka's macros clash with the standard headers

using namespace llmcache::workload;

namespace {

struct TensorInfo {
	std::vector<uint64_t> ne;
	uint32_t type;
	uint64_t offset;
};

struct Parsed {
	std::map<std::string, uint64_t> ints;
	std::map<std::string, std::string> strings;
	std::map<std::string, uint64_t> array_sizes;
	std::vector<std::string> tokens;
	std::map<std::string, TensorInfo> tensors;
	std::vector<std::string> order;
	uint64_t data_start = 0;
	std::string bytes;
};

class Reader {
public:
	explicit Reader(const std::string &b) : b_(b) {}
	template <typename T> T get()
	{
		if (at_ + sizeof(T) > b_.size())
			throw std::runtime_error("truncated at " + std::to_string(at_));
		T v;
		std::memcpy(&v, b_.data() + at_, sizeof(T));
		at_ += sizeof(T);
		return v;
	}
	std::string str()
	{
		const uint64_t n = get<uint64_t>();
		if (at_ + n > b_.size())
			throw std::runtime_error("string past the end");
		std::string s = b_.substr(at_, n);
		at_ += n;
		return s;
	}
	uint64_t at() const { return at_; }

private:
	const std::string &b_;
	uint64_t at_ = 0;
};

// Size of a scalar of GGUF value type t.
uint64_t scalar_size(uint32_t t)
{
	static const uint64_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	return t < 13 ? sizes[t] : 0;
}

Parsed parse(const std::string &path)
{
	Parsed p;
	std::ifstream in(path, std::ios::binary);
	p.bytes.assign(std::istreambuf_iterator<char>(in), {});
	Reader r(p.bytes);
	if (r.get<uint32_t>() != 0x46554747) // "GGUF"
		throw std::runtime_error("bad magic");
	if (r.get<uint32_t>() != 3)
		throw std::runtime_error("not version 3");
	const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
	for (uint64_t i = 0; i < n_kv; i++) {
		const std::string key = r.str();
		const uint32_t type = r.get<uint32_t>();
		if (type == 8) {
			p.strings[key] = r.str();
		} else if (type == 9) {
			const uint32_t et = r.get<uint32_t>();
			const uint64_t n = r.get<uint64_t>();
			p.array_sizes[key] = n;
			for (uint64_t j = 0; j < n; j++)
				if (et == 8) {
					std::string s = r.str();
					if (key == "tokenizer.ggml.tokens")
						p.tokens.push_back(s);
				} else {
					for (uint64_t k = 0; k < scalar_size(et); k++)
						r.get<uint8_t>();
				}
		} else if (type == 4) {
			p.ints[key] = r.get<uint32_t>();
		} else if (type == 7) {
			p.ints[key] = r.get<uint8_t>();
		} else if (type == 6) {
			r.get<float>();
			p.ints[key] = 1;
		} else {
			throw std::runtime_error("unexpected value type " + std::to_string(type) + " for " + key);
		}
	}
	for (uint64_t i = 0; i < n_tensors; i++) {
		const std::string name = r.str();
		TensorInfo t;
		const uint32_t dims = r.get<uint32_t>();
		for (uint32_t d = 0; d < dims; d++)
			t.ne.push_back(r.get<uint64_t>());
		t.type = r.get<uint32_t>();
		t.offset = r.get<uint64_t>();
		p.tensors[name] = t;
		p.order.push_back(name);
	}
	p.data_start = (r.at() + 31) / 32 * 32;
	return p;
}

uint64_t tensor_bytes(const TensorInfo &t)
{
	uint64_t n = 1;
	for (uint64_t e : t.ne)
		n *= e;
	return t.type == 0 ? n * 4 : t.type == 1 ? n * 2 : n / 32 * 34;
}

std::string temp_path(const char *name) { return "/tmp/test_gguf_" + std::to_string(getpid()) + "_" + name; }

void write_gguf__f16_mha__header_keys_and_tensors_as_llama_reads_them(void **)
{
	GgufModel m;
	m.layers = 3, m.embd = 256, m.ff = 704, m.heads = 4, m.kv_heads = 4, m.vocab = 300;
	const std::string path = temp_path("f16.gguf");
	write_gguf(m, path);
	const Parsed p = parse(path);
	unlink(path.c_str());
	assert_int_equal(p.bytes.size(), gguf_size(m));
	assert_true(p.strings.at("general.architecture") == "llama");
	assert_true(p.strings.at("tokenizer.ggml.model") == "llama");
	assert_int_equal(p.ints.at("llama.block_count"), 3);
	assert_int_equal(p.ints.at("llama.embedding_length"), 256);
	assert_int_equal(p.ints.at("llama.feed_forward_length"), 704);
	assert_int_equal(p.ints.at("llama.attention.head_count"), 4);
	assert_int_equal(p.ints.at("llama.attention.head_count_kv"), 4);
	assert_int_equal(p.ints.at("llama.rope.dimension_count"), 64);
	assert_int_equal(p.ints.at("general.file_type"), 1);
	assert_int_equal(p.array_sizes.at("tokenizer.ggml.tokens"), 300);
	assert_int_equal(p.array_sizes.at("tokenizer.ggml.scores"), 300);
	assert_int_equal(p.array_sizes.at("tokenizer.ggml.token_type"), 300);
	assert_true(p.tokens[1] == "<s>" && p.tokens[3] == "<0x00>" && p.tokens[258] == "<0xFF>");
	assert_true(p.tokens[259] == "\xe2\x96\x81" "a");
	// Every tensor llama.cpp loads for a llama model, in the converters' order, aligned and in the file.
	assert_int_equal(p.tensors.size(), 2 + 9 * 3 + 1);
	assert_true(p.order.front() == "token_embd.weight" && p.order.back() == "output.weight");
	assert_true(p.tensors.at("blk.2.ffn_down.weight").ne == (std::vector<uint64_t>{704, 256}));
	assert_true(p.tensors.at("blk.0.attn_k.weight").ne == (std::vector<uint64_t>{256, 256}));
	assert_true(p.tensors.at("blk.1.attn_norm.weight").ne == (std::vector<uint64_t>{256}));
	assert_int_equal(p.tensors.at("blk.1.attn_norm.weight").type, 0);
	uint64_t end = 0;
	for (const auto &[name, t] : p.tensors) {
		assert_int_equal(t.offset % 32, 0);
		end = std::max(end, t.offset + tensor_bytes(t));
	}
	assert_int_equal(p.data_start + end, p.bytes.size());
	// Weights within +-1/sqrt(fan-in), not all equal; norms are 1.
	const TensorInfo &q = p.tensors.at("blk.0.attn_q.weight");
	const char *w = p.bytes.data() + p.data_start + q.offset;
	uint16_t first, h;
	std::memcpy(&first, w, 2);
	bool varied = false;
	for (uint64_t i = 0; i < 256 * 256; i++) {
		std::memcpy(&h, w + i * 2, 2);
		const int exp = (h >> 10) & 0x1f;
		const float mag = exp ? std::ldexp(float(1024 + (h & 0x3ff)), exp - 25) : 0.0f;
		assert_true(mag <= 1.0f / 16.0f + 1e-6f);
		varied |= h != first;
	}
	assert_true(varied);
	float norm;
	std::memcpy(&norm, p.bytes.data() + p.data_start + p.tensors.at("output_norm.weight").offset, 4);
	assert_true(norm == 1.0f);
}

void write_gguf__q8_0_gqa__block_sizes_and_kv_width(void **)
{
	GgufModel m;
	m.layers = 2, m.embd = 256, m.ff = 512, m.heads = 8, m.kv_heads = 2, m.vocab = 260, m.type = GgufType::q8_0;
	const std::string path = temp_path("q8.gguf");
	write_gguf(m, path);
	const Parsed p = parse(path);
	unlink(path.c_str());
	assert_int_equal(p.ints.at("general.file_type"), 7);
	const TensorInfo &k = p.tensors.at("blk.1.attn_k.weight");
	assert_true(k.ne == (std::vector<uint64_t>{256, 64}));
	assert_int_equal(k.type, 8);
	const TensorInfo &next = p.tensors.at("blk.1.attn_v.weight");
	assert_int_equal(next.offset - k.offset, (256 * 64 / 32 * 34 + 31) / 32 * 32);
	assert_int_equal(p.bytes.size(), gguf_size(m));
}

void layers_for_size__target__nearest_layer_count(void **)
{
	GgufModel m;
	m.embd = 512, m.ff = 1408, m.heads = 8, m.kv_heads = 8;
	const uint32_t l = layers_for_size(m, 64ull << 20);
	m.layers = l;
	const uint64_t at = gguf_size(m);
	m.layers = l + 1;
	const uint64_t above = gguf_size(m);
	m.layers = l - 1;
	const uint64_t below = gguf_size(m);
	const auto dist = [](uint64_t a) { return a > (64ull << 20) ? a - (64ull << 20) : (64ull << 20) - a; };
	assert_true(dist(at) <= dist(above) && dist(at) <= dist(below));
	assert_int_equal(layers_for_size(m, 1), 1);
}

void validate__bad_shapes__throw_and_leave_no_file(void **)
{
	GgufModel m;
	auto throws = [](const GgufModel &x) {
		try {
			validate(x);
		} catch (const std::invalid_argument &) {
			return true;
		}
		return false;
	};
	GgufModel bad = m;
	bad.heads = 0;
	assert_true(throws(bad));
	bad = m, bad.heads = 3; // does not divide 1024
	assert_true(throws(bad));
	bad = m, bad.kv_heads = 5;
	assert_true(throws(bad));
	bad = m, bad.vocab = 100;
	assert_true(throws(bad));
	bad = m, bad.type = GgufType::q8_0, bad.ff = 2800; // not a multiple of 32
	assert_true(throws(bad));
	assert_false(throws(m));
	const std::string path = temp_path("bad.gguf");
	bad = m, bad.vocab = 1;
	try {
		write_gguf(bad, path);
		fail_msg("a bad model was written");
	} catch (const std::invalid_argument &) {
	}
	assert_int_equal(access(path.c_str(), F_OK), -1);
	// An unwritable place: a system_error naming it, and nothing left behind.
	try {
		write_gguf(m, "/proc/no-such-dir/model.gguf");
		fail_msg("wrote into /proc");
	} catch (const std::system_error &e) {
		assert_non_null(std::strstr(e.what(), "/proc/no-such-dir/model.gguf"));
	}
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(write_gguf__f16_mha__header_keys_and_tensors_as_llama_reads_them),
		cmocka_unit_test(write_gguf__q8_0_gqa__block_sizes_and_kv_width),
		cmocka_unit_test(layers_for_size__target__nearest_layer_count),
		cmocka_unit_test(validate__bad_shapes__throw_and_leave_no_file),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
