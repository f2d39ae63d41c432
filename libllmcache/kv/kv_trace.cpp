// SPDX-License-Identifier: MIT
#include "kv/kv_trace.hpp"

#include "kv/policy_aerp.hpp"

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
		      "estimator=%s%s",
		      KV_TRACE_VERSION, h.layers, h.q_heads, h.kv_heads, h.head_dim, h.dtype, h.max_context, h.page_tokens,
		      h.sink_tokens, h.recent_tokens, (unsigned long long)h.cpu_budget, h.beta, h.device ? 1 : 0,
		      h.estimator.c_str(), h.write_through ? " write_through=1" : "");
	std::string s = b;
	if (h.aerp_budget) {
		s += " aerp_budget=" + std::to_string(h.aerp_budget) + " d_model=" + std::to_string(h.d_model);
		if (h.memory)
			s += " memory=1 route_threshold=" + std::to_string(h.route_threshold);
	}
	return s + '\n';
}

std::string format_kv_trace_event(const KvTraceEvent &e)
{
	std::string s(1, (char)e.kind);
	auto num = [&](uint64_t v) { s += ' ' + std::to_string(v); };
	switch (e.kind) {
	case KvTraceEvent::Append:
	case KvTraceEvent::AppendX:
		num(e.layer), num(e.count);
		break;
	case KvTraceEvent::Logits:
		num(e.layer), num(e.budget), num(e.n);
		for (float x : e.scores)
			s += ' ' + fmt_float(x);
		break;
	case KvTraceEvent::Format:
		num(e.layer), num(e.pos);
		s += e.x ? " x" : " kv";
		break;
	case KvTraceEvent::Evicted:
		num(e.layer);
		for (const KvTracePair &p : e.pairs)
			s += ' ' + std::to_string(p.pos) + ':' + std::to_string(p.head);
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
	e.kind = append_x_ ? KvTraceEvent::AppendX : KvTraceEvent::Append;
	e.layer = append_layer_;
	e.count = append_count_;
	append_count_ = 0;
	put(e);
}

void KvTraceWriter::append(uint32_t layer, bool x)
{
	if (append_count_ && (append_layer_ != layer || append_x_ != x))
		flush_appends();
	append_layer_ = layer;
	append_x_ = x;
	append_count_++;
}

void KvTraceWriter::logits(uint32_t layer, uint32_t budget, uint32_t n, std::span<const float> logits)
{
	flush_appends();
	KvTraceEvent e;
	e.kind = KvTraceEvent::Logits;
	e.layer = layer;
	e.budget = budget;
	e.n = n;
	e.scores.assign(logits.begin(), logits.end());
	put(e);
}

void KvTraceWriter::format(uint32_t layer, uint32_t pos, bool x)
{
	flush_appends();
	KvTraceEvent e;
	e.kind = KvTraceEvent::Format;
	e.layer = layer;
	e.pos = pos;
	e.x = x;
	put(e);
}

void KvTraceWriter::evicted(uint32_t layer, std::vector<KvTracePair> pairs)
{
	flush_appends();
	KvTraceEvent e;
	e.kind = KvTraceEvent::Evicted;
	e.layer = layer;
	e.pairs = std::move(pairs);
	put(e);
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
	// key=value fields: every one of keys, in this order, then those of `optional` that are there, in
	// their order, each at most once (vals gets "" for those left out).
	auto fields = [&](const char *tag, std::initializer_list<const char *> keys, std::vector<std::string> &vals,
			  std::initializer_list<const char *> optional = {}) {
		int r = getline(s, err);
		if (r <= 0)
			return r < 0 ? r : bad(std::string("the header ends before its '") + tag + "' line");
		const auto f = split(s);
		if (f[0] != tag)
			return bad(std::string("expected the '") + tag + "' line of the header");
		if (f.size() > keys.size() + optional.size() + 1 || f.size() < keys.size() + 1)
			return bad(std::string("the '") + tag + "' line has " + std::to_string(f.size() - 1) + " fields, not " +
				   (optional.size() ? std::to_string(keys.size()) + "-" : std::string()) +
				   std::to_string(keys.size() + optional.size()));
		size_t i = 1;
		for (const char *k : keys) {
			const std::string want = std::string(k) + "=";
			if (f[i].compare(0, want.size(), want) != 0)
				return bad("field " + std::to_string(i) + " of '" + tag + "' is '" + f[i] + "', expected " + want + "...");
			vals.push_back(f[i++].substr(want.size()));
		}
		for (const char *k : optional) {
			const std::string want = std::string(k) + "=";
			const bool here = i < f.size() && f[i].compare(0, want.size(), want) == 0;
			vals.push_back(here ? f[i++].substr(want.size()) : std::string());
			if (here && vals.back().empty())
				return bad("the '" + std::string(tag) + "' field " + k + " has no value");
		}
		if (i < f.size()) {
			std::string names;
			for (const char *k : optional)
				names += std::string(names.empty() ? "" : ", ") + k + "=";
			return bad("field " + std::to_string(i) + " of '" + tag + "' is '" + f[i].substr(0, 32) +
				   "', expected one of " + names + " (in this order, each once)");
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
	if ((r = fields("policy", {"page_tokens", "sink_tokens", "recent_tokens", "cpu_budget", "beta", "device", "estimator"},
			v, {"write_through", "aerp_budget", "d_model", "memory", "route_threshold"})))
		return r;
	if (!v[7].empty() && v[7] != "0" && v[7] != "1")
		return bad("the 'policy' field write_through is '" + v[7] + "', not 0 or 1");
	h.write_through = v[7] == "1";
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
	// AERP: aerp_budget and d_model together; memory and route_threshold together, with AERP.
	if (v[8].empty() != v[9].empty() || v[10].empty() != v[11].empty())
		return bad("the 'policy' fields aerp_budget and d_model, and memory and route_threshold, go in pairs");
	if (!v[10].empty() && v[8].empty())
		return bad("the 'policy' field memory needs aerp_budget (the memory folds what AERP evicts)");
	if (!v[8].empty()) {
		if (!parse_u32(v[8], h.aerp_budget) || !parse_u32(v[9], h.d_model) || h.d_model > KV_TRACE_MAX_D_MODEL)
			return bad("the 'policy' fields aerp_budget '" + v[8].substr(0, 32) + "' and d_model '" + v[9].substr(0, 32) +
				   "' must be whole numbers, d_model at most " + std::to_string(KV_TRACE_MAX_D_MODEL));
		policy::AerpParams prm;
		prm.budget = h.aerp_budget;
		prm.sink_tokens = h.sink_tokens;
		prm.recent_tokens = h.recent_tokens;
		prm.q_heads = h.q_heads;
		prm.kv_heads = h.kv_heads;
		prm.head_dim = h.head_dim;
		prm.d_model = h.d_model;
		std::string why;
		if (policy::check_aerp(prm, why))
			return bad(why);
		if (h.device || h.write_through)
			return bad("an AERP session keeps its KV in memory: its 'policy' line has device=0 and no write_through=1");
	}
	if (!v[10].empty()) {
		if ((v[10] != "0" && v[10] != "1") || !parse_u32(v[11], h.route_threshold) ||
		    (v[10] == "1" && h.route_threshold >= h.max_context))
			return bad("the 'policy' fields memory '" + v[10].substr(0, 32) + "' and route_threshold '" +
				   v[11].substr(0, 32) + "' must be 0 or 1, and a whole number below max_context (" +
				   std::to_string(h.max_context) + ")");
		h.memory = v[10] == "1";
		if (!h.memory)
			h.route_threshold = 0;
	}
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
	// The events of a session: AERP sessions have their own (kv_trace.hpp).
	const bool aerp = h_.aerp_budget > 0;
	const char *events = aerp ? "ailsfe" : "aqspvw";
	if (f[0].size() != 1 || !std::strchr(events, f[0][0])) {
		const bool other = f[0].size() == 1 && f[0][0] && std::strchr(aerp ? "qpvw" : "ilfe", f[0][0]);
		return bad("unknown event '" + f[0].substr(0, 16) + "' (expected " +
			   (aerp ? "a, i, l, s, f or e in an AERP session's trace" : "a, q, s, p, v or w") + ")" +
			   (!other ? ""
			    : aerp ? "; '" + f[0] + "' is not an event of an AERP session"
				   : "; '" + f[0] + "' is an AERP session's event, and the 'policy' line has no aerp_budget"));
	}
	e = {};
	e.kind = (KvTraceEvent::Kind)f[0][0];
	auto layer = [&](const std::string &x, uint32_t &l) { return parse_u32(x, l) && l < h_.layers; };
	switch (e.kind) {
	case KvTraceEvent::Append:
	case KvTraceEvent::AppendX:
		if (f.size() != 3 || !layer(f[1], e.layer) || !parse_u32(f[2], e.count) || !e.count)
			return bad(std::string("expected '") + (char)e.kind + " LAYER COUNT' with LAYER below " +
				   std::to_string(h_.layers) + " and COUNT > 0");
		if (e.kind == KvTraceEvent::AppendX && !h_.d_model)
			return bad("'i' appends input vectors, and the session does not recompute (d_model=0)");
		return 1;
	case KvTraceEvent::Logits: {
		if (f.size() < 4 || !layer(f[1], e.layer) || !parse_u32(f[2], e.budget) || !parse_u32(f[3], e.n) ||
		    e.n > h_.max_context)
			return bad("expected 'l LAYER BUDGET N LOGIT...' with LAYER below " + std::to_string(h_.layers) +
				   " and N at most " + std::to_string(h_.max_context));
		const uint64_t count = (uint64_t)e.n * h_.q_heads;
		if (f.size() != 4 + count)
			return bad("'l' announces " + std::to_string(e.n) + " tokens x " + std::to_string(h_.q_heads) +
				   " query heads = " + std::to_string(count) + " logits and has " + std::to_string(f.size() - 4));
		e.scores.resize(count);
		for (uint64_t i = 0; i < count; i++)
			if (!parse_float(f[4 + i], e.scores[i]))
				return bad("logit " + std::to_string(i + 1) + " '" + f[4 + i].substr(0, 32) + "' is not a number");
		return 1;
	}
	case KvTraceEvent::Format:
		if (f.size() != 4 || !layer(f[1], e.layer) || !parse_u32(f[2], e.pos) || e.pos >= h_.max_context ||
		    (f[3] != "x" && f[3] != "kv"))
			return bad("expected 'f LAYER POS x|kv' with LAYER below " + std::to_string(h_.layers) + " and POS below " +
				   std::to_string(h_.max_context));
		e.x = f[3] == "x";
		if (e.x && !h_.d_model)
			return bad("'f' stores token " + f[2] + " as x, and the session does not recompute (d_model=0)");
		return 1;
	case KvTraceEvent::Evicted:
		if (f.size() < 3 || !layer(f[1], e.layer))
			return bad("expected 'e LAYER POS:HEAD...' with LAYER below " + std::to_string(h_.layers) +
				   " and at least one pair");
		for (size_t i = 2; i < f.size(); i++) {
			const size_t c = f[i].find(':');
			KvTracePair p;
			if (c == std::string::npos || !parse_u32(f[i].substr(0, c), p.pos) || !parse_u32(f[i].substr(c + 1), p.head) ||
			    p.pos >= h_.max_context || p.head >= h_.kv_heads || (!e.pairs.empty() && p.head < e.pairs.back().head))
				return bad("pair " + std::to_string(i - 1) + " '" + f[i].substr(0, 32) + "' is not POS:HEAD with POS below " +
					   std::to_string(h_.max_context) + " and HEAD below " + std::to_string(h_.kv_heads) +
					   ", heads in ascending order");
			e.pairs.push_back(p);
		}
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
