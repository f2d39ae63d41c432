// SPDX-License-Identifier: MIT
#include "kv/kv_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace llmcache::kv {

namespace {

std::string fmt_float(float x)
{
	char b[32];
	std::snprintf(b, sizeof(b), "%.9g", (double)x);
	return b;
}

std::vector<std::string> split(const std::string &s)
{
	std::vector<std::string> f;
	size_t i = 0;
	while (i <= s.size()) {
		const size_t j = std::min(s.find(' ', i), s.size());
		f.push_back(s.substr(i, j - i));
		i = j + 1;
	}
	return f;
}

bool parse_u64(const std::string &s, uint64_t &v)
{
	if (s.empty() || s.size() > 20 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
		return false;
	errno = 0;
	v = std::strtoull(s.c_str(), nullptr, 10);
	return errno == 0;
}

bool parse_u32(const std::string &s, uint32_t &v)
{
	uint64_t x;
	if (!parse_u64(s, x) || x > UINT32_MAX)
		return false;
	v = (uint32_t)x;
	return true;
}

bool parse_float(const std::string &s, float &v)
{
	if (s.empty())
		return false;
	char *end;
	v = std::strtof(s.c_str(), &end); // %.9g gives back every float exactly, subnormals included
	return *end == 0;
}

bool parse_page(const std::string &s, policy::PageRef &r)
{
	const size_t c = s.find(':');
	return c != std::string::npos && parse_u32(s.substr(0, c), r.layer) && parse_u32(s.substr(c + 1), r.page);
}

} // namespace

std::string format_kv_trace_header(const KvTraceHeader &h)
{
	char b[512];
	std::snprintf(b, sizeof(b),
		      "llmcache-kv-trace %u\n"
		      "shape layers=%u q_heads=%u kv_heads=%u head_dim=%u dtype=%u max_context=%u\n"
		      "policy page_tokens=%u sink_tokens=%u recent_tokens=%u cpu_budget=%llu beta=%.17g device=%d "
		      "estimator=%s%s\n",
		      KV_TRACE_VERSION, h.layers, h.q_heads, h.kv_heads, h.head_dim, h.dtype, h.max_context, h.page_tokens,
		      h.sink_tokens, h.recent_tokens, (unsigned long long)h.cpu_budget, h.beta, h.device ? 1 : 0,
		      h.estimator.c_str(), h.write_through ? " write_through=1" : "");
	return b;
}

std::string format_kv_trace_event(const KvTraceEvent &e)
{
	std::string s(1, (char)e.kind);
	auto num = [&](uint64_t v) { s += ' ' + std::to_string(v); };
	switch (e.kind) {
	case KvTraceEvent::Append:
		num(e.layer), num(e.count);
		break;
	case KvTraceEvent::Select:
		num(e.layer), num(e.budget), num(e.n), num(e.first), num(e.scores.size());
		for (float x : e.scores)
			s += ' ' + fmt_float(x);
		break;
	case KvTraceEvent::Selected:
	case KvTraceEvent::Promoted:
		num(e.layer);
		for (uint32_t v : e.items)
			num(v);
		break;
	case KvTraceEvent::Spill:
	case KvTraceEvent::WriteFailed:
		for (const auto &r : e.pages)
			s += ' ' + std::to_string(r.layer) + ':' + std::to_string(r.page);
		break;
	}
	return s + '\n';
}

KvTraceWriter::~KvTraceWriter()
{
	if (f_) {
		flush_appends();
		std::fclose(f_);
	}
}

int KvTraceWriter::open(const std::string &path, const KvTraceHeader &h, std::unique_ptr<KvTraceWriter> &out,
			std::string &err)
{
	std::unique_ptr<KvTraceWriter> w(new KvTraceWriter());
	w->path_ = path;
	w->f_ = std::fopen(path.c_str(), "we");
	if (!w->f_) {
		const int e = errno;
		err = "cannot create the KV trace " + path + ": " + std::strerror(e);
		return -e;
	}
	const std::string head = format_kv_trace_header(h);
	if (std::fwrite(head.data(), 1, head.size(), w->f_) != head.size() || std::fflush(w->f_)) {
		const int e = errno ? errno : EIO;
		err = "cannot write the KV trace " + path + ": " + std::strerror(e);
		return -e;
	}
	out = std::move(w);
	return 0;
}

void KvTraceWriter::put(const KvTraceEvent &e)
{
	if (!f_ || !err_.empty())
		return;
	const std::string s = format_kv_trace_event(e);
	if (std::fwrite(s.data(), 1, s.size(), f_) != s.size())
		err_ = "cannot write the KV trace " + path_ + ": " + std::strerror(errno ? errno : EIO) + "; it stops here";
}

void KvTraceWriter::flush_appends()
{
	if (!append_count_)
		return;
	KvTraceEvent e;
	e.kind = KvTraceEvent::Append;
	e.layer = append_layer_;
	e.count = append_count_;
	append_count_ = 0;
	put(e);
}

void KvTraceWriter::append(uint32_t layer)
{
	if (append_count_ && append_layer_ != layer)
		flush_appends();
	append_layer_ = layer;
	append_count_++;
}

void KvTraceWriter::select(uint32_t layer, uint32_t budget, uint32_t n, std::vector<csd_score> scores)
{
	flush_appends();
	std::sort(scores.begin(), scores.end(), [](const csd_score &a, const csd_score &b) { return a.pos < b.pos; });
	KvTraceEvent e;
	e.kind = KvTraceEvent::Select;
	e.layer = layer;
	e.budget = budget;
	e.n = n;
	e.first = scores.empty() ? 0 : scores.front().pos;
	// Scored positions are contiguous (the pages between the always-kept ones); a gap would be a bug
	// in the store, and is written as NaN, which ranks last.
	for (const csd_score &s : scores) {
		while (e.first + e.scores.size() < s.pos)
			e.scores.push_back(std::nanf(""));
		e.scores.push_back(s.score);
	}
	put(e);
}

void KvTraceWriter::put_items(KvTraceEvent::Kind kind, uint32_t layer, std::span<const uint32_t> items)
{
	KvTraceEvent e;
	e.kind = kind;
	e.layer = layer;
	e.items.assign(items.begin(), items.end());
	put(e);
}

void KvTraceWriter::selected(uint32_t layer, std::span<const uint32_t> positions)
{
	put_items(KvTraceEvent::Selected, layer, positions);
}

void KvTraceWriter::promoted(uint32_t layer, std::span<const uint32_t> pages)
{
	put_items(KvTraceEvent::Promoted, layer, pages);
}

void KvTraceWriter::spill(std::span<const policy::PageRef> victims, std::span<const policy::PageRef> failed)
{
	flush_appends();
	KvTraceEvent e;
	e.kind = KvTraceEvent::Spill;
	e.pages.assign(victims.begin(), victims.end());
	put(e);
	if (!failed.empty()) {
		e.kind = KvTraceEvent::WriteFailed;
		e.pages.assign(failed.begin(), failed.end());
		put(e);
	}
}

int KvTraceReader::getline(std::string &s, std::string &err)
{
	s.clear();
	if (!std::getline(in_, s)) {
		if (in_.bad()) {
			err = "line " + std::to_string(line_ + 1) + ": cannot read the trace";
			return -EIO;
		}
		return 0;
	}
	line_++;
	if (in_.eof()) {
		err = "line " + std::to_string(line_) + ": truncated (the trace ends inside a line, without its newline)";
		return -EINVAL;
	}
	return 1;
}

int KvTraceReader::open(KvTraceHeader &h, std::string &err)
{
	std::string s;
	auto bad = [&](const std::string &why) {
		err = "line " + std::to_string(line_) + ": " + why;
		return -EINVAL;
	};
	int r = getline(s, err);
	if (r <= 0)
		return r < 0 ? r : (err = "line 1: empty input, not a KV trace (expected 'llmcache-kv-trace 1')", -EINVAL);
	const std::string magic = "llmcache-kv-trace ";
	if (s.compare(0, magic.size(), magic) != 0)
		return bad("not a KV trace (expected 'llmcache-kv-trace " + std::to_string(KV_TRACE_VERSION) + "')");
	uint32_t version;
	if (!parse_u32(s.substr(magic.size()), version))
		return bad("bad version '" + s.substr(magic.size()) + "'");
	if (version != KV_TRACE_VERSION)
		return bad("version " + std::to_string(version) + " is not supported (this reader reads version " +
			   std::to_string(KV_TRACE_VERSION) + ")");
	// key=value fields, all of them, in this order; the last `optional` of them may be left out.
	auto fields = [&](const char *tag, std::initializer_list<const char *> keys, std::vector<std::string> &vals,
			  size_t optional = 0) {
		int r = getline(s, err);
		if (r <= 0)
			return r < 0 ? r : bad(std::string("the header ends before its '") + tag + "' line");
		const auto f = split(s);
		if (f[0] != tag)
			return bad(std::string("expected the '") + tag + "' line of the header");
		if (f.size() > keys.size() + 1 || f.size() + optional < keys.size() + 1)
			return bad(std::string("the '") + tag + "' line has " + std::to_string(f.size() - 1) + " fields, not " +
				   (optional ? std::to_string(keys.size() - optional) + "-" : std::string()) +
				   std::to_string(keys.size()));
		size_t i = 1;
		for (const char *k : keys) {
			if (i == f.size())
				break;
			const std::string want = std::string(k) + "=";
			if (f[i].compare(0, want.size(), want) != 0)
				return bad("field " + std::to_string(i) + " of '" + tag + "' is '" + f[i] + "', expected " + want + "...");
			vals.push_back(f[i++].substr(want.size()));
		}
		return 0;
	};
	std::vector<std::string> v;
	if ((r = fields("shape", {"layers", "q_heads", "kv_heads", "head_dim", "dtype", "max_context"}, v)))
		return r;
	uint32_t *shape[] = {&h.layers, &h.q_heads, &h.kv_heads, &h.head_dim, &h.dtype, &h.max_context};
	for (size_t i = 0; i < 6; i++)
		if (!parse_u32(v[i], *shape[i]))
			return bad("shape field " + std::to_string(i + 1) + " '" + v[i] + "' is not a whole number");
	if (!h.layers || h.layers > 4096 || !h.q_heads || !h.kv_heads || !h.head_dim || h.dtype > CSD_BF16 ||
	    h.q_heads > CSD_MAX_Q_HEADS || h.kv_heads > CSD_MAX_KV_HEADS || h.head_dim > CSD_MAX_HEAD_DIM)
		return bad("shape out of range (layers 1-4096, heads and head_dim within the kernels' maxima, dtype 0-2)");
	v.clear();
	if ((r = fields("policy",
			{"page_tokens", "sink_tokens", "recent_tokens", "cpu_budget", "beta", "device", "estimator", "write_through"}, v,
			1)))
		return r;
	if (v.size() > 7 && v[7] != "0" && v[7] != "1")
		return bad("the 'policy' field write_through is '" + v[7] + "', not 0 or 1");
	h.write_through = v.size() > 7 && v[7] == "1";
	uint32_t device;
	char *end;
	h.beta = std::strtod(v[4].c_str(), &end);
	if (!parse_u32(v[0], h.page_tokens) || !h.page_tokens || !parse_u32(v[1], h.sink_tokens) ||
	    !parse_u32(v[2], h.recent_tokens) || !parse_u64(v[3], h.cpu_budget) || v[4].empty() || *end ||
	    !parse_u32(v[5], device) || device > 1 || (v[6] != "exact" && v[6] != "quest"))
		return bad("a 'policy' field is out of range (whole numbers, page_tokens > 0, device 0 or 1, estimator "
			   "exact or quest)");
	h.device = device;
	h.estimator = v[6];
	h_ = h;
	return 0;
}

int KvTraceReader::next(KvTraceEvent &e, std::string &err)
{
	std::string s;
	int r = getline(s, err);
	if (r <= 0)
		return r;
	auto bad = [&](const std::string &why) {
		err = "line " + std::to_string(line_) + ": " + why;
		return -EINVAL;
	};
	const auto f = split(s);
	if (f[0].size() != 1 || !std::strchr("aqspvw", f[0][0]))
		return bad("unknown event '" + f[0].substr(0, 16) + "' (expected a, q, s, p, v or w)");
	e = {};
	e.kind = (KvTraceEvent::Kind)f[0][0];
	auto layer = [&](const std::string &x, uint32_t &l) { return parse_u32(x, l) && l < h_.layers; };
	switch (e.kind) {
	case KvTraceEvent::Append:
		if (f.size() != 3 || !layer(f[1], e.layer) || !parse_u32(f[2], e.count) || !e.count)
			return bad("expected 'a LAYER COUNT' with LAYER below " + std::to_string(h_.layers) + " and COUNT > 0");
		return 1;
	case KvTraceEvent::Select: {
		uint32_t count;
		if (f.size() < 6 || !layer(f[1], e.layer) || !parse_u32(f[2], e.budget) || !parse_u32(f[3], e.n) ||
		    !parse_u32(f[4], e.first) || !parse_u32(f[5], count))
			return bad("expected 'q LAYER BUDGET N FIRST COUNT SCORE...'");
		if (f.size() != 6ull + count)
			return bad("'q' announces " + std::to_string(count) + " scores and has " + std::to_string(f.size() - 6));
		if (count && (uint64_t)e.first + count > e.n)
			return bad("'q' scores positions " + std::to_string(e.first) + "-" + std::to_string((uint64_t)e.first + count - 1) +
				   " of a layer of " + std::to_string(e.n) + " tokens");
		e.scores.resize(count);
		for (uint32_t i = 0; i < count; i++)
			if (!parse_float(f[6 + i], e.scores[i]))
				return bad("score " + std::to_string(i + 1) + " '" + f[6 + i].substr(0, 32) + "' is not a number");
		return 1;
	}
	case KvTraceEvent::Selected:
	case KvTraceEvent::Promoted:
		if (f.size() < 2 || !layer(f[1], e.layer))
			return bad(std::string("expected '") + (char)e.kind + " LAYER ...' with LAYER below " + std::to_string(h_.layers));
		for (size_t i = 2; i < f.size(); i++) {
			uint32_t x;
			if (!parse_u32(f[i], x) || (!e.items.empty() && x <= e.items.back()))
				return bad("item " + std::to_string(i - 1) + " '" + f[i].substr(0, 32) +
					   "' is not a whole number above the one before it");
			e.items.push_back(x);
		}
		return 1;
	case KvTraceEvent::Spill:
	case KvTraceEvent::WriteFailed:
		for (size_t i = 1; i < f.size(); i++) {
			policy::PageRef p;
			if (!parse_page(f[i], p) || p.layer >= h_.layers)
				return bad("page " + std::to_string(i) + " '" + f[i].substr(0, 32) + "' is not LAYER:PAGE with LAYER below " +
					   std::to_string(h_.layers));
			e.pages.push_back(p);
		}
		return 1;
	}
	return bad("unknown event");
}

} // namespace llmcache::kv
