// SPDX-License-Identifier: MIT
#include "kv/kv_replay.hpp"

#include "csd/backend.hpp"
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
	return p;
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
	KvPolicyModel model(result.header, result.params);
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
	auto compare = [&] {
		for (; !theirs.empty() && !pending.empty(); theirs.pop_front(), pending.pop_front(), compared++)
			if (result.divergence.empty() && theirs.front().line != pending.front())
				result.divergence = "decision " + std::to_string(compared + 1) + " (trace line " +
						    std::to_string(theirs.front().at) + "): recorded '" + shorten(theirs.front().line) +
						    "', replayed '" + shorten(pending.front()) + "'";
	};
	while ((r = rd.next(e, err)) > 0) {
		const size_t before = mine.size();
		switch (e.kind) {
		case KvTraceEvent::Append:
			for (uint32_t i = 0; i < e.count; i++)
				model.append(e.layer, mine);
			break;
		case KvTraceEvent::Select:
			model.select(e, mine);
			break;
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
		if (!keep_decisions)
			mine.clear();
		compare();
	}
	if (r < 0)
		return r;
	if (check && result.divergence.empty() && (!theirs.empty() || !pending.empty()))
		result.divergence = !theirs.empty() ? "the trace records " + std::to_string(theirs.size()) +
							      " more decisions than the replay made, from trace line " +
							      std::to_string(theirs.front().at)
						    : "the replay made " + std::to_string(pending.size()) +
							      " more decisions than the trace records, the first '" +
							      shorten(pending.front()) + "'";
	const uint64_t failures = result.figures.recorded_write_failures;
	result.figures = model.figures();
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
