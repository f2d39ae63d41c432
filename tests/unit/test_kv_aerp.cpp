// SPDX-License-Identifier: MIT
// Kelle's AERP (kv/policy_aerp.hpp) on hand-made scores: sink and recent tokens are kept, the lowest
// accumulated importance goes first, popularity and the choice to store x, the exact recomputation
// and its rounding; and the same through a KvStore session: eviction frees the rows, recomputed K
// and V come back from select equal to what was appended (bit for bit in fp32, within the rounding
// in fp16 and bf16), and bad options get a clear error.
#include "cmocka_cpp.hpp"
#include "kv_test_store.hpp"

#include "csd/kernels/kernel_common.h"
#include "kv/kv_store.hpp"
#include "kv/policy_aerp.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <random>

using namespace llmcache;
using namespace llmcache::kv;
using namespace llmcache::kv::policy;

namespace {

using kv_test::open_store;

AerpParams params(uint32_t budget, uint32_t heads)
{
	AerpParams p;
	p.budget = budget;
	p.sink_tokens = 1;
	p.recent_tokens = 2;
	p.q_heads = p.kv_heads = heads;
	p.head_dim = 4;
	p.d_model = 0;
	return p;
}

void check__budget_below_sink_plus_recent__einval_with_reason(void **)
{
	std::string err;
	AerpParams p = params(2, 1);
	assert_int_equal(check_aerp(p, err), -EINVAL);
	assert_non_null(strstr(err.c_str(), "always kept, at least 3 tokens"));
	p.budget = 3;
	assert_int_equal(check_aerp(p, err), 0);
	p.q_heads = 3;
	p.kv_heads = 2;
	assert_int_equal(check_aerp(p, err), -EINVAL);
}

void accumulate__softmax_per_head_over_kept__added(void **)
{
	AerpParams p = params(8, 2);
	p.q_heads = 4; // two query heads per KV head
	const uint32_t n = 3;
	// logits[i * 4 + qh]: q heads 0, 1 -> KV head 0; 2, 3 -> KV head 1.
	std::vector<float> logits = {0, 0, 0, 0, std::log(3.0f), 0, 0, 0, 0, 0, 5, 5};
	std::vector<uint8_t> kept = {1, 1, 1, 1, 1, 0}; // token 2 is not kept by KV head 1
	std::vector<float> s(n * 2, 1.0f);
	accumulate_importance(p, n, logits, kept, s);
	// Head 0: q head 0 gives 1/5, 3/5, 1/5; q head 1 gives 1/3 each.
	assert_float_equal(s[0], 1 + 0.2f + 1 / 3.0f, 1e-6);
	assert_float_equal(s[2], 1 + 0.6f + 1 / 3.0f, 1e-6);
	assert_float_equal(s[4], 1 + 0.2f + 1 / 3.0f, 1e-6);
	// Head 1: tokens 0 and 1 only, equal logits: 1/2 each from both q heads; token 2 gets nothing.
	assert_float_equal(s[1], 2.0f, 1e-6);
	assert_float_equal(s[3], 2.0f, 1e-6);
	assert_float_equal(s[5], 1.0f, 0);
}

void evict__sink_and_recent_kept__lowest_then_newest_goes(void **)
{
	AerpParams p = params(4, 2); // sink 1, recent 2: one more slot per head
	const std::vector<uint32_t> pos = {0, 1, 2, 3, 4, 5};
	const uint32_t n_total = 6; // recent: 4, 5
	// Sink 0 and recent 4, 5 score lowest in both heads and still stay.
	std::vector<float> s = {0, 0, /*1*/ 0.5f, 0.1f, /*2*/ 0.3f, 0.7f, /*3*/ 0.5f, 0.2f, /*4*/ 0, 0, /*5*/ 0, 0};
	std::vector<uint8_t> kept(12, 1);
	const std::vector<Eviction> ev = evict(p, pos, n_total, kept, s);
	// Head 0 keeps one of 1, 2, 3: 1 and 3 tie at 0.5, the older (1) ranks above: 2 then 3 go.
	// Head 1 keeps the highest, 2: 1 then 3 go.
	assert_int_equal(ev.size(), 4);
	assert_int_equal(ev[0].token, 2);
	assert_int_equal(ev[0].head, 0);
	assert_int_equal(ev[1].token, 3);
	assert_int_equal(ev[2].token, 1);
	assert_int_equal(ev[2].head, 1);
	assert_int_equal(ev[3].token, 3);
	const std::vector<uint8_t> want = {1, 1, 1, 0, 0, 1, 0, 0, 1, 1, 1, 1};
	assert_memory_equal(kept.data(), want.data(), want.size());
	// Under the budget nothing goes; NaN ranks lowest.
	std::vector<uint8_t> k2(12, 1);
	k2[2 * 2] = k2[2 * 2 + 1] = 0;
	k2[3 * 2] = k2[3 * 2 + 1] = 0;
	assert_true(evict(p, pos, n_total, k2, s).empty());
	std::vector<float> sn = s;
	sn[1 * 2] = NAN;
	std::vector<uint8_t> k3(12, 1);
	const std::vector<Eviction> ev3 = evict(p, pos, n_total, k3, sn);
	assert_int_equal(ev3[0].token, 1);
	assert_int_equal(ev3[0].head, 0);
}

void popularity__heads_where_it_ranks_within_budget__store_x_over_half(void **)
{
	AerpParams p = params(4, 3);
	p.d_model = 8; // K and V of one head: 8 elements; x: 8 elements
	const std::vector<uint32_t> pos = {0, 1, 2, 3, 4};
	const uint32_t n_total = 5; // sink 0, recent 3, 4: one slot
	std::vector<float> s = {0, 0, 0, /*1*/ 0.9f, 0.9f, 0.1f, /*2*/ 0.5f, 0.1f, 0.8f, 0, 0, 0, 0, 0, 0};
	std::vector<uint8_t> kept(15, 1);
	assert_int_equal(popularity(p, pos, n_total, 1, kept, s), 2);
	assert_int_equal(popularity(p, pos, n_total, 2, kept, s), 1);
	assert_int_equal(popularity(p, pos, n_total, 0, kept, s), 3); // sink
	assert_int_equal(popularity(p, pos, n_total, 3, kept, s), 3); // recent
	kept[1 * 3 + 0] = 0;					      // a head that dropped it does not count
	assert_int_equal(popularity(p, pos, n_total, 1, kept, s), 1);
	// x (8) is smaller than 2 * 4 * kept: store x when kept in 2 or 3 heads of 3, not 1.
	assert_false(aerp_store_input(p, 1));
	assert_true(aerp_store_input(p, 2));
	p.d_model = 16; // as large as K and V of two heads
	assert_false(aerp_store_input(p, 2));
	assert_true(aerp_store_input(p, 3));
	p.d_model = 0; // no recomputation
	assert_false(aerp_store_input(p, 3));
}

void conversions__round_to_nearest_even(void **)
{
	assert_int_equal(float_to_half(1.0f), 0x3c00);
	assert_int_equal(float_to_half(-2.0f), 0xc000);
	assert_int_equal(float_to_half(65504.0f), 0x7bff);
	assert_int_equal(float_to_half(65520.0f), 0x7c00); // rounds up to inf
	assert_int_equal(float_to_half(1.0f + 1.0f / 2048), 0x3c00); // tie: even
	assert_int_equal(float_to_half(1.0f + 3.0f / 2048), 0x3c02); // tie: even, up
	assert_int_equal(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
	assert_int_equal(float_to_half(std::ldexp(1.0f, -25)), 0x0000); // tie with 0
	assert_int_equal(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
	assert_true((float_to_half(NAN) & 0x7fff) > 0x7c00);
	for (uint32_t h = 0; h < 0x10000; h++) // every finite half survives the round trip
		if ((h & 0x7c00) != 0x7c00)
			assert_int_equal(float_to_half(csd_half_to_float((uint16_t)h)), h);
	assert_int_equal(float_to_bf16(1.0f), 0x3f80);
	assert_int_equal(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);     // tie: even
	assert_int_equal(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);     // tie: even, up
	assert_int_equal(float_to_bf16(1.0f + 1.5f / 256), 0x3f81);
}

void recompute__exact_order__equals_reference(void **)
{
	const uint32_t d = 5, cols = 3;
	const float x[d] = {0.1f, -2.5f, 3.0f, 1e-3f, 7.0f};
	std::vector<float> w(d * cols);
	for (uint32_t i = 0; i < w.size(); i++)
		w[i] = 0.37f * (float)i - 1.1f;
	float out[cols];
	recompute(x, CSD_FP32, w.data(), d, cols, out);
	for (uint32_t j = 0; j < cols; j++) {
		float acc = 0;
		for (uint32_t i = 0; i < d; i++) {
			const float prod = x[i] * w[i * cols + j];
			acc = acc + prod;
		}
		assert_memory_equal(&out[j], &acc, 4);
	}
}

// A KvStore AERP session of one layer: 2 KV heads of dimension 4, fp32, sink 1, recent 2, budget 4.
void store__sinks_recent_kept_lowest_evicted__rows_freed(void **)
{
	KvShape shape{1, 2, 2, 4, CSD_FP32, 1024};
	KvOptions opt;
	opt.sink_tokens = 1;
	opt.recent_tokens = 2;
	opt.aerp.budget = 4;
	auto s = open_store(shape, opt);
	// Head 0's query looks along dimension 0, head 1's along dimension 1 of its head. Token 1 is a
	// heavy hitter for head 0 only, token 2 for head 1 only; the others have zero keys.
	const float q[8] = {1, 0, 0, 0, 0, 1, 0, 0};
	std::vector<std::vector<float>> ks, vs;
	KvSelection sel;
	for (uint32_t t = 0; t < 7; t++) {
		std::vector<float> k(8, 0.0f), v(8);
		if (t == 1)
			k[0] = 8;
		if (t == 2)
			k[4 + 1] = 8;
		for (uint32_t i = 0; i < 8; i++)
			v[i] = (float)(t * 10 + i);
		ks.push_back(k);
		vs.push_back(v);
		assert_int_equal(s->append(0, k.data(), v.data()), 0);
		assert_int_equal(s->select(0, q, 100, sel), 0);
	}
	// Head 0 keeps sink 0, its heavy hitter 1 and the recent 5, 6; head 1 keeps 0, 2, 5, 6. Tokens 3
	// and 4 scored lowest in both heads and are gone; the sink scored lowest too and stays.
	const std::vector<uint32_t> want_pos = {0, 1, 2, 5, 6};
	assert_int_equal(sel.positions.size(), want_pos.size());
	assert_memory_equal(sel.positions.data(), want_pos.data(), 4 * want_pos.size());
	const std::vector<uint8_t> want_heads = {1, 1, 1, 0, 0, 1, 1, 1, 1, 1};
	assert_memory_equal(sel.heads.data(), want_heads.data(), want_heads.size());
	for (size_t j = 0; j < want_pos.size(); j++) {
		const uint32_t t = want_pos[j];
		for (uint32_t h = 0; h < 2; h++) {
			const float *gk = reinterpret_cast<const float *>(sel.k.data()) + j * 8 + h * 4;
			const float *gv = reinterpret_cast<const float *>(sel.v.data()) + j * 8 + h * 4;
			const std::vector<float> zero(4, 0.0f);
			const float *wk = want_heads[j * 2 + h] ? &ks[t][h * 4] : zero.data();
			const float *wv = want_heads[j * 2 + h] ? &vs[t][h * 4] : zero.data();
			assert_memory_equal(gk, wk, 16);
			assert_memory_equal(gv, wv, 16);
		}
	}
	const KvStats st = s->stats();
	assert_int_equal(st.aerp_tokens, 5);
	assert_int_equal(st.aerp_evicted_tokens, 2);
	assert_int_equal(st.aerp_evicted_heads, 6);
	// Whole tokens 0, 5, 6: K and V of both heads (64 bytes); tokens 1 and 2: one head's (32 bytes).
	assert_int_equal(st.aerp_bytes, 3 * 64 + 2 * 32);
	assert_false(s->resident(0, 3));
	float k[8], v[8];
	assert_int_equal(s->read(0, 3, k, v), -ENOENT);
	assert_non_null(strstr(s->error().c_str(), "evicted by every head"));
	// A select budget below what AERP keeps: sink, recent, then the highest summed importance (1 or 2).
	assert_int_equal(s->select(0, q, 4, sel), 0);
	assert_int_equal(sel.positions.size(), 4);
	assert_int_equal(sel.positions[0], 0);
	assert_int_equal(sel.positions[2], 5);
	assert_int_equal(sel.positions[3], 6);
}

uint16_t to_dtype(float f, uint32_t dtype) { return dtype == CSD_FP16 ? float_to_half(f) : float_to_bf16(f); }

// Layers 2, 4 KV heads (and 8 query heads) of dimension 8, d_model 16: x (16 elements) is smaller than
// the K and V of more than half of the heads (2 * 8 * 3 = 48). No eviction (budget 64): every token
// that left the recent window is popular and stored as x; select must give back what was appended.
void recompute_session(uint32_t dtype)
{
	const uint32_t L = 2, H = 4, D = 8, DM = 16, dims = H * D, T = 10, eb = csd_dtype_bytes(dtype);
	KvShape shape{L, 8, H, D, dtype, 1024};
	KvOptions opt;
	opt.sink_tokens = 1;
	opt.recent_tokens = 2;
	opt.aerp.budget = 64;
	opt.aerp.d_model = DM;
	std::mt19937 rng(7 + dtype);
	std::uniform_real_distribution<float> U(-1, 1);
	opt.aerp.w_k.resize(L * DM * dims);
	opt.aerp.w_v.resize(L * DM * dims);
	for (float &w : opt.aerp.w_k)
		w = U(rng) / 2;
	for (float &w : opt.aerp.w_v)
		w = U(rng) / 2;
	auto s = open_store(shape, opt);
	// The client's K and V: fp32 as recompute() documents it; fp16 and bf16 from a double sum rounded
	// once, so they can differ from the store's in the last place.
	std::vector<std::vector<uint8_t>> K(L), V(L);
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t t = 0; t < T; t++) {
			std::vector<uint8_t> x(DM * eb), k(dims * eb), v(dims * eb);
			std::vector<float> xf(DM);
			for (uint32_t i = 0; i < DM; i++) {
				const float f = U(rng);
				if (dtype == CSD_FP32) {
					std::memcpy(&x[4 * i], &f, 4);
				} else {
					const uint16_t h = to_dtype(f, dtype);
					std::memcpy(&x[2 * i], &h, 2);
				}
				xf[i] = element(x.data(), dtype, i);
			}
			for (int which = 0; which < 2; which++) {
				const float *W = (which ? opt.aerp.w_v : opt.aerp.w_k).data() + (size_t)l * DM * dims;
				uint8_t *out = (which ? v : k).data();
				for (uint32_t j = 0; j < dims; j++) {
					if (dtype == CSD_FP32) {
						float acc = 0;
						for (uint32_t i = 0; i < DM; i++) {
							const float prod = xf[i] * W[i * dims + j];
							acc = acc + prod;
						}
						std::memcpy(out + 4 * j, &acc, 4);
					} else {
						double acc = 0;
						for (uint32_t i = 0; i < DM; i++)
							acc += (double)xf[i] * W[i * dims + j];
						const uint16_t h = to_dtype((float)acc, dtype);
						std::memcpy(out + 2 * j, &h, 2);
					}
				}
			}
			assert_int_equal(s->append(l, k.data(), v.data(), x.data()), 0);
			K[l].insert(K[l].end(), k.begin(), k.end());
			V[l].insert(V[l].end(), v.begin(), v.end());
		}
	const KvStats st = s->stats();
	assert_int_equal(st.aerp_tokens, L * T);
	assert_int_equal(st.aerp_x_tokens, L * (T - 2)); // all but the recent window
	assert_int_equal(st.aerp_bytes, L * ((T - 2) * DM * eb + 2 * (2 * dims * eb + DM * eb)));
	std::vector<float> q(8 * D);
	for (float &f : q)
		f = U(rng);
	const float ulp = dtype == CSD_FP16 ? 1.0f / 1024 : 1.0f / 128;
	for (uint32_t l = 0; l < L; l++) {
		KvSelection sel;
		assert_int_equal(s->select(l, q.data(), 100, sel), 0);
		assert_int_equal(sel.positions.size(), T);
		if (dtype == CSD_FP32) {
			assert_memory_equal(sel.k.data(), K[l].data(), K[l].size());
			assert_memory_equal(sel.v.data(), V[l].data(), V[l].size());
			continue;
		}
		for (uint64_t i = 0; i < (uint64_t)T * dims; i++)
			for (int which = 0; which < 2; which++) {
				const float got = element((which ? sel.v : sel.k).data(), dtype, i);
				const float want = element((which ? V : K)[l].data(), dtype, i);
				if (std::fabs(got - want) > ulp * std::fabs(want) + 1e-6f)
					fail_msg("layer %u element %lu: %g, the client's %g", l, (unsigned long)i, got, want);
			}
	}
	assert_int_equal(s->stats().aerp_recomputed, L * (T - 2));
}

void store__recompute_fp32__bit_exact(void **) { recompute_session(CSD_FP32); }
void store__recompute_fp16_bf16__within_rounding(void **)
{
	recompute_session(CSD_FP16);
	recompute_session(CSD_BF16);
}

void store__bad_options__einval_with_reason(void **)
{
	KvShape shape{2, 4, 4, 8, CSD_FP16, 1024};
	std::unique_ptr<KvStore> s;
	std::string err;
	auto opens = [&](const KvOptions &o, const char *says) {
		err.clear();
		assert_int_equal(KvStore::open(shape, o, s, err), -EINVAL);
		if (!strstr(err.c_str(), says))
			fail_msg("error '%s' does not say '%s'", err.c_str(), says);
	};
	KvOptions opt;
	opt.aerp.budget = 60; // sink 4 + recent 64 by default
	opens(opt, "always kept, at least 68 tokens");
	opt.aerp.budget = 128;
	opt.aerp.d_model = 16;
	opt.aerp.w_k.resize(2 * 16 * 32);
	opt.aerp.w_v.resize(2 * 16 * 32 - 1);
	opens(opt, "W_K has 1024 and W_V 1023 elements");
	opt.aerp.w_v.resize(2 * 16 * 32);
	opt.device = "/nonexistent";
	opens(opt, "without a KV device");
	opt.device.clear();
	opt.aerp.d_model = KvStore::MAX_D_MODEL + 1;
	opens(opt, "d_model");
	KvOptions off;
	off.aerp.d_model = 16;
	opens(off, "need an AERP budget");
	opt.aerp.d_model = 16;
	assert_int_equal(KvStore::open(shape, opt, s, err), 0);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check__budget_below_sink_plus_recent__einval_with_reason),
		cmocka_unit_test(accumulate__softmax_per_head_over_kept__added),
		cmocka_unit_test(evict__sink_and_recent_kept__lowest_then_newest_goes),
		cmocka_unit_test(popularity__heads_where_it_ranks_within_budget__store_x_over_half),
		cmocka_unit_test(conversions__round_to_nearest_even),
		cmocka_unit_test(recompute__exact_order__equals_reference),
		cmocka_unit_test(store__sinks_recent_kept_lowest_evicted__rows_freed),
		cmocka_unit_test(store__recompute_fp32__bit_exact),
		cmocka_unit_test(store__recompute_fp16_bf16__within_rounding),
		cmocka_unit_test(store__bad_options__einval_with_reason),
	};
	return cmocka_run_group_tests(tests, nullptr, nullptr);
}
