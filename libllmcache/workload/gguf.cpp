// SPDX-License-Identifier: MIT
// GGUF v3 as llama.cpp reads it: a header (magic, version, tensor and key counts), typed key/value pairs,
// one info record per tensor (name, dimensions innermost first, ggml type, offset into the data), then
// the tensor data, each tensor aligned to general.alignment.
#include "workload/gguf.hpp"

#include "workload/workload.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace llmcache::workload {

namespace {

constexpr uint32_t ALIGNMENT = 32, Q8_0_BLOCK = 32;
// ggml_type and llama_ftype values, as the GGUF files written by llama.cpp's converters carry them.
constexpr uint32_t GGML_F32 = 0, GGML_F16 = 1, GGML_Q8_0 = 8, FTYPE_F16 = 1, FTYPE_Q8_0 = 7;
// GGUF value types.
enum : uint32_t { U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9 };
// llama.cpp's token types.
constexpr int32_t TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6;
constexpr uint32_t SPECIAL_TOKENS = 3, BYTE_TOKENS = 256;

struct Tensor {
	std::string name;
	uint64_t ne0, ne1; // ne1 = 1: a vector
	uint32_t type;
	uint64_t offset = 0;
	uint64_t bytes() const
	{
		if (type == GGML_F32)
			return ne0 * ne1 * 4;
		if (type == GGML_F16)
			return ne0 * ne1 * 2;
		return ne0 / Q8_0_BLOCK * ne1 * (2 + Q8_0_BLOCK);
	}
};

uint64_t align(uint64_t v) { return (v + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT; }

std::vector<Tensor> tensors(const GgufModel &m)
{
	const uint32_t w = m.type == GgufType::f16 ? GGML_F16 : GGML_Q8_0;
	const uint64_t kv = uint64_t(m.embd) / m.heads * m.kv_heads;
	std::vector<Tensor> t{{"token_embd.weight", m.embd, m.vocab, w}};
	for (uint32_t l = 0; l < m.layers; l++) {
		const std::string b = "blk." + std::to_string(l) + ".";
		t.push_back({b + "attn_norm.weight", m.embd, 1, GGML_F32});
		t.push_back({b + "attn_q.weight", m.embd, m.embd, w});
		t.push_back({b + "attn_k.weight", m.embd, kv, w});
		t.push_back({b + "attn_v.weight", m.embd, kv, w});
		t.push_back({b + "attn_output.weight", m.embd, m.embd, w});
		t.push_back({b + "ffn_norm.weight", m.embd, 1, GGML_F32});
		t.push_back({b + "ffn_gate.weight", m.embd, m.ff, w});
		t.push_back({b + "ffn_up.weight", m.embd, m.ff, w});
		t.push_back({b + "ffn_down.weight", m.ff, m.embd, w});
	}
	t.push_back({"output_norm.weight", m.embd, 1, GGML_F32});
	t.push_back({"output.weight", m.embd, m.vocab, w});
	uint64_t off = 0;
	for (Tensor &x : t) {
		x.offset = off;
		off = align(off + x.bytes());
	}
	return t;
}

// "a", "b", ..., "z", "ba", ...: distinct lowercase names for the word-piece tokens.
std::string piece_name(uint32_t i)
{
	std::string s;
	do
		s.insert(s.begin(), char('a' + i % 26));
	while ((i /= 26) != 0);
	return "\xe2\x96\x81" + s; // U+2581, SentencePiece's word-start mark
}

class Header {
public:
	void u32(uint32_t v) { raw(&v, 4); }
	void u64(uint64_t v) { raw(&v, 8); }
	void str(const std::string &s)
	{
		u64(s.size());
		raw(s.data(), s.size());
	}
	void kv_u32(const char *k, uint32_t v) { key(k, U32), u32(v); }
	void kv_f32(const char *k, float v) { key(k, F32), raw(&v, 4); }
	void kv_bool(const char *k, bool v) { key(k, BOOL), buf_.push_back(char(v)); }
	void kv_str(const char *k, const std::string &v) { key(k, STRING), str(v); }
	void kv_array(const char *k, uint32_t type, uint64_t n)
	{
		key(k, ARRAY);
		u32(type);
		u64(n);
	}
	void raw(const void *p, size_t n) { buf_.append(static_cast<const char *>(p), n); }
	void pad() { buf_.resize(align(buf_.size()), '\0'); }
	const std::string &bytes() const { return buf_; }
	uint64_t keys = 0;

private:
	void key(const char *k, uint32_t type)
	{
		str(k);
		u32(type);
		keys++;
	}
	std::string buf_;
};

// Round to nearest; magnitudes below F16's smallest normal (6.1e-5) become zero, which the weights'
// range (at least 1/sqrt(fan-in) >= 1/256 wide) makes rare and harmless.
uint16_t to_f16(float f)
{
	uint32_t x;
	std::memcpy(&x, &f, 4);
	const uint16_t sign = uint16_t((x >> 16) & 0x8000);
	const int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
	if (exp <= 0)
		return sign;
	if (exp >= 31)
		return sign | 0x7c00;
	const uint32_t rounded = (uint32_t(exp) << 10 | (x & 0x7fffff) >> 13) + ((x >> 12) & 1);
	return uint16_t(sign | std::min<uint32_t>(rounded, 0x7bff));
}

struct Output {
	FILE *f;
	const std::string &path;
	void write(const void *p, size_t n)
	{
		if (n && std::fwrite(p, 1, n, f) != n)
			throw std::system_error(errno, std::generic_category(), "cannot write " + path);
	}
};

void write_data(Output &out, const Tensor &t, uint64_t fan_in, Rng &rng)
{
	std::vector<char> buf;
	const float range = 1.0f / std::sqrt(float(fan_in));
	if (t.type == GGML_F32) {
		const std::vector<float> ones(t.ne0 * t.ne1, 1.0f);
		out.write(ones.data(), ones.size() * 4);
		return;
	}
	const uint64_t rows_per_chunk = std::max<uint64_t>(1, (1u << 20) / t.ne0);
	for (uint64_t row = 0; row < t.ne1; row += rows_per_chunk) {
		const uint64_t n = std::min(rows_per_chunk, t.ne1 - row) * t.ne0;
		if (t.type == GGML_F16) {
			buf.resize(n * 2);
			for (uint64_t i = 0; i < n; i += 4) {
				uint64_t r = rng.next();
				for (uint64_t j = i; j < i + 4 && j < n; j++, r >>= 16) {
					const uint16_t h = to_f16((float(r & 0xffff) / 32768.0f - 1.0f) * range);
					std::memcpy(&buf[j * 2], &h, 2);
				}
			}
		} else {
			const uint16_t scale = to_f16(range / 127.0f);
			buf.resize(n / Q8_0_BLOCK * (2 + Q8_0_BLOCK));
			for (char *b = buf.data(); b < buf.data() + buf.size(); b += 2 + Q8_0_BLOCK) {
				std::memcpy(b, &scale, 2);
				for (uint32_t j = 0; j < Q8_0_BLOCK; j += 8) {
					uint64_t r = rng.next();
					for (uint32_t k = 0; k < 8; k++, r >>= 8)
						b[2 + j + k] = char(int(r & 0xff) % 255 - 127);
				}
			}
		}
		out.write(buf.data(), buf.size());
	}
}

} // namespace

void validate(const GgufModel &m)
{
	auto bad = [](const std::string &what) { throw std::invalid_argument(what); };
	if (!m.layers || !m.embd || !m.ff || !m.heads || !m.kv_heads || !m.context)
		bad("layers, embd, ff, heads, kv-heads and context must all be positive");
	if (m.embd % m.heads)
		bad("heads (" + std::to_string(m.heads) + ") must divide embd (" + std::to_string(m.embd) + ")");
	if (m.heads % m.kv_heads)
		bad("kv-heads (" + std::to_string(m.kv_heads) + ") must divide heads (" + std::to_string(m.heads) + ")");
	if ((m.embd / m.heads) % 2)
		bad("the head dimension embd/heads must be even (RoPE rotates pairs)");
	if (m.vocab < SPECIAL_TOKENS + BYTE_TOKENS)
		bad("vocab must be at least " + std::to_string(SPECIAL_TOKENS + BYTE_TOKENS) + " (special and byte tokens)");
	if (m.type == GgufType::q8_0 && (m.embd % Q8_0_BLOCK || m.ff % Q8_0_BLOCK))
		bad("Q8_0 needs embd and ff to be multiples of 32");
	if (m.embd > (1u << 16) || m.ff > (1u << 18) || m.vocab > (1u << 20) || m.layers > 4096)
		bad("the model is larger than this writer is meant for (embd <= 65536, ff <= 262144, vocab <= 2^20, "
		    "layers <= 4096)");
}

namespace {

// The header (keys and tensor infos, padded to the data's alignment) and the tensors.
struct Layout {
	std::string header;
	std::vector<Tensor> tensors;
	uint64_t size() const { return header.size() + tensors.back().offset + tensors.back().bytes(); }
};

Layout layout(const GgufModel &m)
{
	validate(m);
	Layout l{{}, tensors(m)};
	Header kv;
	kv.kv_str("general.architecture", "llama");
	kv.kv_str("general.name", "llmcache random llama");
	kv.kv_u32("general.file_type", m.type == GgufType::f16 ? FTYPE_F16 : FTYPE_Q8_0);
	kv.kv_u32("general.alignment", ALIGNMENT);
	kv.kv_u32("llama.context_length", m.context);
	kv.kv_u32("llama.embedding_length", m.embd);
	kv.kv_u32("llama.block_count", m.layers);
	kv.kv_u32("llama.feed_forward_length", m.ff);
	kv.kv_u32("llama.rope.dimension_count", m.embd / m.heads);
	kv.kv_u32("llama.attention.head_count", m.heads);
	kv.kv_u32("llama.attention.head_count_kv", m.kv_heads);
	kv.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
	kv.kv_u32("llama.vocab_size", m.vocab);
	kv.kv_str("tokenizer.ggml.model", "llama");
	kv.kv_array("tokenizer.ggml.tokens", STRING, m.vocab);
	for (uint32_t i = 0; i < m.vocab; i++) {
		char byte[8];
		std::snprintf(byte, sizeof(byte), "<0x%02X>", (i - SPECIAL_TOKENS) & 0xff);
		kv.str(i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>"
			: i < SPECIAL_TOKENS + BYTE_TOKENS ? std::string(byte)
							   : piece_name(i - SPECIAL_TOKENS - BYTE_TOKENS));
	}
	kv.kv_array("tokenizer.ggml.scores", F32, m.vocab);
	for (uint32_t i = 0; i < m.vocab; i++) {
		const float score = -float(i);
		kv.raw(&score, 4);
	}
	kv.kv_array("tokenizer.ggml.token_type", I32, m.vocab);
	for (uint32_t i = 0; i < m.vocab; i++) {
		const int32_t type = i == 0 ? TOKEN_UNKNOWN : i < SPECIAL_TOKENS ? TOKEN_CONTROL
				     : i < SPECIAL_TOKENS + BYTE_TOKENS ? TOKEN_BYTE : TOKEN_NORMAL;
		kv.raw(&type, 4);
	}
	kv.kv_u32("tokenizer.ggml.unknown_token_id", 0);
	kv.kv_u32("tokenizer.ggml.bos_token_id", 1);
	kv.kv_u32("tokenizer.ggml.eos_token_id", 2);
	kv.kv_bool("tokenizer.ggml.add_bos_token", true);

	Header h;
	h.raw("GGUF", 4);
	h.u32(3);
	h.u64(l.tensors.size());
	h.u64(kv.keys);
	h.raw(kv.bytes().data(), kv.bytes().size());
	for (const Tensor &t : l.tensors) {
		h.str(t.name);
		h.u32(t.ne1 == 1 ? 1 : 2);
		h.u64(t.ne0);
		if (t.ne1 != 1)
			h.u64(t.ne1);
		h.u32(t.type);
		h.u64(t.offset);
	}
	h.pad();
	l.header = h.bytes();
	return l;
}

} // namespace

uint64_t gguf_size(const GgufModel &m) { return layout(m).size(); }

uint32_t layers_for_size(GgufModel m, uint64_t size_bytes)
{
	m.layers = 1;
	const uint64_t one = gguf_size(m);
	m.layers = 2;
	const uint64_t per_layer = gguf_size(m) - one;
	if (size_bytes <= one)
		return 1;
	return uint32_t(std::min<uint64_t>(4096, (size_bytes - one + per_layer / 2) / per_layer + 1));
}

void write_gguf(const GgufModel &m, const std::string &path)
{
	const Layout l = layout(m);
	std::string tmp = path + ".XXXXXX";
	const int fd = mkstemp(tmp.data());
	if (fd < 0)
		throw std::system_error(errno, std::generic_category(), "cannot create a temporary file beside " + path);
	fchmod(fd, 0644); // mkstemp's 0600 would keep the model from an engine run as another user
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		const int e = errno;
		close(fd);
		unlink(tmp.c_str());
		throw std::system_error(e, std::generic_category(), "cannot write " + tmp);
	}
	try {
		Output out{f, tmp};
		out.write(l.header.data(), l.header.size());
		Rng rng(m.seed);
		uint64_t at = 0;
		const std::vector<char> zeros(ALIGNMENT, 0);
		for (const Tensor &t : l.tensors) {
			out.write(zeros.data(), t.offset - at);
			// The embedding at full scale: the last token then steers the next, and greedy decoding
			// wanders through the vocabulary instead of repeating one token.
			write_data(out, t, t.name == "token_embd.weight" ? 1 : t.ne0, rng);
			at = t.offset + t.bytes();
		}
		if (std::fflush(f) || fsync(fileno(f)))
			throw std::system_error(errno, std::generic_category(), "cannot write " + tmp);
		if (std::fclose(f)) {
			f = nullptr;
			throw std::system_error(errno, std::generic_category(), "cannot write " + tmp);
		}
		f = nullptr;
		if (std::rename(tmp.c_str(), path.c_str()))
			throw std::system_error(errno, std::generic_category(), "cannot rename " + tmp + " to " + path);
	} catch (...) {
		if (f)
			std::fclose(f);
		unlink(tmp.c_str());
		throw;
	}
}

} // namespace llmcache::workload
