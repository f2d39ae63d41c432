// SPDX-License-Identifier: MIT
// A scripted llmcached client for fault injection (tests/vm/kv-fault-check.sh): it holds several
// sessions open on one daemon and takes one command per line on stdin, answering each with one line
// on stdout, so that a shell script can change the storage device under the daemon between (or
// during) commands while the sessions live on.
//
// Every token's K and V are a function of (session, layer, position), so the client knows what every
// selected row must hold and checks each one: a row that differs is reported as BAD, whatever the
// daemon's status said. Commands (S: a session name the script chooses):
//   open S            opens a session
//   append S N        appends N tokens to every layer; an error is reported, and each layer's count
//                     grows by what the daemon stored (llmcache_kv_appended: a token whose spill failed
//                     is stored, one past the session's memory limit is not)
//   select S L B      selects layer L with a budget of B tokens and checks the rows returned
//   verify S          selects every token of every layer (budget = all) and checks all of them
//   status            the daemon's session listing, on one line
//   close S
// Answers: "ok ...", "err ERRNO MESSAGE" (the daemon refused, with its reason), or "BAD ..." (wrong or
// missing data: the daemon said yes but served something else), each followed by the command's wall
// time, "[N ms]". Exit status 0 at end of input.
#include "kv/llmcache_kv.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr llmcache_kv_shape SHAPE{2, 8, 8, 128, LLMCACHE_KV_FP16, 4096, 4096, 64};
constexpr size_t ROW = (size_t)SHAPE.kv_heads * SHAPE.head_dim; // fp16 elements per row

struct Session {
	llmcache_kv *kv = nullptr;
	uint32_t seed = 0;
	std::vector<uint32_t> tokens = std::vector<uint32_t>(SHAPE.layers); // per layer
};

uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	return x ^ (x >> 16);
}

// Keys are positive fp16 values in [0.125, 0.25) (so scores are finite); values are any 16 bits.
uint16_t key_at(uint32_t seed, uint32_t layer, uint32_t pos, size_t i)
{
	return (uint16_t)(0x3000 | (mix(seed ^ mix(layer * 0x10001u + pos) ^ (uint32_t)i * 0x9e3779b9u) & 0x3ff));
}
uint16_t value_at(uint32_t seed, uint32_t layer, uint32_t pos, size_t i)
{
	return (uint16_t)mix(~seed ^ mix(layer * 0x20003u + pos) ^ (uint32_t)i * 0x85ebca6bu);
}

std::string err_line(int r, const llmcache_kv *kv)
{
	return "err " + std::to_string(r) + " " + (kv ? llmcache_kv_error(kv) : "out of memory");
}

// Checks a selection of `layer` against what was appended: "" if right, else what is wrong.
std::string check(const Session &s, uint32_t layer, const llmcache_kv_selection &sel, bool all)
{
	const uint32_t held = s.tokens[layer];
	if (sel.n > held)
		return "layer " + std::to_string(layer) + ": " + std::to_string(sel.n) + " tokens selected of " +
		       std::to_string(held);
	if (all && sel.n != held)
		return "layer " + std::to_string(layer) + ": " + std::to_string(sel.n) + " tokens returned of the " +
		       std::to_string(held) + " held (tokens lost)";
	auto k = static_cast<const uint16_t *>(sel.k), v = static_cast<const uint16_t *>(sel.v);
	for (uint32_t j = 0; j < sel.n; j++) {
		const uint32_t pos = sel.positions[j];
		if (pos >= held || (j && pos <= sel.positions[j - 1]) || (all && pos != j))
			return "layer " + std::to_string(layer) + ": position " + std::to_string(pos) + " at index " +
			       std::to_string(j) + " (positions must ascend and be below " + std::to_string(held) + ")";
		for (size_t i = 0; i < ROW; i++) {
			const uint16_t wk = key_at(s.seed, layer, pos, i), wv = value_at(s.seed, layer, pos, i);
			if (k[j * ROW + i] != wk || v[j * ROW + i] != wv) {
				char buf[160];
				std::snprintf(buf, sizeof(buf), "layer %u position %u element %zu: K %04x V %04x, appended K %04x V %04x",
					      layer, pos, i, k[j * ROW + i], v[j * ROW + i], wk, wv);
				return buf;
			}
		}
	}
	return {};
}

std::string append(Session &s, uint32_t n)
{
	std::vector<uint16_t> k(ROW * SHAPE.append_batch), v(k.size());
	int first = 0, failed = 0;
	std::string why;
	for (uint32_t done = 0; done < n;) {
		const uint32_t b = std::min(SHAPE.append_batch, n - done);
		for (uint32_t l = 0; l < SHAPE.layers; l++) {
			for (uint32_t t = 0; t < b; t++)
				for (size_t i = 0; i < ROW; i++) {
					k[t * ROW + i] = key_at(s.seed, l, s.tokens[l] + t, i);
					v[t * ROW + i] = value_at(s.seed, l, s.tokens[l] + t, i);
				}
			if (int r = llmcache_kv_append(s.kv, l, k.data(), v.data(), b)) {
				failed++;
				if (!first)
					first = r, why = llmcache_kv_error(s.kv);
			}
			s.tokens[l] += llmcache_kv_appended(s.kv);
		}
		done += b;
	}
	std::string counts;
	for (uint32_t t : s.tokens)
		counts += (counts.empty() ? "" : "/") + std::to_string(t);
	if (first)
		return "err " + std::to_string(first) + " " + why + " (" + std::to_string(failed) + " appends failed; tokens " +
		       counts + ")";
	return "ok tokens " + counts;
}

std::string select(Session &s, uint32_t layer, uint32_t budget, bool all)
{
	std::vector<float> q((size_t)SHAPE.q_heads * SHAPE.head_dim);
	for (size_t i = 0; i < q.size(); i++)
		q[i] = (float)(mix((uint32_t)i ^ s.tokens[layer] ^ layer) % 2001) / 1000.0f - 1.0f;
	llmcache_kv_selection sel{};
	if (int r = llmcache_kv_select(s.kv, layer, q.data(), budget, &sel))
		return err_line(r, s.kv);
	if (std::string bad = check(s, layer, sel, all); !bad.empty())
		return "BAD " + bad;
	return "ok " + std::to_string(sel.n) + " tokens checked";
}

std::string run(std::map<std::string, Session> &sessions, const std::string &line, const char *socket)
{
	std::istringstream in(line);
	std::string cmd, name;
	in >> cmd >> name;
	if (cmd == "status") {
		std::string buf(1 << 16, '\0');
		const int r = llmcache_kv_status(socket, buf.data(), (uint32_t)buf.size());
		if (r < 0)
			return "err " + std::to_string(r) + " " + buf.c_str();
		std::string text = buf.c_str();
		for (char &c : text)
			c = c == '\n' ? ';' : c;
		return "ok " + text;
	}
	if (cmd == "open") {
		if (sessions.count(name))
			return "err -17 session " + name + " is open already";
		Session s;
		s.seed = mix((uint32_t)std::hash<std::string>{}(name));
		if (int r = llmcache_kv_open(socket, &SHAPE, &s.kv)) {
			std::string e = err_line(r, s.kv);
			llmcache_kv_close(s.kv);
			return e;
		}
		const uint64_t id = llmcache_kv_session_id(s.kv);
		sessions[name] = s;
		return "ok session " + std::to_string(id);
	}
	auto it = sessions.find(name);
	if (it == sessions.end())
		return "err -2 usage: open S | append S N | select S LAYER BUDGET | verify S | status | close S (no session '" +
		       name + "')";
	Session &s = it->second;
	if (cmd == "append") {
		uint32_t n = 0;
		in >> n;
		return append(s, n);
	}
	if (cmd == "select") {
		uint32_t layer = 0, budget = 0;
		in >> layer >> budget;
		return select(s, layer, budget, false);
	}
	if (cmd == "verify") {
		uint32_t tokens = 0;
		for (uint32_t l = 0; l < SHAPE.layers; l++) {
			std::string r = select(s, l, s.tokens[l], true);
			if (r.compare(0, 3, "ok ") != 0)
				return r;
			tokens += s.tokens[l];
		}
		return "ok " + std::to_string(tokens) + " tokens checked";
	}
	if (cmd == "close") {
		llmcache_kv_close(s.kv);
		sessions.erase(it);
		return "ok";
	}
	return "err -22 unknown command " + cmd;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: kv_fault_client SOCKET  (commands on stdin, one per line)\n");
		return 2;
	}
	std::map<std::string, Session> sessions;
	std::string line;
	while (std::getline(std::cin, line)) {
		if (line.empty())
			continue;
		const auto t0 = std::chrono::steady_clock::now();
		std::string reply = run(sessions, line, argv[1]);
		const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
		std::printf("%s [%lld ms]\n", reply.c_str(), (long long)ms.count());
		std::fflush(stdout);
	}
	for (auto &[name, s] : sessions)
		llmcache_kv_close(s.kv);
	return 0;
}
