// SPDX-License-Identifier: MIT
/*
 * KvStore's AERP sessions (KvOptions::aerp): executes Kelle's attention-based eviction and
 * recomputation (policy_aerp.hpp) with real rows, in memory.
 *  - append: the token arrives with every head's K and V (and x when the session recomputes); when a
 *    token leaves the recent window its form is decided once (x, or the K and V rows of the heads
 *    that keep it); then every head over the budget drops its lowest-ranked tokens, and the dropped
 *    rows, or whole tokens no head keeps, are freed.
 *  - select: K and V of every retained token (recomputed from x where stored so), the attention of the
 *    query per head over the tokens the head keeps, added to their importance (Kelle Eq. 3); returned
 *    are the retained tokens, all of them when they fit the select's budget, else sink, recent and the
 *    highest importance summed over the heads, with the per-head keep mask.
 *  - with the compressed memory (KvOptions::memory, policy_memory.hpp): before the evicted rows are
 *    freed, each (token, head) pair the eviction removed is folded into that head's M and z, with the
 *    rows the token holds for it (recomputed from x for a token stored so); a select also returns the
 *    memory's readout for its query, per query head, when the layer's context is past the routing
 *    threshold.
 *  - with a trace (KvOptions::trace, kv_trace.hpp): each append ('a', or 'i' with x), each token's
 *    form ('f') and each eviction's pairs ('e') as decided, and each select's logits ('l') and the
 *    positions it returned ('s'), which the KV replay (kv_replay.hpp, KvAerpModel) reproduces.
 */
#include "kv/kv_store.hpp"

#include "kv/kv_trace.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

namespace llmcache::kv {

policy::AerpParams KvStore::aerp_params() const
{
	policy::AerpParams p;
	p.budget = opt_.aerp.budget;
	p.sink_tokens = opt_.sink_tokens;
	p.recent_tokens = opt_.recent_tokens;
	p.q_heads = shape_.q_heads;
	p.kv_heads = shape_.kv_heads;
	p.head_dim = shape_.head_dim;
	p.d_model = opt_.aerp.d_model;
	return p;
}

namespace {

void release(std::vector<uint8_t> &b) { std::vector<uint8_t>().swap(b); }

// Keeps the rows of the heads set in `after` out of a buffer holding those set in `before`.
void repack(std::vector<uint8_t> &rows, const uint8_t *before, const uint8_t *after, uint32_t heads, uint64_t head_bytes)
{
	std::vector<uint8_t> out;
	uint32_t from = 0;
	for (uint32_t h = 0; h < heads; h++) {
		if (before[h] && after[h])
			out.insert(out.end(), rows.begin() + from * head_bytes, rows.begin() + (from + 1) * head_bytes);
		from += before[h];
	}
	rows.swap(out);
}

} // namespace

int KvStore::aerp_append(uint32_t layer, const void *k, const void *v, const void *x)
{
	const policy::AerpParams prm = aerp_params();
	const uint32_t H = shape_.kv_heads;
	const uint64_t row = geo_.row_bytes(), head_bytes = row / H;
	AerpLayer &L = aerp_[layer];
	AerpToken t;
	t.k.assign(static_cast<const uint8_t *>(k), static_cast<const uint8_t *>(k) + row);
	t.v.assign(static_cast<const uint8_t *>(v), static_cast<const uint8_t *>(v) + row);
	if (x && aerp_recompute()) {
		const uint64_t xb = (uint64_t)prm.d_model * csd_dtype_bytes(shape_.dtype);
		t.x.assign(static_cast<const uint8_t *>(x), static_cast<const uint8_t *>(x) + xb);
	}
	L.pos.push_back(tokens_[layer]);
	L.score.insert(L.score.end(), H, 0.0f);
	L.kept.insert(L.kept.end(), H, 1);
	const bool with_x = !t.x.empty();
	L.tok.push_back(std::move(t));
	const uint32_t n_total = ++tokens_[layer];
	if (trace_)
		trace_->append(layer, with_x);
	// The form of a token is decided once, when it leaves the recent window; tokens are decided in
	// position order, so the walk back stops at the first decided one.
	for (size_t i = L.tok.size(); i-- > 0;) {
		if (L.pos[i] + prm.recent_tokens >= n_total)
			continue;
		AerpToken &tk = L.tok[i];
		if (tk.form != Form::Recent)
			break;
		const uint32_t kept = policy::popularity(prm, L.pos, n_total, i, L.kept, L.score);
		if (!tk.x.empty() && policy::aerp_store_input(prm, kept)) {
			tk.form = Form::X;
			release(tk.k);
			release(tk.v);
		} else {
			tk.form = Form::Kv; // every head keeps a token that was recent: its rows are all there
			release(tk.x);
		}
		if (trace_)
			trace_->format(layer, L.pos[i], tk.form == Form::X);
	}
	if (L.pos.size() <= prm.budget)
		return 0;
	const std::vector<uint8_t> before = L.kept;
	const std::vector<policy::Eviction> ev = policy::evict(prm, L.pos, n_total, L.kept, L.score);
	stats_.aerp_evicted_heads += ev.size();
	if (trace_ && !ev.empty()) {
		std::vector<KvTracePair> pairs;
		for (const policy::Eviction &e : ev)
			pairs.push_back({L.pos[e.token], e.head});
		trace_->evicted(layer, std::move(pairs));
	}
	if (!memory_.empty())
		memory_fold_evicted(layer, ev, before);
	std::vector<uint32_t> touched;
	for (const policy::Eviction &e : ev)
		touched.push_back(e.token);
	std::sort(touched.begin(), touched.end());
	touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
	for (uint32_t i : touched) {
		AerpToken &tk = L.tok[i];
		if (tk.form == Form::Kv) {
			repack(tk.k, &before[(size_t)i * H], &L.kept[(size_t)i * H], H, head_bytes);
			repack(tk.v, &before[(size_t)i * H], &L.kept[(size_t)i * H], H, head_bytes);
		}
	}
	// Tokens that no head keeps are gone.
	stats_.aerp_evicted_tokens += policy::drop_unkept(H, L.pos, L.kept, L.score,
							  [&](size_t from, size_t to) { L.tok[to] = std::move(L.tok[from]); });
	L.tok.resize(L.pos.size());
	return 0;
}

void KvStore::aerp_recompute_rows(uint32_t layer, const AerpToken &tk, uint8_t *k, uint8_t *v)
{
	const auto t0 = std::chrono::steady_clock::now();
	const uint32_t dims = geo_.dims(), d = opt_.aerp.d_model;
	const size_t w_at = (size_t)layer * d * dims;
	policy::recompute(tk.x.data(), shape_.dtype, opt_.aerp.w_k.data() + w_at, d, dims, k);
	policy::recompute(tk.x.data(), shape_.dtype, opt_.aerp.w_v.data() + w_at, d, dims, v);
	stats_.aerp_recomputed++;
	stats_.aerp_recompute_ns +=
		(uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

// EdgeInfinite's compression (Eq. 5, 6) of what the eviction removes for good: head h's K and V rows of
// each token it dropped, as the token holds them (its stored rows, the heads set in `before` in head
// order; or every head's, recomputed from x once per token), folded in the order of ev: by head, and in
// a head the lowest-ranked first.
void KvStore::memory_fold_evicted(uint32_t layer, const std::vector<policy::Eviction> &ev,
				  const std::vector<uint8_t> &before)
{
	if (ev.empty())
		return;
	const uint32_t H = shape_.kv_heads;
	const uint64_t row = geo_.row_bytes(), head_bytes = row / H;
	policy::CompressedMemory &mem = memory_[layer];
	if (mem.empty())
		mem = policy::CompressedMemory(H, shape_.head_dim);
	const AerpLayer &L = aerp_[layer];
	std::map<uint32_t, std::vector<uint8_t>> recomputed; // token: its K row, then its V row
	for (const policy::Eviction &e : ev) {
		const AerpToken &tk = L.tok[e.token];
		const uint8_t *k, *v;
		if (tk.form == Form::X) {
			auto [it, fresh] = recomputed.try_emplace(e.token);
			if (fresh) {
				it->second.resize(2 * row);
				aerp_recompute_rows(layer, tk, it->second.data(), it->second.data() + row);
			}
			k = it->second.data() + e.head * head_bytes;
			v = it->second.data() + row + e.head * head_bytes;
		} else {
			uint32_t at = e.head; // Recent: every head's rows
			if (tk.form == Form::Kv) {
				const uint8_t *b = &before[(size_t)e.token * H];
				at = (uint32_t)std::count(b, b + e.head, 1);
			}
			k = tk.k.data() + at * head_bytes;
			v = tk.v.data() + at * head_bytes;
		}
		policy::memory_fold(mem, e.head, k, v, shape_.dtype);
		stats_.memory_folded++;
	}
}

void KvStore::aerp_rows(uint32_t layer, size_t i, uint8_t *k, uint8_t *v)
{
	const AerpLayer &L = aerp_[layer];
	const AerpToken &tk = L.tok[i];
	const uint32_t H = shape_.kv_heads;
	const uint64_t row = geo_.row_bytes(), head_bytes = row / H;
	if (tk.form == Form::Recent) {
		std::memcpy(k, tk.k.data(), row);
		std::memcpy(v, tk.v.data(), row);
		return;
	}
	if (tk.form == Form::X)
		return aerp_recompute_rows(layer, tk, k, v);
	std::memset(k, 0, row);
	std::memset(v, 0, row);
	uint32_t from = 0;
	for (uint32_t h = 0; h < H; h++)
		if (L.kept[i * H + h]) {
			std::memcpy(k + h * head_bytes, tk.k.data() + from * head_bytes, head_bytes);
			std::memcpy(v + h * head_bytes, tk.v.data() + from * head_bytes, head_bytes);
			from++;
		}
}

int KvStore::aerp_select(KvSelection &out)
{
	const Pending &pd = pending_;
	const uint32_t layer = pd.layer, H = shape_.kv_heads, QH = shape_.q_heads, D = shape_.head_dim;
	const uint32_t group = QH / H, n_total = tokens_[layer];
	const policy::AerpParams prm = aerp_params();
	AerpLayer &L = aerp_[layer];
	const size_t n = L.pos.size();
	const uint64_t row = geo_.row_bytes();
	std::vector<uint8_t> K(n * row), V(n * row);
	for (size_t i = 0; i < n; i++)
		aerp_rows(layer, i, &K[i * row], &V[i * row]);
	// Eq. 1's logits, q.k / sqrt(head_dim), for the heads that keep each token.
	std::vector<float> logits(n * QH, 0.0f), kf(D);
	const float scale = 1.0f / std::sqrt((float)D);
	for (size_t i = 0; i < n; i++)
		for (uint32_t h = 0; h < H; h++) {
			if (!L.kept[i * H + h])
				continue;
			for (uint32_t d = 0; d < D; d++)
				kf[d] = policy::element(&K[i * row], shape_.dtype, (uint64_t)h * D + d);
			for (uint32_t qh = h * group; qh < (h + 1) * group; qh++) {
				const float *q = pd.q.data() + (size_t)qh * D;
				float dot = 0;
				for (uint32_t d = 0; d < D; d++)
					dot += q[d] * kf[d];
				logits[i * QH + qh] = dot * scale;
			}
		}
	if (trace_)
		trace_->logits(layer, pd.budget, (uint32_t)n, logits);
	policy::accumulate_importance(prm, (uint32_t)n, logits, L.kept, L.score);
	const std::vector<uint32_t> idx = policy::select_retained(prm, L.pos, L.score, n_total, pd.budget);
	out.positions.resize(idx.size());
	out.k.resize(idx.size() * row);
	out.v.resize(idx.size() * row);
	out.heads.resize(idx.size() * H);
	for (size_t j = 0; j < idx.size(); j++) {
		const uint32_t i = idx[j];
		out.positions[j] = L.pos[i];
		std::memcpy(&out.k[j * row], &K[i * row], row);
		std::memcpy(&out.v[j * row], &V[i * row], row);
		std::memcpy(&out.heads[j * H], &L.kept[(size_t)i * H], H);
	}
	if (trace_)
		trace_->selected(layer, out.positions);
	if (!memory_.empty()) { // EdgeInfinite's decompression (Eq. 7), with the long/short routing
		const bool routed = policy::memory_routed(n_total, opt_.memory.route_threshold);
		out.memory.resize((size_t)QH * D);
		out.memory_state.resize(QH);
		policy::memory_readout_all(memory_[layer], QH, H, D, routed, pd.q.data(), out.memory, out.memory_state);
		(routed ? stats_.memory_reads : stats_.memory_short)++;
	}
	return 0;
}

} // namespace llmcache::kv
