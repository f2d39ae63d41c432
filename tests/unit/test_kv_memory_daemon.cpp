// SPDX-License-Identifier: MIT
// EdgeInfinite's compressed memory through llmcached and the C API (llmcache_kv_open_memory,
// llmcache_kv_memory_readout): each select's readout equals a double-precision computation over the
// tokens the daemon's AERP eviction removed (seen from the keep masks of successive selects), short
// contexts get no readout until the routing threshold, the listing counts the folds; and bad input (a
// threshold the memory would never pass, a readout from a session without the memory or without a
// select, malformed OPEN_MEMORY packets) gets a clear error while the daemon keeps serving.
#include "cmocka_cpp.hpp"
#include "kv_test_daemon.hpp"

#include "kv/llmcache_kv.h"
#include "kv/protocol.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

using namespace llmcache::kv;

namespace {

int setup(void **) { return kv_test_daemon::start("memory"); }
int teardown(void **) { return kv_test_daemon::stop(); }

// One layer, 4 query heads over 2 KV heads of dimension 4, fp32; selects of up to 16 tokens.
const llmcache_kv_shape shape{1, 4, 2, 4, LLMCACHE_KV_FP32, 64, 16, 4};
constexpr uint32_t QH = 4, H = 2, D = 4, DIMS = H * D;

double sigma(double x) { return x > 0 ? x + 1 : std::exp(x); }

// Appends T random tokens, each followed by a select of every retained token; the (token, head) pairs
// that leave the keep mask between two selects are the evicted ones. Each readout is checked against
// sigma(q) . sum sigma(k) v / sigma(q) . sum sigma(k) over them, in double, once the context exceeds
// `threshold`; before that every state is SHORT and the readout zero. Returns the pairs evicted.
uint32_t run_session(llmcache_kv *kv, uint32_t T, uint32_t threshold, uint32_t seed)
{
	std::mt19937 rng(seed);
	std::uniform_real_distribution<float> U(-1, 1);
	std::vector<std::vector<float>> K, V;
	std::map<uint32_t, std::vector<uint8_t>> prev;
	std::vector<std::vector<uint32_t>> evicted(H); // positions, per head
	std::vector<float> q(QH * D);
	uint32_t pairs = 0;
	for (uint32_t t = 0; t < T; t++) {
		K.emplace_back(DIMS);
		V.emplace_back(DIMS);
		for (float &f : K.back())
			f = 2 * U(rng);
		for (float &f : V.back())
			f = U(rng);
		assert_int_equal(llmcache_kv_append(kv, 0, K.back().data(), V.back().data(), 1), 0);
		for (float &f : q)
			f = U(rng);
		llmcache_kv_selection sel;
		if (llmcache_kv_select(kv, 0, q.data(), 16, &sel))
			fail_msg("select: %s", llmcache_kv_error(kv));
		const uint8_t *heads = llmcache_kv_selection_heads(kv);
		std::map<uint32_t, std::vector<uint8_t>> cur;
		for (uint32_t j = 0; j < sel.n; j++)
			cur[sel.positions[j]].assign(heads + j * H, heads + (j + 1) * H);
		for (const auto &[p, mask] : prev)
			for (uint32_t h = 0; h < H; h++) {
				const auto it = cur.find(p);
				if (mask[h] && (it == cur.end() || !it->second[h]))
					evicted[h].push_back(p), pairs++;
			}
		prev.swap(cur);
		const float *readout;
		const uint8_t *state;
		if (llmcache_kv_memory_readout(kv, &readout, &state))
			fail_msg("readout: %s", llmcache_kv_error(kv));
		for (uint32_t qh = 0; qh < QH; qh++) {
			const uint32_t h = qh / (QH / H);
			if (t + 1 <= threshold) {
				assert_int_equal(state[qh], LLMCACHE_KV_MEMORY_SHORT);
				for (uint32_t j = 0; j < D; j++)
					assert_true(readout[qh * D + j] == 0.0f);
				continue;
			}
			if (evicted[h].empty()) {
				assert_int_equal(state[qh], LLMCACHE_KV_MEMORY_EMPTY);
				continue;
			}
			assert_int_equal(state[qh], LLMCACHE_KV_MEMORY_USED);
			std::vector<double> num(D, 0.0);
			double den = 0;
			for (uint32_t p : evicted[h]) {
				double w = 0;
				for (uint32_t i = 0; i < D; i++)
					w += sigma(q[qh * D + i]) * sigma(K[p][h * D + i]);
				den += w;
				for (uint32_t j = 0; j < D; j++)
					num[j] += w * V[p][h * D + j];
			}
			for (uint32_t j = 0; j < D; j++)
				if (std::fabs(readout[qh * D + j] - num[j] / den) > 1e-4)
					fail_msg("token %u, query head %u, element %u: readout %.9g, direct %.9g", t, qh, j,
						 readout[qh * D + j], num[j] / den);
		}
	}
	return pairs;
}

uint64_t listed(const char *field)
{
	char listing[4096];
	assert_true(llmcache_kv_status((kv_test_daemon::dir + "/sock").c_str(), listing, sizeof(listing)) > 0);
	const char *at = strstr(listing, field);
	if (!at)
		fail_msg("the listing has no '%s': %s", field, listing);
	return strtoull(at + strlen(field), nullptr, 10);
}

void memory_daemon__selects__readout_equals_direct_over_evicted(void **)
{
	const llmcache_kv_aerp aerp{4, 0, nullptr, nullptr};
	const llmcache_kv_memory memory{0};
	llmcache_kv *kv;
	if (llmcache_kv_open_memory((kv_test_daemon::dir + "/sock").c_str(), &shape, &aerp, &memory, &kv))
		fail_msg("open: %s", llmcache_kv_error(kv));
	const uint32_t T = 30;
	const uint32_t pairs = run_session(kv, T, 0, 3);
	assert_int_equal(pairs, H * (T - 4)); // each head keeps its budget of 4: one token per append after
	assert_int_equal(listed(" memory_folded "), pairs);
	assert_int_equal(listed(" memory_reads "), T);
	assert_int_equal(listed(" memory_bytes "), H * (4 * D * D + 4 * D + 8));
	llmcache_kv_close(kv);
}

void memory_daemon__short_context__no_readout_until_threshold(void **)
{
	const llmcache_kv_aerp aerp{4, 0, nullptr, nullptr};
	const llmcache_kv_memory memory{10};
	llmcache_kv *kv;
	if (llmcache_kv_open_memory((kv_test_daemon::dir + "/sock").c_str(), &shape, &aerp, &memory, &kv))
		fail_msg("open: %s", llmcache_kv_error(kv));
	run_session(kv, 16, 10, 7);
	assert_int_equal(listed(" memory_short "), 10);
	assert_int_equal(listed(" memory_reads "), 6);
	llmcache_kv_close(kv);
}

// One raw request on a new connection (the C API never sends these), with an fd or not; the reply's status.
int raw_request(uint16_t type, const void *payload, uint32_t len, int fd)
{
	const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	std::strcpy(addr.sun_path, (kv_test_daemon::dir + "/sock").c_str());
	assert_int_equal(connect(s, (sockaddr *)&addr, sizeof(addr)), 0);
	proto::Header h{proto::MAGIC, proto::VERSION, type, len, 1};
	iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void *>(payload), len}};
	msghdr m{};
	m.msg_iov = iov;
	m.msg_iovlen = 2;
	alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
	if (fd >= 0) {
		m.msg_control = ctrl;
		m.msg_controllen = sizeof(ctrl);
		cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	assert_true(sendmsg(s, &m, MSG_NOSIGNAL) > 0);
	uint8_t buf[1 << 12];
	const ssize_t n = recv(s, buf, sizeof(buf), 0);
	close(s);
	assert_true(n >= (ssize_t)(sizeof(proto::Header) + sizeof(proto::Reply)));
	proto::Reply r;
	std::memcpy(&r, buf + sizeof(proto::Header), sizeof(r));
	return r.status;
}

void memory_daemon__bad_input__clear_error(void **)
{
	const std::string sock = kv_test_daemon::dir + "/sock";
	const llmcache_kv_aerp aerp{4, 0, nullptr, nullptr};
	llmcache_kv *kv;
	auto refused = [&](const llmcache_kv_aerp &a, const llmcache_kv_memory &mem, const char *says) {
		assert_int_equal(llmcache_kv_open_memory(sock.c_str(), &shape, &a, &mem, &kv), -EINVAL);
		if (!strstr(llmcache_kv_error(kv), says))
			fail_msg("error '%s' does not say '%s'", llmcache_kv_error(kv), says);
		llmcache_kv_close(kv);
	};
	refused(aerp, {64}, "route threshold 64: must be below max_context (64)");
	refused({0, 0, nullptr, nullptr}, {0}, "budget 0");
	refused({2, 0, nullptr, nullptr}, {0}, "always kept, at least 3 tokens");
	assert_int_equal(llmcache_kv_open_memory(sock.c_str(), &shape, &aerp, nullptr, &kv), -EINVAL);
	const float *readout;
	const uint8_t *state;
	// A session without the memory, AERP or not.
	for (int with_aerp = 0; with_aerp < 2; with_aerp++) {
		assert_int_equal(with_aerp ? llmcache_kv_open_aerp(sock.c_str(), &shape, &aerp, &kv)
					   : llmcache_kv_open(sock.c_str(), &shape, &kv),
				 0);
		assert_int_equal(llmcache_kv_memory_readout(kv, &readout, &state), -EINVAL);
		assert_non_null(strstr(llmcache_kv_error(kv), "no compressed memory"));
		assert_null(readout);
		assert_null(state);
		llmcache_kv_close(kv);
	}
	// The memory's readout comes with a select and lasts until the next call.
	const llmcache_kv_memory mem{0};
	assert_int_equal(llmcache_kv_open_memory(sock.c_str(), &shape, &aerp, &mem, &kv), 0);
	assert_int_equal(llmcache_kv_memory_readout(kv, &readout, &state), -EINVAL);
	assert_non_null(strstr(llmcache_kv_error(kv), "no readout"));
	const std::vector<float> row(DIMS, 0.5f), q(QH * D, 0.5f);
	assert_int_equal(llmcache_kv_append(kv, 0, row.data(), row.data(), 1), 0);
	llmcache_kv_selection sel;
	assert_int_equal(llmcache_kv_select(kv, 0, q.data(), 16, &sel), 0);
	assert_int_equal(llmcache_kv_memory_readout(kv, &readout, &state), 0);
	assert_int_equal(state[0], LLMCACHE_KV_MEMORY_EMPTY); // nothing evicted yet
	assert_int_equal(llmcache_kv_append(kv, 0, row.data(), row.data(), 1), 0);
	assert_int_equal(llmcache_kv_memory_readout(kv, &readout, &state), -EINVAL);
	// The split select gives it too.
	assert_int_equal(llmcache_kv_select_begin(kv, 0, q.data(), 16), 0);
	assert_int_equal(llmcache_kv_memory_readout(kv, &readout, &state), -EINVAL);
	assert_int_equal(llmcache_kv_select_end(kv, &sel), 0);
	assert_int_equal(llmcache_kv_memory_readout(kv, &readout, &state), 0);
	llmcache_kv_close(kv);

	// Malformed OPEN_MEMORY packets: -EBADMSG (the protocol's answer to a malformed message), the
	// daemon stays up. A payload one byte short, and a right one without its memfd.
	proto::OpenMemory om{{{1, 4, 2, 4, 0, 64, 16, 4}, 4, 0}, 0};
	assert_int_equal(raw_request(proto::OPEN_MEMORY, &om, sizeof(om) - 1, -1), -EBADMSG);
	assert_int_equal(raw_request(proto::OPEN_MEMORY, &om, sizeof(om), -1), -EBADMSG);
	// A memfd too small for the memory's readout region (sized for an AERP session without it): -EINVAL.
	proto::ShmLayout aerp_layout;
	assert_true(proto::ShmLayout::of(om.aerp, aerp_layout));
	proto::ShmLayout mem_layout;
	assert_true(proto::ShmLayout::of(om, mem_layout));
	assert_true(mem_layout.size > aerp_layout.size);
	const int fd = memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)aerp_layout.size), 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	assert_int_equal(raw_request(proto::OPEN_MEMORY, &om, sizeof(om), fd), -EINVAL);
	close(fd);
	assert_int_equal(kill(kv_test_daemon::pid, 0), 0);
	assert_int_equal(llmcache_kv_open_memory(sock.c_str(), &shape, &aerp, &mem, &kv), 0);
	llmcache_kv_close(kv);
}

} // namespace

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(memory_daemon__selects__readout_equals_direct_over_evicted),
		cmocka_unit_test(memory_daemon__short_context__no_readout_until_threshold),
		cmocka_unit_test(memory_daemon__bad_input__clear_error),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
