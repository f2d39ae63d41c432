// SPDX-License-Identifier: MIT
/*
 * A timing model of one decode step of the KV service on a Samsung SmartSSD: what a card would do with
 * the work the emulated backend measured. No SmartSSD was run to make or check it.
 *
 * The step is a discrete-event schedule of tasks on six resources, each serving one task at a time in
 * the order the tasks are issued (layer by layer):
 *   host CPU       scores the CPU pool (and, with the `none` backend, the K slabs it reads back) at the
 *                  rate measured on this host in the same run, merging Score Blocks as they arrive;
 *   flash          the SSD behind the FPGA's PCIe switch: the device's own reads of K slabs, the fetch of
 *                  the selected rows, the host's reads of K slabs (`none`), and spills;
 *   FPGA           the scoring kernel: multiply-accumulates at its compute rate plus a fixed overhead per
 *                  kernel run (the xrt backend starts one run per page and waits for it);
 *   PCIe up/down   the drive's one host link, each direction on its own (full duplex): Score Blocks,
 *                  fetched rows and read-back K slabs up; queries and spills down;
 *   engine         the model's per-layer compute (measured on this host, passed in), on a processor of
 *                  its own or, when engine_shares_host_cpu, on the host CPU.
 * Per layer i: the query goes down; with bounds-first selection the device first reads the pages' bounds
 * blocks and scores them (a stage that must end before the page choice, so before any key is read); the
 * device reads its K slabs (or the chosen pages' key blocks) from flash, scores them and sends the
 * Score Blocks up, streamed (each stage starts on the previous stage's first chunk, a kernel run or a
 * slab, and ends no earlier than one chunk after it: HillInfer's Score Blocks, Sec. 3.2, HIE); the host
 * scores its pool meanwhile; once all scores are in, the selected rows are read from flash and sent up
 * (streamed likewise, after one flash access latency); then the engine computes layer i. Layer i+1's
 * query, scoring and fetch start once layer i's selection is done and layer i-1's compute (whose output
 * is layer i+1's speculated input, as in InfiniGen) has finished: they overlap layer i's compute, one
 * layer ahead, as HillInfer's pipeline does (Sec. 3.3). Without `pipelined`, each layer's selection waits
 * for the previous layer's compute. Spills (the pool update after a selection) follow the layer's fetch
 * and delay only the link and the flash, where they take their time at the write rate in the same queue
 * as the reads.
 *
 * Since every resource keeps the issue order, every start and end is a maximum of sums of durations:
 * the predicted time never decreases when any work grows or any rate falls (no list-scheduling
 * anomaly). The critical path is traced back from the last task through whatever bound each task's
 * start or end (a dependency, a stream's source, or the resource's previous task); the resource with
 * the most time on it is the bottleneck.
 *
 * Parameters (defaults; Documentation/kv.md, "A SmartSSD timing model", says more):
 *   flash_read_bw 4.0 GB/s       HillInfer Sec. 4.2 (seeds/000): the SmartSSD "providing a peak
 *                                bandwidth of approximately 4 GB/s"; the emulated backend's pacing.
 *                                Xilinx's Vitis_Accel_Examples host/p2p_bandwidth log on the SmartSSD's
 *                                platform (xilinx_u2_gen3x4_xdma_gc) measured P2P reads SSD -> FPGA of
 *                                2.36 GB/s with 128 MB buffers, 1.55 GB/s with 256 KB ones.
 *   flash_write_bw 1.04 GB/s     the same log: P2P writes FPGA -> SSD with 32-128 MB buffers.
 *   flash_read_latency 85 us     Samsung PM983 datasheet (Rev. 1.0, 2018; the Gen3 enterprise U.2 drive
 *                                of the SmartSSD's class and capacity): random read latency, typical.
 *   pcie_bw 3.6 GB/s each way    PCIe Gen3 x4 (AnandTech 16245, "a PCIe Gen3 enterprise SSD"; the U2
 *                                platform is gen3x4): 8 GT/s x 4 lanes x 128/130 = 3.94 GB/s line rate,
 *                                times 256/280 for 256-byte TLP payloads with 24 bytes of framing.
 *   fpga_mac_rate 9.6 G MAC/s    an assumption (not published): 32 lanes, one 512-bit AXI beat of
 *                                fp16 keys per cycle, at a 300 MHz kernel clock on the Kintex
 *                                UltraScale+ KU15P; the emulated backend's pacing.
 *   kernel_run_overhead 50 us    XRT issue #8687 (50-100 us to launch a kernel on an Alveo U55C) and
 *                                #6601 (16-56 us for run + start on a U25).
 * The engine's compute per layer is an input: measured on this host (its CPU standing in for the
 * engine's processor), or predicted by gpu_layer_compute_s for HillInfer's GPU (an RTX 4090, Sec. 4.2):
 * a decode step's matrix-vector products and attention read every weight and every selected K and V
 * row once and do two FLOPs per weight and row element and sequence, so the layer takes the longer of
 * its bytes at the GPU's memory bandwidth and its FLOPs at the GPU's FP16 rate:
 *   memory_bw 1008 GB/s          GeForce RTX 4090: 384-bit GDDR6X at 21 Gbps (NVIDIA's specifications).
 *   fp16_flops 82.6 T/s          its FP16 rate without tensor cores (16384 CUDA cores at 2.52 GHz boost,
 *                                2 FLOPs each per cycle); the tensor cores' 165 T/s would only be faster.
 * Both are peaks: a real kernel reaches less of them, which only makes the KV path's share smaller.
 * Not modelled: queueing inside the SSD (its channels, the FTL, garbage collection), DRAM on the card,
 * the host's memory bandwidth shared between scoring and the engine, several links sharing one root
 * port, the CPU time of issuing I/O, and the promotion of pages back to memory beyond their bytes.
 */
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmcache::csd {

enum class Resource : unsigned { HostCpu, Flash, Fpga, PcieUp, PcieDown, Engine, Count };
inline constexpr unsigned RESOURCES = (unsigned)Resource::Count;
const char *resource_name(Resource r);

struct SmartSsdTiming {
	double flash_read_bw = 4.0e9;	     // bytes/s, flash to FPGA or to the host link
	double flash_write_bw = 1.04e9;	     // bytes/s
	double flash_read_latency_s = 85e-6; // before the first byte of a read stream
	double pcie_bw = 3.6e9;		     // bytes/s, each direction of the host link
	double fpga_mac_rate = 9.6e9;	     // multiply-accumulates/s of the scoring kernel
	double kernel_run_overhead_s = 50e-6;
	// Measured on the host in the same run and passed in:
	double host_score_rate = 0; // tokens/s of the host's scoring path (kernel + merge)
	bool engine_shares_host_cpu = false;
};

// One layer of one decode step, for the whole batch. Every layer of the step does the same work.
struct LayerWork {
	double query_bytes = 0;		  // host -> device, per layer
	double device_flash_bytes = 0;	  // K slabs the device reads to score them
	double device_tokens = 0;	  // tokens the device scores ...
	double macs_per_token = 0;	  // ... at this many multiply-accumulates each
	double kernel_runs = 0;		  // device kernel runs (one per page scored)
	// Bounds-first device selection (select_bounds_first.hpp): a first stage reads the pages' bounds
	// blocks and scores them by bound; the K read above (the chosen pages' key blocks) waits for it.
	double bound_flash_bytes = 0; // bounds blocks the device reads
	double bound_macs = 0;	      // multiply-accumulates of the bounds (2 x dims per page)
	double bound_pages = 0;	      // pages scored by bound (chunks of that stream)
	double bound_runs = 0;	      // kernel runs of the first stage
	double score_bytes = 0;		  // Score Blocks device -> host
	double host_pool_tokens = 0;	  // tokens the host scores in its pool
	double host_read_bytes = 0;	  // K slabs read back to the host to be scored there (`none`)
	double host_read_tokens = 0;	  // the tokens in them
	double host_reads = 0;		  // the slabs read back (chunks of that stream)
	double fetch_bytes = 0;		  // selected rows (and pages coming back to memory) flash -> host
	double fetch_reads = 0;		  // reads of the fetch (chunks of that stream)
	double spill_bytes = 0;		  // host -> flash
	double compute_s = 0;		  // the engine's compute of the layer
};

struct StepWork {
	LayerWork layer;
	uint32_t layers = 1;
	bool pipelined = true; // layer i+1's selection overlaps layer i's compute
};

struct CriticalSegment {
	Resource resource;
	uint32_t layer;
	const char *what;
	double seconds; // of the step time, on this task
};

struct StepTiming {
	double step_s = 0;		   // predicted time of the decode step
	double busy_s[RESOURCES] = {};	   // work per resource over the step
	double critical_s[RESOURCES] = {}; // per resource, time on the critical path
	Resource bottleneck = Resource::Engine;
	double compute_s = 0;	  // the engine's compute over the step
	double exposed_kv_s = 0;  // step time the engine does not compute: KV work not hidden by it
	std::vector<CriticalSegment> path; // first to last
};

// HillInfer's GPU (Sec. 4.2), at its published peaks.
struct GpuEngine {
	double memory_bw = 1008e9;  // bytes/s
	double fp16_flops = 82.6e12; // FLOP/s
};

// One layer's compute on the GPU: weight_bytes read once for the batch, kv_bytes (every sequence's
// selected K and V rows) once, flops in all; memory- or compute-bound, whichever is longer.
double gpu_layer_compute_s(const GpuEngine &g, double weight_bytes, double kv_bytes, double flops);

// Predicts one decode step. Zero work takes no time; rates must be positive where their work is not
// zero (a zero rate with work makes the time infinite).
StepTiming predict_step(const SmartSsdTiming &p, const StepWork &w);

// "flash 61%, engine 30%, ...": the critical path's share per resource, largest first.
std::string critical_summary(const StepTiming &t);

} // namespace llmcache::csd
