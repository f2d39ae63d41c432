// SPDX-License-Identifier: MIT
#include "kv/kv_replay.hpp"

#include "csd/backend.hpp"
#include "kv/kv_store.hpp"
#include "kv/policy_memory.hpp"
#include "kv/policy_pool_update.hpp"
#include "kv/policy_select.hpp"
#include "kv/policy_spill.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>

#include <nlohmann/json.hpp>

namespace llmcache::kv {

KvReplayParams kv_replay_params(const KvTraceHeader &h, const KvReplayOverrides &o)
{
	KvReplayParams p;
	p.policy.page_tokens = o.page_tokens ? o.page_tokens : h.page_tokens;
	p.policy.sink_tokens = o.sink_tokens >= 0 ? (uint32_t)o.sink_tokens : h.sink_tokens;
	p.policy.recent_tokens = o.recent_tokens >= 0 ? (uint32_t)o.recent_tokens : h.recent_tokens;
	p.policy.cpu_budget = o.cpu_budget ? o.cpu_budget : h.cpu_budget;
	p.policy.device = o.device >= 0 ? o.device == 1 : h.device;
	p.beta = o.beta >= 0 ? o.beta : h.beta > 0 ? h.beta : 0;
	p.write_through = p.policy.device && (o.write_through >= 0 ? o.write_through == 1 : h.write_through);
	p.select_budget = o.select_budget;
	const csd::KvGeometry g{h.q_heads, h.kv_heads, h.head_dim, h.dtype, p.policy.page_tokens};
	p.row_bytes = g.row_bytes();
	p.k_payload = g.k_payload(p.policy.page_tokens);
	p.policy.page_bytes = p.k_payload + p.policy.page_tokens * p.row_bytes;
	if (h.aerp_budget) {
		p.aerp.budget = h.aerp_budget;
		p.aerp.sink_tokens = h.sink_tokens;
		p.aerp.recent_tokens = h.recent_tokens;
		p.aerp.q_heads = h.q_heads;
		p.aerp.kv_heads = h.kv_heads;
		p.aerp.head_dim = h.head_dim;
		p.aerp.d_model = h.d_model;
		p.memory = h.memory;
		p.route_threshold = h.route_threshold;
		p.x_bytes = (uint64_t)h.d_model * csd_dtype_bytes(h.dtype);
	}
	return p;
}

KvAerpModel::KvAerpModel(const KvTraceHeader &h, const KvReplayParams &p) : p_(p) { layers_.resize(h.layers); }

// aerp_append in kv_store_aerp.cpp, step by step, without the rows.
void KvAerpModel::append(uint32_t layer, bool x, std::vector<KvTraceEvent> &decisions)
{
	const policy::AerpParams &prm = p_.aerp;
	const uint32_t H = prm.kv_heads;
	Layer &L = layers_[layer];
	L.pos.push_back(L.tokens);
	L.score.insert(L.score.end(), H, 0.0f);
	L.kept.insert(L.kept.end(), H, 1);
	L.form.push_back(Form::Recent);
	L.has_x.push_back(x);
	const uint32_t n_total = ++L.tokens;
	fig_.appends++;
	fig_.appends_x += x;
	for (size_t i = L.pos.size(); i-- > 0;) {
		if (L.pos[i] + prm.recent_tokens >= n_total)
			continue;
		if (L.form[i] != Form::Recent)
			break;
		const uint32_t kept = policy::popularity(prm, L.pos, n_total, i, L.kept, L.score);
		KvTraceEvent f;
		f.kind = KvTraceEvent::Format;
		f.layer = layer;
		f.pos = L.pos[i];
		f.x = L.has_x[i] && policy::aerp_store_input(prm, kept);
		L.form[i] = f.x ? Form::X : Form::Kv;
		(f.x ? fig_.aerp_decided_x : fig_.aerp_decided_kv)++;
		decisions.push_back(std::move(f));
	}
	if (L.pos.size() <= prm.budget)
		return;
	const std::vector<policy::Eviction> ev = policy::evict(prm, L.pos, n_total, L.kept, L.score);
	fig_.aerp_evicted_heads += ev.size();
	if (!ev.empty()) {
		if (p_.memory) { // every pair folded; a token stored as x recomputed once for it
			L.memory = true;
			fig_.memory_folded += ev.size();
			std::vector<uint32_t> x_tokens;
			for (const policy::Eviction &e : ev)
				if (L.form[e.token] == Form::X)
					x_tokens.push_back(e.token);
			std::sort(x_tokens.begin(), x_tokens.end());
			fig_.aerp_recomputed += std::unique(x_tokens.begin(), x_tokens.end()) - x_tokens.begin();
		}
		KvTraceEvent e;
		e.kind = KvTraceEvent::Evicted;
		e.layer = layer;
		for (const policy::Eviction &v : ev)
			e.pairs.push_back({L.pos[v.token], v.head});
		decisions.push_back(std::move(e));
	}
	fig_.aerp_evicted_tokens += policy::drop_unkept(H, L.pos, L.kept, L.score, [&](size_t from, size_t to) {
		L.form[to] = L.form[from];
		L.has_x[to] = L.has_x[from];
	}); // tokens that no head keeps are gone
	L.form.resize(L.pos.size());
	L.has_x.resize(L.pos.size());
}

int KvAerpModel::select(const KvTraceEvent &l, std::vector<KvTraceEvent> &decisions, std::string &err)
{
	Layer &L = layers_[l.layer];
	const uint32_t n = (uint32_t)L.pos.size();
	if (l.n != n) {
		err = "the 'l' line gives the logits of " + std::to_string(l.n) + " retained tokens, and layer " +
		      std::to_string(l.layer) + " retains " + std::to_string(n) +
		      " in the replay (a trace of other parameters, or altered)";
		return -EINVAL;
	}
	policy::accumulate_importance(p_.aerp, n, l.scores, L.kept, L.score);
	KvTraceEvent s;
	s.kind = KvTraceEvent::Selected;
	s.layer = l.layer;
	for (uint32_t i :
	     policy::select_retained(p_.aerp, L.pos, L.score, L.tokens, p_.select_budget ? p_.select_budget : l.budget))
		s.items.push_back(L.pos[i]);
	fig_.selects++;
	fig_.selected += s.items.size();
	fig_.aerp_recomputed += std::count(L.form.begin(), L.form.end(), Form::X); // the rows of every retained token
	if (p_.memory)
		(policy::memory_routed(L.tokens, p_.route_threshold) ? fig_.memory_reads : fig_.memory_short)++;
	decisions.push_back(std::move(s));
	return 0;
}

KvReplayFigures KvAerpModel::figures() const
{
	KvReplayFigures f = fig_;
	const uint32_t H = p_.aerp.kv_heads;
	const uint64_t head_bytes = p_.row_bytes / H;
	for (const Layer &L : layers_) {
		f.memory_bytes += L.memory ? H * policy::CompressedMemory::bytes_per_head(p_.aerp.head_dim) : 0;
		for (size_t i = 0; i < L.pos.size(); i++) {
			f.aerp_tokens++;
			switch (L.form[i]) {
			case Form::Recent:
				f.aerp_bytes += 2 * p_.row_bytes + (L.has_x[i] ? p_.x_bytes : 0);
				break;
			case Form::Kv:
				f.aerp_bytes += 2 * head_bytes * std::count(&L.kept[i * H], &L.kept[i * H] + H, 1);
				break;
			case Form::X:
				f.aerp_x_tokens++;
				f.aerp_bytes += p_.x_bytes;
				break;
			}
		}
	}
	f.cpu_tokens = f.aerp_tokens;
	return f;
}

KvPolicyModel::KvPolicyModel(const KvTraceHeader &h, const KvReplayParams &p) : p_(p)
{
	pool_.pages.resize(h.layers);
	pool_.tokens.assign(h.layers, 0);
}

uint64_t KvPolicyModel::target() const
{
	return policy::cpu_target(p_.policy, p_.beta, (cpu_pages_ + spilled_pages_) * p_.policy.page_bytes);
}

uint64_t KvPolicyModel::hard_limit() const
{
	return p_.policy.cpu_budget + std::max(p_.policy.cpu_budget / 4, 2 * p_.policy.page_bytes);
}

void KvPolicyModel::spill(std::vector<KvTraceEvent> &decisions)
{
	if (!p_.policy.device) {
		spill_failed_ = true;
		return;
	}
	KvTraceEvent e;
	e.kind = KvTraceEvent::Spill;
	e.pages = policy::choose_spill_victims(pool_, p_.policy, target());
	for (const policy::PageRef &v : e.pages) {
		policy::PageInfo &p = pool_.pages[v.layer][v.page];
		if (p.device_copy) // clean demotion: the copy it came back from is still on the device
			fig_.clean_spills++;
		else
			fig_.bytes_written += p_.policy.page_bytes;
		p.resident = false;
		p.device_copy = true;
		pool_.cpu_bytes -= p_.policy.page_bytes;
		cpu_pages_--;
		spilled_pages_++;
	}
	fig_.spills++;
	fig_.spilled_pages += e.pages.size();
	spill_failed_ = pool_.cpu_bytes > p_.policy.cpu_budget;
	decisions.push_back(std::move(e));
}

void KvPolicyModel::append(uint32_t layer, std::vector<KvTraceEvent> &decisions)
{
	const uint32_t P = p_.policy.page_tokens, t = pool_.tokens[layer] % P;
	const uint64_t pb = p_.policy.page_bytes;
	auto &pages = pool_.pages[layer];
	if (t == 0 && pool_.cpu_bytes + pb > hard_limit() && p_.policy.device && !spill_failed_)
		spill(decisions);
	if (t == 0) {
		pages.push_back({});
		pool_.cpu_bytes += pb;
		cpu_pages_++;
		fig_.peak_cpu_bytes = std::max(fig_.peak_cpu_bytes, pool_.cpu_bytes);
	}
	policy::PageInfo &p = pages.back();
	p.n_tokens++;
	pool_.tokens[layer]++;
	fig_.appends++;
	const bool full = p.n_tokens == P;
	if (full && p_.write_through) { // written as it fills: its first spill is clean
		p.device_copy = true;
		fig_.written_through++;
		fig_.bytes_written_through += pb;
		fig_.bytes_written += pb;
	}
	if (!policy::must_spill_after_append(p_.policy, pool_.cpu_bytes, target(), full))
		return;
	if (spill_failed_ && !full)
		return;
	spill(decisions);
}

void KvPolicyModel::select(const KvTraceEvent &q, std::vector<KvTraceEvent> &decisions)
{
	const uint32_t layer = q.layer, P = p_.policy.page_tokens, n = pool_.tokens[layer];
	auto &pages = pool_.pages[layer];
	const policy::SelectPlan plan = policy::plan_select(n, p_.policy.sink_tokens, p_.policy.recent_tokens,
							    p_.select_budget ? p_.select_budget : q.budget);
	scores_.clear();
	for (uint32_t i = 0; i < q.scores.size() && q.first + i < n; i++)
		scores_.push_back({q.first + i, q.scores[i]});
	KvTraceEvent s;
	s.kind = KvTraceEvent::Selected;
	s.layer = layer;
	s.items = policy::select_tokens(plan, scores_);
	for (uint32_t pg : policy::pages_hit(plan, s.items, P))
		pages[pg].hits++;
	if (plan.k)
		for (uint32_t pg = 0; pg < pages.size(); pg++)
			if (!pages[pg].resident && plan.scored(pg, P))
				fig_.bytes_scanned += p_.k_payload;
	std::vector<uint32_t> fetched; // spilled pages holding selected tokens
	for (uint32_t pos : s.items)
		if (!pages[pos / P].resident && (fetched.empty() || fetched.back() != pos / P))
			fetched.push_back(pos / P);
	fig_.selects++;
	fig_.selected += s.items.size();
	const std::vector<uint32_t> positions = s.items;
	decisions.push_back(std::move(s));
	uint64_t from_storage = 0;
	for (uint32_t pos : positions)
		from_storage += !pages[pos / P].resident;
	fig_.selected_from_storage += from_storage;
	fig_.selected_in_cpu += positions.size() - from_storage;
	if (fetched.empty())
		return;
	KvTraceEvent pe;
	pe.kind = KvTraceEvent::Promoted;
	pe.layer = layer;
	pe.items = policy::choose_promotions(pages, fetched, p_.policy, plan.recent_from, pool_.cpu_bytes, target());
	for (uint32_t pos : positions) // rows read where they lie; promoted pages are read whole below
		if (!pages[pos / P].resident && !std::binary_search(pe.items.begin(), pe.items.end(), pos / P))
			fig_.bytes_fetched += 2 * p_.row_bytes;
	for (uint32_t pg : pe.items) {
		pages[pg].resident = true;
		pool_.cpu_bytes += p_.policy.page_bytes;
		cpu_pages_++;
		spilled_pages_--;
		fig_.bytes_fetched += p_.policy.page_bytes;
		fig_.peak_cpu_bytes = std::max(fig_.peak_cpu_bytes, pool_.cpu_bytes);
	}
	fig_.promoted_pages += pe.items.size();
	decisions.push_back(std::move(pe));
	if (pool_.cpu_bytes > target())
		spill(decisions);
}

KvReplayFigures KvPolicyModel::figures() const
{
	KvReplayFigures f = fig_;
	for (const auto &layer : pool_.pages)
		for (const policy::PageInfo &p : layer)
			(p.resident ? f.cpu_tokens : f.storage_tokens) += p.n_tokens;
	return f;
}

namespace {

std::string shorten(std::string s)
{
	if (!s.empty() && s.back() == '\n')
		s.pop_back();
	return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

} // namespace

int replay_kv_trace(std::istream &in, const KvReplayOverrides &o, bool keep_decisions, bool check, KvReplayResult &result,
		    std::string &err)
{
	result = {};
	KvTraceReader rd(in);
	if (int r = rd.open(result.header, err))
		return r;
	result.params = kv_replay_params(result.header, o);
	const bool aerp = result.header.aerp_budget > 0;
	if (aerp && (o.cpu_budget || o.beta >= 0 || o.sink_tokens >= 0 || o.recent_tokens >= 0 || o.page_tokens ||
		     o.device >= 0 || o.write_through >= 0)) {
		err = "an AERP session's trace replays with its recorded parameters (its logits are those of the tokens "
		      "the recorded run retained): only the select budget may vary";
		return -EINVAL;
	}
	KvPolicyModel model(result.header, result.params);
	KvAerpModel amodel(result.header, result.params);
	std::vector<KvTraceEvent> mine;
	struct Recorded {
		std::string line;
		uint64_t at;
	};
	std::deque<Recorded> theirs;
	std::deque<std::string> pending; // the replay's decisions not yet compared
	uint64_t compared = 0;
	KvTraceEvent e;
	int r;
	bool stopped = false; // an AERP replay that diverged until its logits no longer fit
	auto compare = [&] {
		for (; !theirs.empty() && !pending.empty(); theirs.pop_front(), pending.pop_front(), compared++)
			if (result.divergence.empty() && theirs.front().line != pending.front())
				result.divergence = "decision " + std::to_string(compared + 1) + " (trace line " +
						    std::to_string(theirs.front().at) + "): recorded '" + shorten(theirs.front().line) +
						    "', replayed '" + shorten(pending.front()) + "'";
	};
	auto tail = [&] { // with check: the decisions one side made and the other did not
		if (check && result.divergence.empty() && (!theirs.empty() || !pending.empty()))
			result.divergence = !theirs.empty() ? "the trace records " + std::to_string(theirs.size()) +
								      " more decisions than the replay made, from trace line " +
								      std::to_string(theirs.front().at)
							    : "the replay made " + std::to_string(pending.size()) +
								      " more decisions than the trace records, the first '" +
								      shorten(pending.front()) + "'";
	};
	while ((r = rd.next(e, err)) > 0) {
		const size_t before = mine.size();
		switch (e.kind) {
		case KvTraceEvent::Append:
		case KvTraceEvent::AppendX:
			for (uint32_t i = 0; i < e.count; i++)
				if (aerp)
					amodel.append(e.layer, e.kind == KvTraceEvent::AppendX, mine);
				else
					model.append(e.layer, mine);
			break;
		case KvTraceEvent::Select:
			model.select(e, mine);
			break;
		case KvTraceEvent::Logits: {
			std::string why;
			if (amodel.select(e, mine, why) < 0) {
				// A replay that diverged may retain other tokens than the recorded run: its first
				// difference is the answer, not the logits that no longer fit.
				tail();
				if (check && !result.divergence.empty()) {
					stopped = true;
					break;
				}
				err = "line " + std::to_string(rd.line()) + ": " + why;
				return -EINVAL;
			}
			break;
		}
		case KvTraceEvent::WriteFailed:
			result.figures.recorded_write_failures += e.pages.size();
			break;
		default: // a recorded decision
			result.recorded_decisions++;
			if (check)
				theirs.push_back({format_kv_trace_event(e), rd.line()});
			break;
		}
		if (check)
			for (size_t i = before; i < mine.size(); i++)
				pending.push_back(format_kv_trace_event(mine[i]));
		if (stopped)
			break;
		if (!keep_decisions)
			mine.clear();
		compare();
	}
	if (r < 0)
		return r;
	tail();
	const uint64_t failures = result.figures.recorded_write_failures;
	result.figures = aerp ? amodel.figures() : model.figures();
	result.figures.recorded_write_failures = failures;
	if (keep_decisions)
		result.decisions = std::move(mine);
	return 0;
}

namespace {

// The figures in order, each a count but beta (a fraction) and select_budget (null: the recorded one).
nlohmann::ordered_json kv_replay_figures(const KvReplayResult &r)
{
	const KvReplayFigures &f = r.figures;
	const KvReplayParams &p = r.params;
	if (p.aerp.budget) // AERP's figures; bytes per token are fractions (0 with no token)
		return {{"aerp_budget", p.aerp.budget},
			{"sink_tokens", p.aerp.sink_tokens},
			{"recent_tokens", p.aerp.recent_tokens},
			{"d_model", p.aerp.d_model},
			{"memory", p.memory ? 1 : 0},
			{"route_threshold", p.route_threshold},
			{"select_budget", p.select_budget ? nlohmann::ordered_json(p.select_budget) : nullptr},
			{"appends", f.appends},
			{"appends_with_x", f.appends_x},
			{"selects", f.selects},
			{"selected_tokens", f.selected},
			{"evicted_pairs", f.aerp_evicted_heads},
			{"evicted_tokens", f.aerp_evicted_tokens},
			{"decided_x", f.aerp_decided_x},
			{"decided_kv", f.aerp_decided_kv},
			{"retained_tokens", f.aerp_tokens},
			{"x_tokens", f.aerp_x_tokens},
			{"bytes_stored", f.aerp_bytes},
			{"bytes_per_retained_token", f.aerp_tokens ? (double)f.aerp_bytes / f.aerp_tokens : 0.0},
			{"bytes_per_appended_token", f.appends ? (double)f.aerp_bytes / f.appends : 0.0},
			{"recomputed", f.aerp_recomputed},
			{"memory_folded", f.memory_folded},
			{"memory_bytes", f.memory_bytes},
			{"memory_reads", f.memory_reads},
			{"memory_short", f.memory_short}};
	return {{"cpu_budget", p.policy.cpu_budget},
		{"beta", p.beta},
		{"page_tokens", p.policy.page_tokens},
		{"sink_tokens", p.policy.sink_tokens},
		{"recent_tokens", p.policy.recent_tokens},
		{"select_budget", p.select_budget ? nlohmann::ordered_json(p.select_budget) : nullptr},
		{"device", p.policy.device ? 1 : 0},
		{"write_through", p.write_through ? 1 : 0},
		{"appends", f.appends},
		{"selects", f.selects},
		{"selected_tokens", f.selected},
		{"selected_in_cpu", f.selected_in_cpu},
		{"selected_from_storage", f.selected_from_storage},
		{"spills", f.spills},
		{"spilled_pages", f.spilled_pages},
		{"clean_spills", f.clean_spills},
		{"promoted_pages", f.promoted_pages},
		{"cpu_tokens", f.cpu_tokens},
		{"storage_tokens", f.storage_tokens},
		{"peak_cpu_bytes", f.peak_cpu_bytes},
		{"written_through", f.written_through},
		{"bytes_written", f.bytes_written},
		{"bytes_written_through", f.bytes_written_through},
		{"bytes_fetched", f.bytes_fetched},
		{"bytes_scanned_by_host", f.bytes_scanned},
		{"recorded_write_failures", f.recorded_write_failures}};
}

} // namespace

std::string format_kv_replay(const KvReplayResult &r)
{
	const nlohmann::ordered_json figures = kv_replay_figures(r);
	std::string s;
	for (auto it = figures.begin(); it != figures.end(); ++it) {
		char b[32];
		if (it->is_number_float())
			std::snprintf(b, sizeof(b), "%.17g", it->get<double>());
		s += it.key() + " " + (it->is_null() ? "recorded" : it->is_number_float() ? b : it->dump()) + "\n";
	}
	return s;
}

std::string format_kv_replay_json(const KvReplayResult &r) { return kv_replay_figures(r).dump(); }

} // namespace llmcache::kv
