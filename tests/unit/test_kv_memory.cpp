// SPDX-License-Identifier: MIT
// EdgeInfinite's compressed memory (kv/policy_memory.hpp): the readout equals a double-precision direct
// computation over the folded tokens, an empty memory reads as zero and says so, the routing; and in a
// KvStore AERP session, what is folded is exactly what the eviction removed (per head, the count, and M
// and z bit for bit against the same rows folded in the same order, for fp32, fp16 and tokens
// recomputed from x), short contexts skip the readout until the threshold, and bad options are refused.
#include "cmocka_cpp.hpp"

#include "csd/kernels/kernel_common.h"
#include "kv/kv_store.hpp"
#include "kv/policy_aerp.hpp"
#include "kv/policy_memory.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

using namespace llmcache;
using namespace llmcache::kv;
using namespace llmcache::kv::policy;

namespace {

double sigma(double x) { return x > 0 ? x + 1 : std::exp(x); }

// sigma(q) . sum_t sigma(k_t) v_t / sigma(q) . sum_t sigma(k_t), every product and sum in double, over
// the rows of one head (head_dim elements of dtype each).
std::vector<double> direct_readout(const std::vector<std::vector<uint8_t>> &ks, const std::vector<std::vector<uint8_t>> &vs,
				   const float *q, uint32_t D, uint32_t dtype)
{
	std::vector<double> num(D, 0.0);
	double den = 0;
	for (size_t t = 0; t < ks.size(); t++) {
		double w = 0;
		for (uint32_t i = 0; i < D; i++)
			w += sigma(q[i]) * sigma(element(ks[t].data(), dtype, i));
		den += w;
		for (uint32_t j = 0; j < D; j++)
			num[j] += w * element(vs[t].data(), dtype, j);
	}
	for (double &n : num)
		n /= den;
	return num;
}

// Readouts whose values are averages of elements in [-1, 1]: fp32 state over a few hundred tokens stays
// far within 1e-4 of the double computation.
void assert_close(const float *got, const std::vector<double> &want, const char *what)
{
	for (size_t j = 0; j < want.size(); j++)
		if (std::fabs(got[j] - want[j]) > 1e-4)
			fail_msg("%s, element %zu: readout %.9g, direct %.9g", what, j, got[j], want[j]);
}

std::vector<uint8_t> row_of(const std::vector<float> &f, uint32_t dtype)
{
	const size_t eb = csd_dtype_bytes(dtype);
	std::vector<uint8_t> out(f.size() * eb);
	for (size_t i = 0; i < f.size(); i++) {
		if (dtype == CSD_FP32) {
			std::memcpy(&out[4 * i], &f[i], 4);
			continue;
		}
		const uint16_t h = dtype == CSD_FP16 ? float_to_half(f[i]) : float_to_bf16(f[i]);
		std::memcpy(&out[2 * i], &h, 2);
	}
	return out;
}

void elu_plus_one__values(void **)
{
	assert_true(elu_plus_one(1.0f) == 2.0f);
	assert_true(elu_plus_one(0.0f) == 1.0f);
	assert_true(elu_plus_one(-1.0f) == std::exp(-1.0f));
	assert_true(elu_plus_one(-200.0f) == 0.0f); // underflows: the only way sigma(k) is not positive
	assert_true(elu_plus_one(-0.5f) > 0.0f);
}

void readout__random_tokens__equals_double_direct(void **)
{
	for (uint32_t dtype : {(uint32_t)CSD_FP32, (uint32_t)CSD_FP16}) {
		const uint32_t H = 2, QH = 4, D = 16, N = 300;
		std::mt19937 rng(11 + dtype);
		std::uniform_real_distribution<float> Uk(-2, 2), Uv(-1, 1);
		CompressedMemory mem(H, D);
		std::vector<std::vector<std::vector<uint8_t>>> ks(H), vs(H);
		for (uint32_t t = 0; t < N; t++)
			for (uint32_t h = 0; h < H; h++) {
				std::vector<float> k(D), v(D);
				for (float &f : k)
					f = Uk(rng);
				for (float &f : v)
					f = Uv(rng);
				ks[h].push_back(row_of(k, dtype));
				vs[h].push_back(row_of(v, dtype));
				memory_fold(mem, h, ks[h].back().data(), vs[h].back().data(), dtype);
			}
		assert_int_equal(mem.folded[0], N);
		assert_int_equal(mem.folded[1], N);
		std::vector<float> q(QH * D);
		for (float &f : q)
			f = Uk(rng);
		std::vector<float> out(QH * D);
		std::vector<uint8_t> state(QH);
		memory_readout_all(mem, QH, H, D, true, q.data(), out, state);
		for (uint32_t qh = 0; qh < QH; qh++) {
			assert_int_equal(state[qh], (uint8_t)MemoryState::Used);
			const uint32_t h = qh / 2; // two query heads per KV head
			assert_close(&out[qh * D], direct_readout(ks[h], vs[h], &q[qh * D], D, dtype), "query head");
		}
	}
}

void readout__nothing_folded__zero_and_says_so(void **)
{
	const uint32_t D = 4;
	CompressedMemory mem(2, D);
	std::vector<float> q(D, 0.5f), out(D, 7.0f);
	assert_int_equal((int)memory_readout(mem, 1, q.data(), out.data()), (int)MemoryState::Empty);
	for (float f : out)
		assert_true(f == 0.0f);
	// One head folded, the other not.
	const std::vector<float> k(D, 0.25f), v = {1, 2, 3, 4};
	memory_fold(mem, 0, k.data(), v.data(), CSD_FP32);
	std::vector<float> all(2 * D, 7.0f), q2(2 * D, 0.5f);
	std::vector<uint8_t> state(2, 9);
	memory_readout_all(mem, 2, 2, D, true, q2.data(), all, state);
	assert_int_equal(state[0], (uint8_t)MemoryState::Used);
	assert_int_equal(state[1], (uint8_t)MemoryState::Empty);
	for (uint32_t j = 0; j < D; j++) { // one token: the readout is its v
		assert_float_equal(all[j], v[j], 1e-6);
		assert_true(all[D + j] == 0.0f);
	}
	// Not routed: Short and zero, whatever the memory holds; a memory never allocated reads as Empty.
	memory_readout_all(mem, 2, 2, D, false, q2.data(), all, state);
	assert_int_equal(state[0], (uint8_t)MemoryState::Short);
	assert_int_equal(state[1], (uint8_t)MemoryState::Short);
	for (float f : all)
		assert_true(f == 0.0f);
	const CompressedMemory none;
	memory_readout_all(none, 2, 2, D, true, q2.data(), all, state);
	assert_int_equal(state[0], (uint8_t)MemoryState::Empty);
	assert_int_equal(CompressedMemory::bytes_per_head(128), 128 * 128 * 4 + 128 * 4 + 8);
}

void routed__context_over_threshold_only(void **)
{
	assert_false(memory_routed(0, 0));
	assert_true(memory_routed(1, 0));
	assert_false(memory_routed(10, 10));
	assert_true(memory_routed(11, 10));
	assert_false(memory_routed(2047, 2548)); // EdgeInfinite's L_sink + L_window + L_seg = 2548
}

// A KvStore AERP session with the memory, one select after every append: the tokens a head stopped
// keeping between two selects are what the eviction at that append removed. The tracker folds their
// appended rows into its own memory in the same order (each append removes at most one token per head
// once the budget is full) and keeps them, for the direct readout.
struct Tracker {
	uint32_t H, D, dtype;
	uint64_t head_bytes;
	CompressedMemory ref;
	std::map<uint32_t, std::vector<uint8_t>> prev; // position: its keep mask at the last select
	std::vector<std::vector<std::vector<uint8_t>>> ks, vs; // per head, the evicted rows in fold order
	Tracker(uint32_t heads, uint32_t dim, uint32_t dt)
		: H(heads), D(dim), dtype(dt), head_bytes((uint64_t)dim * csd_dtype_bytes(dt)), ref(heads, dim), ks(heads), vs(heads)
	{
	}
	// K and V: every appended row, by position.
	void observe(const KvSelection &sel, const std::vector<std::vector<uint8_t>> &K, const std::vector<std::vector<uint8_t>> &V)
	{
		std::map<uint32_t, std::vector<uint8_t>> cur;
		for (size_t j = 0; j < sel.positions.size(); j++)
			cur[sel.positions[j]].assign(&sel.heads[j * H], &sel.heads[j * H] + H);
		for (uint32_t h = 0; h < H; h++) {
			uint32_t gone = 0;
			for (const auto &[p, mask] : prev) {
				const auto it = cur.find(p);
				if (!mask[h] || (it != cur.end() && it->second[h]))
					continue;
				gone++;
				ks[h].emplace_back(K[p].begin() + h * head_bytes, K[p].begin() + (h + 1) * head_bytes);
				vs[h].emplace_back(V[p].begin() + h * head_bytes, V[p].begin() + (h + 1) * head_bytes);
				memory_fold(ref, h, ks[h].back().data(), vs[h].back().data(), dtype);
			}
			assert_in_range(gone, 0, 1);
		}
		prev.swap(cur);
	}
	// The selection's readout against the direct computation over what was evicted, per query head.
	void check_readout(const KvSelection &sel, const float *q, uint32_t QH)
	{
		assert_int_equal(sel.memory.size(), QH * D);
		assert_int_equal(sel.memory_state.size(), QH);
		for (uint32_t qh = 0; qh < QH; qh++) {
			const uint32_t h = qh / (QH / H);
			if (ks[h].empty()) {
				assert_int_equal(sel.memory_state[qh], (uint8_t)MemoryState::Empty);
				continue;
			}
			assert_int_equal(sel.memory_state[qh], (uint8_t)MemoryState::Used);
			assert_close(&sel.memory[qh * D], direct_readout(ks[h], vs[h], q + qh * D, D, dtype), "store readout");
		}
	}
};

// One layer of two used (layer 1; layer 0 stays empty), 4 query heads over H KV heads of dimension 4,
// budget 5 per head (sink 1, recent 2), T tokens each followed by a select; with d_model > 0 the
// tokens carry x and their K and V are x.W as policy::recompute gives them (so tokens stored as x are
// folded from recomputed rows equal to the appended ones). Then, so that tokens stored as x are evicted
// too (one KV head: a token that ranks within the budget when it leaves the recent window is stored as
// x), every key has the same norm, the queries point at the newest token and the selects per append
// grow in number: a newer token gathers more importance while it is recent than the older ones did,
// and pushes them out.
void eviction_session(uint32_t dtype, uint32_t d_model, uint32_t H)
{
	const uint32_t QH = 4, D = 4, DIMS = H * D, T = 40, BUDGET = 5;
	const KvShape shape{2, QH, H, D, dtype, 256};
	KvOptions opt;
	opt.sink_tokens = 1;
	opt.recent_tokens = 2;
	opt.aerp.budget = BUDGET;
	opt.aerp.d_model = d_model;
	opt.memory.on = true;
	std::mt19937 rng(5 + dtype * 7 + d_model);
	std::uniform_real_distribution<float> U(-1, 1);
	if (d_model) {
		opt.aerp.w_k.resize(2ull * d_model * DIMS);
		opt.aerp.w_v.resize(2ull * d_model * DIMS);
		for (float &w : opt.aerp.w_k)
			w = U(rng);
		for (float &w : opt.aerp.w_v)
			w = U(rng);
	}
	std::unique_ptr<KvStore> s;
	std::string err;
	if (KvStore::open(shape, opt, s, err))
		fail_msg("open: %s", err.c_str());
	Tracker tr(H, D, dtype);
	std::vector<std::vector<uint8_t>> K, V;
	std::vector<float> q(QH * D);
	uint64_t select_recomputes = 0; // each select recomputes every token then stored as x
	for (uint32_t t = 0; t < T; t++) {
		std::vector<uint8_t> x;
		if (d_model) {
			std::vector<float> xf(d_model);
			for (float &f : xf)
				f = U(rng);
			K.emplace_back(DIMS * csd_dtype_bytes(dtype));
			V.emplace_back(DIMS * csd_dtype_bytes(dtype));
			const size_t w_at = (size_t)1 * d_model * DIMS;
			for (int pass = 0; pass < 2; pass++) { // the second with x scaled to give |k| = 2
				x = row_of(xf, dtype);
				recompute(x.data(), dtype, opt.aerp.w_k.data() + w_at, d_model, DIMS, K.back().data());
				recompute(x.data(), dtype, opt.aerp.w_v.data() + w_at, d_model, DIMS, V.back().data());
				double norm = 0;
				for (uint32_t i = 0; i < DIMS; i++)
					norm += (double)element(K.back().data(), dtype, i) * element(K.back().data(), dtype, i);
				for (float &f : xf)
					f = (float)(f * 2 / std::sqrt(norm));
			}
		} else {
			std::vector<float> kf(DIMS), vf(DIMS);
			for (float &f : kf)
				f = 2 * U(rng);
			for (float &f : vf)
				f = U(rng);
			K.push_back(row_of(kf, dtype));
			V.push_back(row_of(vf, dtype));
		}
		assert_int_equal(s->append(1, K.back().data(), V.back().data(), d_model ? x.data() : nullptr), 0);
		for (uint32_t n = 0; n < (d_model ? 1 + t / 4 : 1); n++) {
			for (uint32_t i = 0; i < QH * D; i++)
				q[i] = d_model ? 50 * element(K.back().data(), dtype, (i / D) / (QH / H) * D + i % D) : U(rng);
			KvSelection sel;
			select_recomputes += s->stats().aerp_x_tokens;
			assert_int_equal(s->select(1, q.data(), 256, sel), 0);
			tr.observe(sel, K, V);
			tr.check_readout(sel, q.data(), QH);
		}
	}
	// Every head keeps exactly the budget once it is full: each later append removed one token per head.
	const CompressedMemory *mem = s->memory(1);
	assert_non_null(mem);
	assert_null(s->memory(0));
	for (uint32_t h = 0; h < H; h++) {
		assert_int_equal(tr.ref.folded[h], T - BUDGET);
		assert_int_equal(mem->folded[h], T - BUDGET);
	}
	assert_memory_equal(mem->m.data(), tr.ref.m.data(), 4 * tr.ref.m.size());
	assert_memory_equal(mem->z.data(), tr.ref.z.data(), 4 * tr.ref.z.size());
	const KvStats st = s->stats();
	assert_int_equal(st.memory_folded, H * (T - BUDGET));
	assert_int_equal(st.memory_folded, st.aerp_evicted_heads);
	if (!d_model)
		assert_int_equal(st.memory_reads, T);
	assert_int_equal(st.memory_short, 0);
	assert_int_equal(st.memory_bytes, H * CompressedMemory::bytes_per_head(D));
	if (d_model) // the rest were recomputed by the folds: tokens stored as x were evicted
		assert_true(st.aerp_recomputed > select_recomputes);
}

void store__aerp_eviction_fp32__fold_is_what_was_evicted(void **) { eviction_session(CSD_FP32, 0, 2); }
void store__aerp_eviction_fp16__fold_is_what_was_evicted(void **) { eviction_session(CSD_FP16, 0, 2); }
void store__aerp_eviction_recomputed_x__fold_is_what_was_evicted(void **)
{
	eviction_session(CSD_FP32, 4, 1);
}

void store__short_context__readout_skipped_until_threshold(void **)
{
	const uint32_t QH = 2, H = 2, D = 4, DIMS = H * D, THRESHOLD = 12, BUDGET = 5;
	const KvShape shape{1, QH, H, D, CSD_FP32, 64};
	KvOptions opt;
	opt.sink_tokens = 1;
	opt.recent_tokens = 2;
	opt.aerp.budget = BUDGET;
	opt.memory = {true, THRESHOLD};
	std::unique_ptr<KvStore> s;
	std::string err;
	assert_int_equal(KvStore::open(shape, opt, s, err), 0);
	std::mt19937 rng(17);
	std::uniform_real_distribution<float> U(-1, 1);
	Tracker tr(H, D, CSD_FP32);
	std::vector<std::vector<uint8_t>> K, V;
	std::vector<float> q(QH * D);
	for (uint32_t t = 0; t < THRESHOLD + 4; t++) {
		std::vector<float> kf(DIMS), vf(DIMS);
		for (float &f : kf)
			f = U(rng);
		for (float &f : vf)
			f = U(rng);
		K.push_back(row_of(kf, CSD_FP32));
		V.push_back(row_of(vf, CSD_FP32));
		assert_int_equal(s->append(0, K.back().data(), V.back().data()), 0);
		for (float &f : q)
			f = U(rng);
		KvSelection sel;
		assert_int_equal(s->select(0, q.data(), 64, sel), 0);
		tr.observe(sel, K, V);
		if (t + 1 <= THRESHOLD) { // short: no readout, although the memory folds what is evicted
			for (uint8_t st : sel.memory_state)
				assert_int_equal(st, (uint8_t)MemoryState::Short);
			for (float f : sel.memory)
				assert_true(f == 0.0f);
			assert_int_equal(sel.memory.size(), QH * D);
			continue;
		}
		tr.check_readout(sel, q.data(), QH); // everything evicted, the tokens folded while short included
	}
	const KvStats st = s->stats();
	assert_int_equal(st.memory_short, THRESHOLD);
	assert_int_equal(st.memory_reads, 4);
	assert_int_equal(st.memory_folded, H * (THRESHOLD + 4 - BUDGET));
	assert_memory_equal(s->memory(0)->m.data(), tr.ref.m.data(), 4 * tr.ref.m.size());
}

void store__bad_options__einval_with_reason(void **)
{
	const KvShape shape{1, 2, 2, 4, CSD_FP32, 64};
	std::unique_ptr<KvStore> s;
	std::string err;
	auto refused = [&](const KvOptions &o, const char *says) {
		err.clear();
		assert_int_equal(KvStore::open(shape, o, s, err), -EINVAL);
		if (!strstr(err.c_str(), says))
			fail_msg("error '%s' does not say '%s'", err.c_str(), says);
	};
	KvOptions opt;
	opt.sink_tokens = 1;
	opt.recent_tokens = 2;
	opt.memory.on = true;
	refused(opt, "never drops a token");
	opt.aerp.budget = 4;
	opt.memory.route_threshold = 64;
	refused(opt, "route threshold 64: must be below max_context (64)");
	opt.memory.route_threshold = 63;
	assert_int_equal(KvStore::open(shape, opt, s, err), 0);
	// Without the option an AERP select carries no readout.
	opt.memory = {};
	assert_int_equal(KvStore::open(shape, opt, s, err), 0);
	const std::vector<float> row(8, 0.5f), q(8, 0.5f);
	assert_int_equal(s->append(0, row.data(), row.data()), 0);
	KvSelection sel;
	assert_int_equal(s->select(0, q.data(), 8, sel), 0);
	assert_true(sel.memory.empty() && sel.memory_state.empty());
	assert_null(s->memory(0));
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(elu_plus_one__values),
		cmocka_unit_test(readout__random_tokens__equals_double_direct),
		cmocka_unit_test(readout__nothing_folded__zero_and_says_so),
		cmocka_unit_test(routed__context_over_threshold_only),
		cmocka_unit_test(store__aerp_eviction_fp32__fold_is_what_was_evicted),
		cmocka_unit_test(store__aerp_eviction_fp16__fold_is_what_was_evicted),
		cmocka_unit_test(store__aerp_eviction_recomputed_x__fold_is_what_was_evicted),
		cmocka_unit_test(store__short_context__readout_skipped_until_threshold),
		cmocka_unit_test(store__bad_options__einval_with_reason),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
