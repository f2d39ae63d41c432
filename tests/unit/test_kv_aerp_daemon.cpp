// SPDX-License-Identifier: MIT
// Kelle's AERP through llmcached and the C API (llmcache_kv_open_aerp, llmcache_kv_append_x,
// llmcache_kv_selection_heads): W_K and W_V travel in the session's shared memory, evicted tokens stop
// coming back, and every row a head keeps comes back as appended, recomputed ones bit for bit (fp32);
// and bad client input (a budget below sink + recent, no weights, x for a session that does not
// recompute, budget 0, d_model out of range) gets a clear error, not a crash.
// With --kv-trace, an AERP session's KV trace (FILE.SESSION), with and without the compressed memory,
// replays through KvAerpModel with every recorded decision reproduced: its selections are what the
// client's selects returned, its evicted pairs the ones the keep masks lost, and its counts those the
// daemon listed for the session.
#include "cmocka_cpp.hpp"
#include "kv_test_daemon.hpp"

#include "kv/kv_replay.hpp"
#include "kv/llmcache_kv.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace llmcache::kv;

namespace {

// A second llmcached, as the shared one (kv_test_daemon.hpp) plus --kv-trace DIR/kv.trace.
struct Traced {
	std::string dir;
	pid_t pid = -1;
	std::string sock() const { return dir + "/sock"; }
	std::string trace() const { return dir + "/kv.trace"; }
};
Traced traced;

int start_traced()
{
	char self[4096];
	const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const std::string p(self, n > 0 ? (size_t)n : 0);
	const std::string bin = p.substr(0, p.rfind('/')) + "/../bin/llmcached";
	std::string tmpl = "/var/tmp/llmcached-aerp-trace-XXXXXX";
	if (!mkdtemp(tmpl.data()) || access(bin.c_str(), X_OK) != 0)
		return -1;
	traced.dir = tmpl;
	traced.pid = fork();
	if (traced.pid == 0) {
		const int fd = open((traced.dir + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 2);
		execl(bin.c_str(), bin.c_str(), "--socket", traced.sock().c_str(), "--kv-sink-tokens", "1",
		      "--kv-recent-tokens", "2", "--kv-trace", traced.trace().c_str(), (char *)nullptr);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct stat st;
		if (stat(traced.sock().c_str(), &st) == 0)
			return 0;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	return -1;
}

int setup(void **) { return kv_test_daemon::start("aerp") || start_traced() ? -1 : 0; }
int teardown(void **)
{
	if (traced.pid > 0 && kill(traced.pid, SIGTERM) == 0)
		waitpid(traced.pid, nullptr, 0);
	if (!traced.dir.empty())
		std::system(("rm -rf " + traced.dir).c_str());
	return kv_test_daemon::stop();
}

// One layer, 2 query and 2 KV heads of dimension 4, fp32; d_model 4 (x is smaller than the K and V of
// both heads, 16 elements): tokens every head keeps are stored as x.
const llmcache_kv_shape shape{1, 2, 2, 4, LLMCACHE_KV_FP32, 64, 16, 4};
constexpr uint32_t DM = 4, DIMS = 8;

void aerp_daemon__append_x_select__kept_rows_as_appended(void **)
{
	std::mt19937 rng(3);
	std::uniform_real_distribution<float> U(-1, 1);
	std::vector<float> wk(DM * DIMS), wv(DM * DIMS);
	for (float &w : wk)
		w = U(rng);
	for (float &w : wv)
		w = U(rng);
	const llmcache_kv_aerp aerp{4, DM, wk.data(), wv.data()};
	llmcache_kv *kv;
	const int r = llmcache_kv_open_aerp((kv_test_daemon::dir + "/sock").c_str(), &shape, &aerp, &kv);
	if (r)
		fail_msg("open: %s", llmcache_kv_error(kv));
	const uint32_t T = 12;
	std::vector<float> K(T * DIMS), V(T * DIMS), X(T * DM);
	std::vector<float> q(2 * 4);
	for (float &f : q)
		f = U(rng);
	llmcache_kv_selection sel;
	for (uint32_t t = 0; t < T; t++) {
		for (uint32_t i = 0; i < DM; i++)
			X[t * DM + i] = U(rng);
		for (uint32_t j = 0; j < DIMS; j++) { // the documented arithmetic: fp32, index ascending
			float ak = 0, av = 0;
			for (uint32_t i = 0; i < DM; i++) {
				const float pk = X[t * DM + i] * wk[i * DIMS + j], pv = X[t * DM + i] * wv[i * DIMS + j];
				ak = ak + pk;
				av = av + pv;
			}
			K[t * DIMS + j] = ak;
			V[t * DIMS + j] = av;
		}
		assert_int_equal(llmcache_kv_append_x(kv, 0, &K[t * DIMS], &V[t * DIMS], &X[t * DM], 1), 0);
		assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 16, &sel), 0);
	}
	const uint8_t *heads = llmcache_kv_selection_heads(kv);
	assert_non_null(heads);
	// Each head keeps 4 of the 12 tokens; the union is at most 1 sink + 2 recent + 2 x 1 others.
	assert_in_range(sel.n, 4, 5);
	assert_int_equal(sel.positions[0], 0);
	assert_int_equal(sel.positions[sel.n - 1], T - 1);
	assert_int_equal(sel.positions[sel.n - 2], T - 2);
	const std::vector<float> zero(4, 0.0f);
	for (uint32_t j = 0; j < sel.n; j++) {
		const uint32_t t = sel.positions[j];
		assert_true(heads[j * 2] || heads[j * 2 + 1]);
		for (uint32_t h = 0; h < 2; h++) {
			const float *gk = (const float *)sel.k + j * DIMS + h * 4, *gv = (const float *)sel.v + j * DIMS + h * 4;
			const bool as_appended = !memcmp(gk, &K[t * DIMS + h * 4], 16) && !memcmp(gv, &V[t * DIMS + h * 4], 16);
			if (heads[j * 2 + h]) {
				assert_true(as_appended);
				continue;
			}
			// A head that dropped the token: zero rows if it was stored as K and V, whole recomputed ones
			// if it was stored as x.
			assert_true(as_appended || (!memcmp(gk, zero.data(), 16) && !memcmp(gv, zero.data(), 16)));
		}
	}
	// The daemon's listing shows the session's AERP counters.
	char listing[4096];
	assert_true(llmcache_kv_status((kv_test_daemon::dir + "/sock").c_str(), listing, sizeof(listing)) > 0);
	const char *at = strstr(listing, " aerp_tokens ");
	assert_non_null(at);
	assert_int_equal(std::atoi(at + strlen(" aerp_tokens ")), sel.n);
	assert_non_null(strstr(listing, " aerp_x_tokens "));
	llmcache_kv_close(kv);
}

void aerp_daemon__bad_input__clear_error(void **)
{
	const std::string sock = kv_test_daemon::dir + "/sock";
	std::vector<float> w(DM * DIMS, 0.5f);
	llmcache_kv *kv;
	auto refused = [&](const llmcache_kv_aerp &a, const char *says) {
		assert_int_equal(llmcache_kv_open_aerp(sock.c_str(), &shape, &a, &kv), -EINVAL);
		if (!strstr(llmcache_kv_error(kv), says))
			fail_msg("error '%s' does not say '%s'", llmcache_kv_error(kv), says);
		llmcache_kv_close(kv);
	};
	refused({2, DM, w.data(), w.data()}, "always kept, at least 3 tokens");
	refused({4, DM, w.data(), nullptr}, "needs W_K and W_V");
	refused({0, 0, nullptr, nullptr}, "budget 0");
	std::vector<float> big(((1u << 16) + 1) * DIMS);
	refused({4, (1u << 16) + 1, big.data(), big.data()}, "d_model");
	assert_int_equal(llmcache_kv_open_aerp(sock.c_str(), &shape, nullptr, &kv), -EINVAL);
	// x for a session that does not recompute, AERP or not.
	const llmcache_kv_aerp no_x{4, 0, nullptr, nullptr};
	assert_int_equal(llmcache_kv_open_aerp(sock.c_str(), &shape, &no_x, &kv), 0);
	std::vector<float> row(DIMS, 1.0f);
	assert_int_equal(llmcache_kv_append_x(kv, 0, row.data(), row.data(), row.data(), 1), -EINVAL);
	assert_non_null(strstr(llmcache_kv_error(kv), "does not recompute"));
	assert_int_equal(llmcache_kv_append(kv, 0, row.data(), row.data(), 1), 0);
	llmcache_kv_close(kv);
	assert_int_equal(llmcache_kv_open(sock.c_str(), &shape, &kv), 0);
	assert_null(llmcache_kv_selection_heads(kv));
	assert_int_equal(llmcache_kv_append_x(kv, 0, row.data(), row.data(), row.data(), 1), -EINVAL);
	llmcache_kv_close(kv);
}

// The value after `field` in the daemon's listing of a session.
uint64_t listed(const std::string &listing, const char *field)
{
	const char *at = strstr(listing.c_str(), field);
	if (!at)
		fail_msg("the listing has no '%s': %s", field, listing.c_str());
	return strtoull(at + strlen(field), nullptr, 10);
}

// An AERP session (d_model 4: recomputation) on the traced daemon: 2 layers of 4 query heads over 2 KV
// heads x 4, fp32, budget 4 (sink 1, recent 2), 30 steps each appending a token to every layer (with x,
// but one in 5 without) and selecting all retained tokens of each layer (every other step through
// select_begin/select_end); every third step also a select of 3 tokens. Closed, its trace replays with
// --check's comparison: no difference; the client's selections and the pairs its keep masks lost are the
// replay's; the replay's counts are the daemon's listing of the session before it closed.
void traced_session(bool memory)
{
	constexpr uint32_t L = 2, QH = 4, H = 2, D = 4, T = 30, BUDGET = 4, THRESHOLD = 10;
	static_assert(H * D == DIMS);
	const llmcache_kv_shape shp{L, QH, H, D, LLMCACHE_KV_FP32, 64, 16, 4};
	std::mt19937 rng(memory ? 17 : 5);
	std::uniform_real_distribution<float> U(-1, 1);
	std::vector<float> wk(L * DM * DIMS), wv(L * DM * DIMS);
	for (float &w : wk)
		w = U(rng);
	for (float &w : wv)
		w = U(rng);
	const llmcache_kv_aerp aerp{BUDGET, DM, wk.data(), wv.data()};
	const llmcache_kv_memory mem{THRESHOLD};
	llmcache_kv *kv;
	if (memory ? llmcache_kv_open_memory(traced.sock().c_str(), &shp, &aerp, &mem, &kv)
		   : llmcache_kv_open_aerp(traced.sock().c_str(), &shp, &aerp, &kv))
		fail_msg("open: %s", llmcache_kv_error(kv));
	const uint64_t id = llmcache_kv_session_id(kv);
	assert_true(id >= 1);
	std::vector<float> k(DIMS), v(DIMS), x(DM), q(QH * D);
	std::vector<std::vector<uint32_t>> selections; // every select's positions, in order
	std::vector<std::map<uint32_t, std::vector<uint8_t>>> prev(L); // [layer]: the last full select's masks
	std::vector<std::set<std::pair<uint32_t, uint32_t>>> lost(L);  // [layer]: (token, head) pairs evicted
	uint64_t pairs = 0;
	auto select = [&](uint32_t l, uint32_t budget, bool split) {
		for (float &f : q)
			f = U(rng);
		llmcache_kv_selection sel;
		if (split) {
			assert_int_equal(llmcache_kv_select_begin(kv, l, q.data(), budget), 0);
			assert_int_equal(llmcache_kv_select_end(kv, &sel), 0);
		} else if (llmcache_kv_select(kv, l, q.data(), budget, &sel)) {
			fail_msg("select: %s", llmcache_kv_error(kv));
		}
		selections.emplace_back(sel.positions, sel.positions + sel.n);
		if (budget < 16)
			return;
		const uint8_t *heads = llmcache_kv_selection_heads(kv);
		assert_non_null(heads);
		std::map<uint32_t, std::vector<uint8_t>> cur;
		for (uint32_t j = 0; j < sel.n; j++)
			cur[sel.positions[j]].assign(heads + j * H, heads + (j + 1) * H);
		for (const auto &[p, mask] : prev[l])
			for (uint32_t h = 0; h < H; h++) {
				const auto it = cur.find(p);
				if (mask[h] && (it == cur.end() || !it->second[h])) {
					assert_true(lost[l].insert({p, h}).second);
					pairs++;
				}
			}
		prev[l].swap(cur);
	};
	for (uint32_t t = 0; t < T; t++) {
		for (uint32_t l = 0; l < L; l++) {
			for (float &f : k)
				f = 2 * U(rng);
			for (float &f : v)
				f = U(rng);
			for (float &f : x)
				f = U(rng);
			const int r = t % 5 == 2 ? llmcache_kv_append(kv, l, k.data(), v.data(), 1)
						 : llmcache_kv_append_x(kv, l, k.data(), v.data(), x.data(), 1);
			if (r)
				fail_msg("append: %s", llmcache_kv_error(kv));
		}
		for (uint32_t l = 0; l < L; l++) {
			select(l, 16, t % 2);
			if (t % 3 == 0)
				select(l, 3, false);
		}
	}
	assert_int_equal(pairs, L * H * (T - BUDGET)); // each head keeps its budget: one pair per append after
	char buf[4096];
	assert_true(llmcache_kv_status(traced.sock().c_str(), buf, sizeof(buf)) > 0);
	const std::string listing = buf;
	assert_non_null(strstr(listing.c_str(), ("session " + std::to_string(id) + " ").c_str()));
	llmcache_kv_close(kv); // the worker closes the store, and with it the trace, before CLOSE answers

	const std::string path = traced.trace() + "." + std::to_string(id);
	std::ifstream file(path, std::ios::binary);
	if (!file)
		fail_msg("no KV trace %s", path.c_str());
	std::ostringstream ss;
	ss << file.rdbuf();
	const std::string trace = ss.str();
	// The policy line carries the AERP fields, and the header reads back with them.
	const size_t pol = trace.find("\npolicy ");
	assert_true(pol != std::string::npos);
	const std::string policy_line = trace.substr(pol + 1, trace.find('\n', pol + 1) - pol - 1);
	const std::string aerp_fields = " aerp_budget=4 d_model=4" + std::string(memory ? " memory=1 route_threshold=10" : "");
	if (policy_line.size() < aerp_fields.size() ||
	    policy_line.compare(policy_line.size() - aerp_fields.size(), aerp_fields.size(), aerp_fields))
		fail_msg("policy line '%s' does not end with '%s'", policy_line.c_str(), aerp_fields.c_str());
	{
		std::istringstream in(trace);
		KvTraceReader rd(in);
		KvTraceHeader h;
		std::string err;
		if (rd.open(h, err))
			fail_msg("trace header: %s", err.c_str());
		assert_int_equal(h.layers, L);
		assert_int_equal(h.kv_heads, H);
		assert_int_equal(h.sink_tokens, 1);
		assert_int_equal(h.recent_tokens, 2);
		assert_false(h.device);
		assert_int_equal(h.aerp_budget, BUDGET);
		assert_int_equal(h.d_model, DM);
		assert_int_equal(h.memory, memory);
		assert_int_equal(h.route_threshold, memory ? THRESHOLD : 0);
	}
	// The replay with the check: every recorded decision made again.
	std::istringstream in(trace);
	KvReplayResult r;
	std::string err;
	if (replay_kv_trace(in, {}, true, true, r, err))
		fail_msg("replay: %s", err.c_str());
	if (!r.divergence.empty())
		fail_msg("%s", r.divergence.c_str());
	assert_true(r.recorded_decisions > 0);
	size_t i = 0;
	std::vector<std::set<std::pair<uint32_t, uint32_t>>> evicted(L);
	for (const KvTraceEvent &e : r.decisions) {
		if (e.kind == KvTraceEvent::Selected) {
			assert_true(i < selections.size());
			assert_true(e.items == selections[i++]);
		} else if (e.kind == KvTraceEvent::Evicted) {
			for (const KvTracePair &p : e.pairs)
				assert_true(evicted[e.layer].insert({p.pos, p.head}).second);
		}
	}
	assert_int_equal(i, selections.size());
	for (uint32_t l = 0; l < L; l++)
		assert_true(evicted[l] == lost[l]);
	// The replay's counts are the daemon's.
	const KvReplayFigures &f = r.figures;
	assert_int_equal(f.aerp_evicted_heads, pairs);
	assert_int_equal(f.aerp_evicted_tokens, listed(listing, " aerp_evicted_tokens "));
	assert_int_equal(f.aerp_tokens, listed(listing, " aerp_tokens "));
	assert_true(f.aerp_x_tokens > 0);
	assert_int_equal(f.aerp_x_tokens, listed(listing, " aerp_x_tokens "));
	assert_int_equal(f.aerp_bytes, listed(listing, " aerp_bytes "));
	assert_int_equal(f.aerp_recomputed, listed(listing, " aerp_recomputed "));
	assert_int_equal(f.selects, listed(listing, " selects "));
	assert_int_equal(f.selects, selections.size());
	assert_int_equal(f.appends, L * T);
	assert_int_equal(f.appends_x, L * (T - T / 5));
	if (memory) {
		assert_int_equal(f.memory_folded, pairs);
		assert_int_equal(f.memory_folded, listed(listing, " memory_folded "));
		assert_int_equal(f.memory_bytes, listed(listing, " memory_bytes "));
		assert_int_equal(f.memory_reads, listed(listing, " memory_reads "));
		assert_int_equal(f.memory_short, listed(listing, " memory_short "));
		assert_true(f.memory_reads > 0 && f.memory_short > 0);
	} else {
		assert_null(strstr(listing.c_str(), " memory_folded "));
		assert_int_equal(f.memory_folded + f.memory_bytes + f.memory_reads + f.memory_short, 0);
	}
}

void aerp_daemon__kv_trace__replay_reproduces_session(void **) { traced_session(false); }

void aerp_daemon__kv_trace_memory__replay_reproduces_session(void **) { traced_session(true); }

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(aerp_daemon__append_x_select__kept_rows_as_appended),
		cmocka_unit_test(aerp_daemon__bad_input__clear_error),
		cmocka_unit_test(aerp_daemon__kv_trace__replay_reproduces_session),
		cmocka_unit_test(aerp_daemon__kv_trace_memory__replay_reproduces_session),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
