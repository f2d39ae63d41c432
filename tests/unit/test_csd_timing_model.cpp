// SPDX-License-Identifier: MIT
// The SmartSSD timing model (csd/timing_model.hpp) against hand-computed schedules: layer i+1's
// selection hidden behind layer i's compute when it fits and exposed when it does not, the bottleneck
// resource, streaming between stages, spills in the flash's queue, a host CPU shared with the engine,
// and monotonicity.
#include "cmocka_cpp.hpp"

#include <cmath>

#include "csd/timing_model.hpp"

using namespace llmcache::csd;

#define assert_near(a, b, eps)                                                                          \
	do {                                                                                            \
		const double a_ = (a), b_ = (b);                                                        \
		if (!(std::fabs(a_ - b_) <= (eps)))                                                     \
			fail_msg("%s = %.12g, expected %.12g", #a, a_, b_);                             \
	} while (0)

constexpr double MS = 1e-3, US = 1e-6;

// Rates that give round numbers, no latencies or overheads: each test sets what it uses.
static SmartSsdTiming round_rates()
{
	SmartSsdTiming p;
	p.flash_read_bw = 1e9;
	p.flash_write_bw = 1e9;
	p.flash_read_latency_s = 0;
	p.pcie_bw = 1e9;
	p.fpga_mac_rate = 1e9;
	p.kernel_run_overhead_s = 0;
	p.host_score_rate = 1e8;
	return p;
}

static void assert_path_adds_up(const StepTiming &t)
{
	double path = 0, critical = 0;
	for (const CriticalSegment &s : t.path)
		path += s.seconds;
	for (double c : t.critical_s)
		critical += c;
	assert_near(path, t.step_s, 1e-12);
	assert_near(critical, t.step_s, 1e-12);
}

// 4 layers; the device reads 5 MB per layer (5 ms), the engine computes 10 ms per layer. Layer 0's
// selection is exposed (0-5 ms); each later one runs during the previous layer's compute: 5 + 4 x 10.
static void predict_step__selection_fits_behind_compute__hidden_after_layer_0(void **)
{
	StepWork w;
	w.layers = 4;
	w.layer.device_flash_bytes = 5e6;
	w.layer.kernel_runs = 1;
	w.layer.compute_s = 10 * MS;
	const StepTiming t = predict_step(round_rates(), w);
	assert_near(t.step_s, 45 * MS, 1e-12);
	assert_near(t.compute_s, 40 * MS, 1e-12);
	assert_near(t.exposed_kv_s, 5 * MS, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::Engine);
	assert_near(t.critical_s[(unsigned)Resource::Engine], 40 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::Flash], 5 * MS, 1e-12);
	assert_near(t.busy_s[(unsigned)Resource::Flash], 20 * MS, 1e-12);
	assert_path_adds_up(t);
	// Without the pipeline every selection waits for the previous compute: 4 x (5 + 10).
	w.pipelined = false;
	const StepTiming serial = predict_step(round_rates(), w);
	assert_near(serial.step_s, 60 * MS, 1e-12);
	assert_near(serial.exposed_kv_s, 20 * MS, 1e-12);
	assert_path_adds_up(serial);
}

// The same with 15 ms of device reads per layer: longer than the compute it should hide behind.
// Reads back to back (0-15, 15-30, 30-45, 45-60), each compute right after its layer's read: 4 x 15 + 10.
static void predict_step__selection_longer_than_compute__exposed_and_flash_bound(void **)
{
	StepWork w;
	w.layers = 4;
	w.layer.device_flash_bytes = 15e6;
	w.layer.kernel_runs = 1;
	w.layer.compute_s = 10 * MS;
	const StepTiming t = predict_step(round_rates(), w);
	assert_near(t.step_s, 70 * MS, 1e-12);
	assert_near(t.exposed_kv_s, 30 * MS, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::Flash);
	assert_near(t.critical_s[(unsigned)Resource::Flash], 60 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::Engine], 10 * MS, 1e-12);
	assert_path_adds_up(t);
	w.pipelined = false;
	assert_near(predict_step(round_rates(), w).step_s, 100 * MS, 1e-12);
}

// `none`: 100 MB of K slabs in 100 reads. Flash at 4 GB/s (25 ms) streams into a 2 GB/s link (50 ms)
// which streams into host scoring of 1M tokens at 1e8/s (10 ms). Link: starts after the first slab
// (0.25 ms), ends at 50.25; scoring starts after the first slab crossed (0.75), ends one slab after the
// link (50.35). The link is the bottleneck.
static void predict_step__host_reads_k_back__link_bound_stream(void **)
{
	SmartSsdTiming p = round_rates();
	p.flash_read_bw = 4e9;
	p.pcie_bw = 2e9;
	StepWork w;
	w.layer.host_read_bytes = 100e6;
	w.layer.host_reads = 100;
	w.layer.host_read_tokens = 1e6;
	const StepTiming t = predict_step(p, w);
	assert_near(t.step_s, 50.35 * MS, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::PcieUp);
	assert_near(t.critical_s[(unsigned)Resource::PcieUp], 50 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::Flash], 0.25 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::HostCpu], 0.1 * MS, 1e-12);
	assert_near(t.busy_s[(unsigned)Resource::HostCpu], 10 * MS, 1e-12);
	assert_path_adds_up(t);
}

// In storage: 10 MB in 10 kernel runs (flash 10 ms), 1e8 MAC at 5e9/s plus 10 runs x 0.1 ms (21 ms of
// FPGA), 8 MB of Score Blocks at 8 GB/s (1 ms). FPGA: from the first slab (1 ms) to 22 ms; Score
// Blocks: one run's worth after it, 22.1 ms. The FPGA is the bottleneck.
static void predict_step__in_storage_scoring__fpga_bound_stream(void **)
{
	SmartSsdTiming p = round_rates();
	p.fpga_mac_rate = 5e9;
	p.kernel_run_overhead_s = 0.1 * MS;
	p.pcie_bw = 8e9;
	StepWork w;
	w.layer.device_flash_bytes = 10e6;
	w.layer.kernel_runs = 10;
	w.layer.device_tokens = 1e6;
	w.layer.macs_per_token = 100;
	w.layer.score_bytes = 8e6;
	const StepTiming t = predict_step(p, w);
	assert_near(t.step_s, 22.1 * MS, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::Fpga);
	assert_near(t.critical_s[(unsigned)Resource::Fpga], 21 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::Flash], 1 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::PcieUp], 0.1 * MS, 1e-12);
	assert_path_adds_up(t);
}

// The published defaults on one page of LLaMA-2-7B keys (32 tokens x 4096 dims, a 299008-byte slab):
// query 16384 B / 3.6 GB/s = 4.5511 us; flash 85 us + 299008 B / 4 GB/s = 159.752 us; kernel
// 131072 MAC / 9.6 G/s + 50 us = 63.6533 us; 256 B of Score Blocks 0.0711 us. Then a 16 KiB row
// fetch: 85 us + 4.096 us of flash, 4.5511 us of link.
static void predict_step__published_defaults__one_page_hand_computed(void **)
{
	SmartSsdTiming p;
	p.host_score_rate = 1e8;
	StepWork w;
	w.layer.query_bytes = 16384;
	w.layer.device_flash_bytes = 299008;
	w.layer.device_tokens = 32;
	w.layer.macs_per_token = 4096;
	w.layer.kernel_runs = 1;
	w.layer.score_bytes = 256;
	w.layer.fetch_bytes = 16384;
	w.layer.fetch_reads = 1;
	const double scored = 16384 / 3.6e9 + 85 * US + 299008 / 4e9 + 131072 / 9.6e9 + 50 * US + 256 / 3.6e9;
	const StepTiming t = predict_step(p, w);
	assert_near(t.step_s, scored + 85 * US + 16384 / 4e9 + 16384 / 3.6e9, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::Flash);
	assert_path_adds_up(t);
}

// Spills (8 MB per layer after its selection) cross the link (8 ms) and are written (8 ms) in the
// flash's queue, before layer 1's reads: layer 0 reads 0-5, spills 5-13 then 13-21, layer 1 reads
// 21-26 and spills 26-34 then 34-42. Layer 1's compute (26-36) ends before its spill is written.
static void predict_step__spills__share_the_flash_with_the_next_layers_reads(void **)
{
	StepWork w;
	w.layers = 2;
	w.layer.device_flash_bytes = 5e6;
	w.layer.kernel_runs = 1;
	w.layer.spill_bytes = 8e6;
	w.layer.compute_s = 10 * MS;
	const StepTiming t = predict_step(round_rates(), w);
	assert_near(t.step_s, 42 * MS, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::Flash);
	assert_near(t.critical_s[(unsigned)Resource::Flash], 26 * MS, 1e-12);
	assert_near(t.critical_s[(unsigned)Resource::PcieDown], 16 * MS, 1e-12);
	assert_path_adds_up(t);
	w.layer.spill_bytes = 0;
	assert_near(predict_step(round_rates(), w).step_s, 25 * MS, 1e-12);
}

// Host scoring of 5 ms per layer and 10 ms of compute, 2 layers. On a processor of its own the engine
// computes while the host scores layer 1 (5 + 2 x 10); on the host CPU the two take turns (5 + 10 + 5
// + 10).
static void predict_step__engine_on_host_cpu__no_overlap_with_host_scoring(void **)
{
	SmartSsdTiming p = round_rates();
	StepWork w;
	w.layers = 2;
	w.layer.host_pool_tokens = 5e5;
	w.layer.compute_s = 10 * MS;
	assert_near(predict_step(p, w).step_s, 25 * MS, 1e-12);
	p.engine_shares_host_cpu = true;
	const StepTiming t = predict_step(p, w);
	assert_near(t.step_s, 30 * MS, 1e-12);
	assert_int_equal((int)t.bottleneck, (int)Resource::HostCpu);
	assert_near(t.critical_s[(unsigned)Resource::HostCpu], 30 * MS, 1e-12);
	assert_path_adds_up(t);
}

static void predict_step__no_work__no_time(void **)
{
	const StepTiming t = predict_step(SmartSsdTiming{}, StepWork{});
	assert_near(t.step_s, 0, 0);
	assert_true(t.path.empty());
	assert_string_equal(critical_summary(t).c_str(), "nothing");
}

// More work of any kind, or a slower resource, never makes the step faster (200 random cases, each
// quantity and each rate scaled by 1.5 in turn); the pipeline never makes it slower.
static void predict_step__more_work_or_slower_rates__never_faster(void **)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	auto rnd = [&](double lo, double hi) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		return lo + (hi - lo) * (double)(x % 1000000) / 1e6;
	};
	for (int c = 0; c < 200; c++) {
		SmartSsdTiming p;
		p.flash_read_bw = rnd(1e9, 5e9), p.flash_write_bw = rnd(0.5e9, 2e9), p.pcie_bw = rnd(1e9, 4e9);
		p.flash_read_latency_s = rnd(0, 100 * US), p.fpga_mac_rate = rnd(1e9, 2e10);
		p.kernel_run_overhead_s = rnd(0, 100 * US), p.host_score_rate = rnd(1e6, 1e9);
		p.engine_shares_host_cpu = c % 3 == 0;
		StepWork w;
		w.layers = 1 + c % 5;
		w.pipelined = c % 4 != 0;
		LayerWork &l = w.layer;
		double *work[] = {&l.query_bytes, &l.device_flash_bytes, &l.device_tokens, &l.macs_per_token,
				  &l.score_bytes, &l.host_pool_tokens, &l.host_read_bytes, &l.host_read_tokens,
				  &l.fetch_bytes, &l.spill_bytes, &l.compute_s};
		for (double *q : work)
			*q = rnd(0, 1) < 0.2 ? 0 : rnd(0, 1e7);
		l.compute_s = rnd(0, 0.05);
		l.kernel_runs = (double)(1 + c % 40), l.host_reads = (double)(c % 30), l.fetch_reads = (double)(c % 20);
		const double base = predict_step(p, w).step_s;
		for (double *q : work) {
			const double keep = *q;
			*q = keep * 1.5 + 1;
			const double more = predict_step(p, w).step_s;
			if (more < base - 1e-15)
				fail_msg("case %d: more work (%.6g -> %.6g) made the step faster: %.9g < %.9g", c, keep, *q, more, base);
			*q = keep;
		}
		double *rates[] = {&p.flash_read_bw, &p.flash_write_bw, &p.pcie_bw, &p.fpga_mac_rate, &p.host_score_rate};
		for (double *r : rates) {
			const double keep = *r;
			*r = keep / 1.5;
			if (predict_step(p, w).step_s < base - 1e-15)
				fail_msg("case %d: a slower rate (%.6g -> %.6g) made the step faster", c, keep, *r);
			*r = keep;
		}
		for (double *d : {&p.flash_read_latency_s, &p.kernel_run_overhead_s}) {
			const double keep = *d;
			*d = keep * 1.5 + US;
			if (predict_step(p, w).step_s < base - 1e-15)
				fail_msg("case %d: a longer latency (%.6g -> %.6g) made the step faster", c, keep, *d);
			*d = keep;
		}
		w.layers++;
		assert_true(predict_step(p, w).step_s >= base);
		w.layers--;
		const bool was = w.pipelined;
		w.pipelined = true;
		const double piped = predict_step(p, w).step_s;
		w.pipelined = false;
		assert_true(piped <= predict_step(p, w).step_s + 1e-15);
		w.pipelined = was;
	}
}

// The GPU engine: the longer of its bytes at the memory bandwidth and its FLOPs at the FP16 rate. Round
// rates (1 GB/s, 1 TFLOP/s): 1 MB of weights and 1 MB of KV take 2 ms; 1 GFLOP 1 ms (memory-bound),
// 5 GFLOP 5 ms (compute-bound). The RTX 4090's peaks on one LLaMA-2-7B layer at batch 1 and a 10%
// budget of 32K tokens (202375168 fp16 weights; 3276 selected rows of K and V, 8192 B each): 404750336
// + 53673984 B at 1008 GB/s = 454.786 us, against 2 x (202375168 + 3276 x 8192) FLOPs at 82.6 T/s = 5.5
// us: memory-bound.
static void gpu_layer_compute__longer_of_bytes_and_flops(void **)
{
	const GpuEngine round{1e9, 1e12};
	assert_near(gpu_layer_compute_s(round, 1e6, 1e6, 1e9), 2 * MS, 1e-15);
	assert_near(gpu_layer_compute_s(round, 1e6, 1e6, 5e9), 5 * MS, 1e-15);
	assert_near(gpu_layer_compute_s(round, 0, 0, 0), 0, 0);
	const double weights = 202375168, rows = 3276;
	const double bytes = 2 * weights + rows * 2 * 8192, flops = 2 * (weights + rows * 8192);
	assert_near(gpu_layer_compute_s(GpuEngine{}, bytes, 0, flops), 458424320 / 1008e9, 1e-15);
	assert_near(gpu_layer_compute_s(GpuEngine{}, 2 * weights, rows * 2 * 8192, flops), 454.786 * US, 0.001 * US);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(predict_step__selection_fits_behind_compute__hidden_after_layer_0),
		cmocka_unit_test(predict_step__selection_longer_than_compute__exposed_and_flash_bound),
		cmocka_unit_test(predict_step__host_reads_k_back__link_bound_stream),
		cmocka_unit_test(predict_step__in_storage_scoring__fpga_bound_stream),
		cmocka_unit_test(predict_step__published_defaults__one_page_hand_computed),
		cmocka_unit_test(predict_step__spills__share_the_flash_with_the_next_layers_reads),
		cmocka_unit_test(predict_step__engine_on_host_cpu__no_overlap_with_host_scoring),
		cmocka_unit_test(predict_step__no_work__no_time),
		cmocka_unit_test(predict_step__more_work_or_slower_rates__never_faster),
		cmocka_unit_test(gpu_layer_compute__longer_of_bytes_and_flops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
