// SPDX-License-Identifier: MIT
// The real engine of the benchmarks: llama.cpp's CPU build, as node-llama-cpp ships it prebuilt, loading
// a GGUF model through mmap (llama.cpp's default) and decoding greedily. It prints one JSON line: the
// load, prompt and decode times, decode tokens/s, the generated token ids (so that runs with and without
// llmcache can be compared token for token), the process's major faults and the bytes it read from disk,
// its resident anonymous memory, model and code (its other file mappings), and the CPU time of the whole
// run.
// Memory-aware like any node-llama-cpp app: the context is refused when the free RAM it sees is too small.
// With LLMCACHE_DISK_STAT set to a block device's stat file (/sys/block/DEV/stat), it also prints the
// bytes that device read during the decode, whoever read them, and during its second half (late_*: once
// what the engine's start moved in its memory cgroup has settled).
// Usage: node generate.mjs MODEL.gguf [TOKENS] [THREADS] [PROMPT]
import fs from "node:fs";
import process from "node:process";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, tokensArg = "16", threadsArg = "2", prompt = "The quick brown fox jumps over the lazy dog"] =
    process.argv.slice(2);
if (!modelPath) {
    console.error("usage: node generate.mjs MODEL.gguf [TOKENS] [THREADS] [PROMPT]");
    process.exit(2);
}
const tokens = Number(tokensArg), threads = Number(threadsArg);
if (!Number.isInteger(tokens) || tokens < 1 || !Number.isInteger(threads) || threads < 1) {
    console.error(`generate.mjs: TOKENS (${tokensArg}) and THREADS (${threadsArg}) must be positive integers`);
    process.exit(2);
}

function procIo() {
    const io = Object.fromEntries(fs.readFileSync("/proc/self/io", "utf8").trim().split("\n")
        .map((l) => l.split(": ")).map(([k, v]) => [k, Number(v)]));
    const stat = fs.readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const disk = process.env.LLMCACHE_DISK_STAT;
    const sectors = disk ? Number(fs.readFileSync(disk, "utf8").trim().split(/\s+/)[2]) : 0;
    return {readBytes: io.read_bytes, majorFaults: Number(fields[9]), diskBytes: sectors * 512}; // majflt: field 12
}

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;
const t0 = process.hrtime.bigint();
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads});
const model = await llama.loadModel({modelPath, useMmap: true});
const context = await model.createContext({contextSize: 512, threads, batchSize: 512});
const sequence = context.getSequence();
const loadS = seconds(t0);

const input = model.tokenize(prompt);
const t1 = process.hrtime.bigint();
let firstS = 0, t2 = 0n, before = procIo(), half = before;
const out = [];
const halfway = 1 + Math.ceil((tokens - 1) / 2);
for await (const token of sequence.evaluate(input, {temperature: 0})) {
    out.push(token);
    if (out.length === 1) {
        firstS = seconds(t1); // the prompt, and the first token with it
        t2 = process.hrtime.bigint();
        before = procIo(); // what follows is the decode's
    }
    if (out.length === halfway)
        half = procIo();
    if (out.length >= tokens)
        break;
}
const decodeS = out.length > 1 ? seconds(t2) : 0;
const after = procIo();
const cpu = process.cpuUsage(); // the whole run's, every thread: compute, faults and the reclaim they do
const status = Object.fromEntries(fs.readFileSync("/proc/self/status", "utf8").split("\n")
    .map((l) => l.split(/:\s+/)).filter((kv) => kv.length === 2));
const kib = (k) => Number.parseInt(status[k] ?? "0", 10) * 1024;
// Resident file-backed memory split into the model and the rest (the engine's binary and libraries).
const modelReal = fs.realpathSync(modelPath);
let rssModel = 0, rssCode = 0, inModel = false, isFile = false;
for (const line of fs.readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const head = line.match(/^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/);
    if (head) {
        isFile = head[1] !== "0";
        inModel = head[2] === modelReal;
    } else if (isFile && line.startsWith("Rss:")) {
        const bytes = Number.parseInt(line.slice(4), 10) * 1024;
        if (inModel) rssModel += bytes; else rssCode += bytes;
    }
}
console.log(JSON.stringify({
    engine: `llama.cpp via node-llama-cpp ${llama.buildType === undefined ? "" : llama.buildType}`.trim(),
    load_s: loadS, prompt_tokens: input.length, prompt_s: firstS, decode_tokens: out.length - 1, decode_s: decodeS,
    tokens_per_s: decodeS > 0 ? (out.length - 1) / decodeS : 0,
    read_bytes: after.readBytes - before.readBytes, major_faults: after.majorFaults - before.majorFaults,
    disk_read_bytes: after.diskBytes - before.diskBytes,
    late_tokens: out.length >= halfway ? out.length - halfway : 0, late_disk_read_bytes: after.diskBytes - half.diskBytes,
    rss_anon: kib("RssAnon"), rss_model: rssModel, rss_code: rssCode, // at the end of the decode
    cpu_s: (cpu.user + cpu.system) / 1e6,
    tokens: out
}));
await context.dispose();
await model.dispose();
await llama.dispose();
