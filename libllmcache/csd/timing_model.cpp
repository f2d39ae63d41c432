// SPDX-License-Identifier: MIT
// The SmartSSD timing model of a decode step: timing_model.hpp says what it models, with which
// figures, and what it leaves out.
#include "csd/timing_model.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <limits>

namespace llmcache::csd {
namespace {

constexpr int NONE = -1;

enum class Via { End, FirstChunk };

struct Task {
	Resource resource;
	uint32_t layer;
	const char *what;
	double work_s, latency_s, chunks;
	int source; // streams from this task, or NONE
	double start = 0, end = 0;
	int start_by = NONE; // what bound the start: a task, or NONE (time 0)
	double start_at = 0;
	Via start_via = Via::End;
	bool end_by_source = false; // the end waited for the source's last chunk
	bool uses_resource() const { return work_s > 0 || latency_s > 0; }
	double first_chunk() const { return start + latency_s + work_s / chunks; }
};

// Schedules each task as it is added: all it depends on was added before it, and each resource
// serves its tasks in the order they were added.
class Schedule {
public:
	int add(Resource r, uint32_t layer, const char *what, double work_s, std::initializer_list<int> after,
		int source = NONE, double latency_s = 0, double chunks = 1)
	{
		Task t{r, layer, what, work_s, work_s > 0 ? latency_s : 0, std::max(chunks, 1.0), source};
		auto bind = [&](double at, int by, Via via) {
			if (at > t.start)
				t.start = at, t.start_at = at, t.start_by = by, t.start_via = via;
		};
		for (int a : after)
			if (a != NONE)
				bind(tasks_[a].end, a, Via::End);
		if (source != NONE)
			bind(tasks_[source].first_chunk(), source, Via::FirstChunk);
		const unsigned ri = (unsigned)r;
		if (t.uses_resource() && last_[ri] != NONE)
			bind(tasks_[last_[ri]].end, last_[ri], Via::End);
		t.end = t.start + t.latency_s + t.work_s;
		if (source != NONE && t.work_s > 0) {
			const double tail = tasks_[source].end + t.work_s / t.chunks;
			if (tail > t.end)
				t.end = tail, t.end_by_source = true;
		} else if (source != NONE && tasks_[source].end > t.end) {
			t.end = tasks_[source].end, t.end_by_source = true; // nothing of its own: passes the stream on
		}
		if (t.uses_resource())
			last_[ri] = (int)tasks_.size();
		tasks_.push_back(t);
		return (int)tasks_.size() - 1;
	}
	const std::vector<Task> &tasks() const { return tasks_; }

private:
	std::vector<Task> tasks_;
	int last_[RESOURCES] = {NONE, NONE, NONE, NONE, NONE, NONE};
};

double per(double work, double rate)
{
	if (work <= 0)
		return 0;
	return rate > 0 ? work / rate : std::numeric_limits<double>::infinity();
}

struct LayerTasks {
	int ready = NONE; // selection done and fetched rows on the host
	int compute = NONE;
	int selection = NONE;
	int host_read_up = NONE;
	int scores_up = NONE;
};

// Walks back from the task that ends last, through what bound each task's start or end.
void trace_critical_path(const std::vector<Task> &tasks, StepTiming &out)
{
	int at = NONE;
	for (int i = 0; i < (int)tasks.size(); i++)
		if (at == NONE || tasks[i].end > tasks[at].end)
			at = i;
	double cursor = at == NONE ? 0 : tasks[at].end;
	Via via = Via::End;
	while (at != NONE) {
		const Task &t = tasks[at];
		int next;
		double from;
		if (via == Via::End && t.end_by_source) {
			next = t.source, from = tasks[t.source].end, via = Via::End;
		} else {
			next = t.start_by, from = t.start_at, via = t.start_via;
		}
		if (cursor > from) {
			out.critical_s[(unsigned)t.resource] += cursor - from;
			out.path.push_back({t.resource, t.layer, t.what, cursor - from});
		}
		cursor = from;
		at = next;
	}
	std::reverse(out.path.begin(), out.path.end());
}

} // namespace

const char *resource_name(Resource r)
{
	switch (r) {
	case Resource::HostCpu: return "host CPU";
	case Resource::Flash: return "flash";
	case Resource::Fpga: return "FPGA";
	case Resource::PcieUp: return "PCIe up";
	case Resource::PcieDown: return "PCIe down";
	case Resource::Engine: return "engine";
	case Resource::Count: break;
	}
	return "?";
}

StepTiming predict_step(const SmartSsdTiming &p, const StepWork &w)
{
	const LayerWork &l = w.layer;
	const Resource engine = p.engine_shares_host_cpu ? Resource::HostCpu : Resource::Engine;
	const double device_chunks = std::max(l.kernel_runs, 1.0);
	const double fpga_s = per(l.device_tokens * l.macs_per_token, p.fpga_mac_rate) + l.kernel_runs * p.kernel_run_overhead_s;
	Schedule s;
	std::vector<LayerTasks> layer(w.layers);
	// Layer i's selection may start once it is allowed to: after layer i-1's selection and layer i-2's
	// compute when pipelined, after layer i-1's compute when not.
	auto gate = [&](uint32_t i, int which) -> int {
		if (i == 0)
			return NONE;
		if (w.pipelined)
			return which == 0 ? layer[i - 1].ready : (i >= 2 ? layer[i - 2].compute : NONE);
		return which == 0 ? layer[i - 1].compute : NONE;
	};
	auto device_side = [&](uint32_t i) {
		LayerTasks &t = layer[i];
		const int g0 = gate(i, 0), g1 = gate(i, 1);
		const int query = s.add(Resource::PcieDown, i, "query transfer", per(l.query_bytes, p.pcie_bw), {g0, g1});
		// Bounds-first's first stage: all of it before the page choice, so before the keys are read.
		const int bound_read = s.add(Resource::Flash, i, "device bounds read", per(l.bound_flash_bytes, p.flash_read_bw),
					     {query}, NONE, p.flash_read_latency_s, l.bound_pages);
		const int bound_scoring = s.add(Resource::Fpga, i, "device bounds scoring",
						per(l.bound_macs, p.fpga_mac_rate) + l.bound_runs * p.kernel_run_overhead_s, {},
						bound_read, 0, l.bound_pages);
		const int dev_read = s.add(Resource::Flash, i, "device K read", per(l.device_flash_bytes, p.flash_read_bw),
					   {query, bound_scoring}, NONE, p.flash_read_latency_s, device_chunks);
		const int kernel = s.add(Resource::Fpga, i, "device scoring", fpga_s, {}, dev_read, 0, device_chunks);
		t.scores_up = s.add(Resource::PcieUp, i, "Score Blocks", per(l.score_bytes, p.pcie_bw), {}, kernel, 0, device_chunks);
		const int host_read = s.add(Resource::Flash, i, "host K read", per(l.host_read_bytes, p.flash_read_bw), {g0, g1},
					    NONE, p.flash_read_latency_s, l.host_reads);
		t.host_read_up = s.add(Resource::PcieUp, i, "host K transfer", per(l.host_read_bytes, p.pcie_bw), {}, host_read, 0,
				       l.host_reads);
	};
	auto host_side = [&](uint32_t i) {
		LayerTasks &t = layer[i];
		const int g0 = gate(i, 0), g1 = gate(i, 1);
		const int pool = s.add(Resource::HostCpu, i, "host pool scoring", per(l.host_pool_tokens, p.host_score_rate), {g0, g1});
		const int read_scoring = s.add(Resource::HostCpu, i, "host K scoring", per(l.host_read_tokens, p.host_score_rate), {},
					       t.host_read_up, 0, l.host_reads);
		t.selection = s.add(Resource::HostCpu, i, "selection", 0, {t.scores_up, pool, read_scoring});
		const int fetch = s.add(Resource::Flash, i, "fetch read", per(l.fetch_bytes, p.flash_read_bw), {t.selection}, NONE,
					p.flash_read_latency_s, l.fetch_reads);
		const int fetch_up =
			s.add(Resource::PcieUp, i, "fetch transfer", per(l.fetch_bytes, p.pcie_bw), {}, fetch, 0, l.fetch_reads);
		t.ready = s.add(Resource::HostCpu, i, "rows on the host", 0, {t.selection, fetch_up});
		// The pool update after the selection spills pages: it delays only the link and the flash.
		const int spill_down = s.add(Resource::PcieDown, i, "spill transfer", per(l.spill_bytes, p.pcie_bw), {t.ready});
		s.add(Resource::Flash, i, "spill write", per(l.spill_bytes, p.flash_write_bw), {}, spill_down);
	};
	auto compute = [&](uint32_t i) {
		layer[i].compute = s.add(engine, i, "engine compute", l.compute_s, {layer[i].ready, i ? layer[i - 1].compute : NONE});
	};
	if (w.layers) {
		device_side(0);
		host_side(0);
	}
	for (uint32_t i = 0; i < w.layers; i++) {
		const bool next = i + 1 < w.layers;
		if (next && w.pipelined)
			device_side(i + 1);
		compute(i);
		if (next && !w.pipelined)
			device_side(i + 1);
		if (next)
			host_side(i + 1);
	}
	StepTiming out;
	for (const Task &t : s.tasks()) {
		out.step_s = std::max(out.step_s, t.end);
		out.busy_s[(unsigned)t.resource] += t.work_s;
	}
	out.compute_s = l.compute_s * w.layers;
	out.exposed_kv_s = std::max(0.0, out.step_s - out.compute_s);
	trace_critical_path(s.tasks(), out);
	for (unsigned r = 0; r < RESOURCES; r++)
		if (out.critical_s[r] > out.critical_s[(unsigned)out.bottleneck])
			out.bottleneck = (Resource)r;
	return out;
}

double gpu_layer_compute_s(const GpuEngine &g, double weight_bytes, double kv_bytes, double flops)
{
	return std::max(per(weight_bytes + kv_bytes, g.memory_bw), per(flops, g.fp16_flops));
}

std::string critical_summary(const StepTiming &t)
{
	std::vector<unsigned> order;
	for (unsigned r = 0; r < RESOURCES; r++)
		if (t.step_s > 0 && t.critical_s[r] >= 0.005 * t.step_s)
			order.push_back(r);
	std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return t.critical_s[a] > t.critical_s[b]; });
	std::string s;
	for (unsigned r : order) {
		char buf[48];
		std::snprintf(buf, sizeof buf, "%s%s %.0f%%", s.empty() ? "" : ", ", resource_name((Resource)r),
			      100 * t.critical_s[r] / t.step_s);
		s += buf;
	}
	return s.empty() ? "nothing" : s;
}

} // namespace llmcache::csd
