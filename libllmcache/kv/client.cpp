// SPDX-License-Identifier: MIT
// The C client of llmcached (llmcache_kv.h): a SOCK_SEQPACKET connection, a sealed memfd for tensors,
// one request and one reply per call. No call waits for ever: a daemon that does not answer within the
// timeout (LLMCACHE_KV_TIMEOUT_MS for sessions, the caller's for status) fails the call with -ETIMEDOUT
// and closes the connection, since a late reply would answer the wrong request.
#include "kv/llmcache_kv.h"

#include "kv/protocol.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>

using namespace llmcache::kv;

struct llmcache_kv {
	int sock = -1, memfd = -1;
	uint8_t *shm = nullptr;
	proto::ShmLayout layout{};
	llmcache_kv_shape shape{};
	uint64_t session = 0, row = 0, x_row = 0;
	bool aerp = false;
	bool memory = false;  // opened with the compressed memory
	bool readout = false; // the last call was a select that succeeded: the readout in shm is its own
	uint32_t seq = 0, appended = 0;
	uint32_t timeout_ms = LLMCACHE_KV_TIMEOUT_MS;
	std::string error;
};

namespace {

int fail(llmcache_kv *kv, int e, std::string msg)
{
	kv->error = std::move(msg);
	return e;
}

// Sends one request (with an fd for OPEN) and waits for its reply.
int call(llmcache_kv *kv, uint16_t type, const void *payload, size_t len, int fd, proto::Reply &r)
{
	proto::Header h{proto::MAGIC, proto::VERSION, type, (uint32_t)len, ++kv->seq};
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
	kv->readout = false;
	if (kv->sock < 0)
		return fail(kv, -ENOTCONN, "the connection to llmcached was closed after an earlier error: open a new session");
	auto timed_out = [&] {
		kv->sock = (close(kv->sock), -1);
		return fail(kv, -ETIMEDOUT, "llmcached did not answer within " + std::to_string(kv->timeout_ms) +
						    " ms: it is stuck or overloaded (see its log); the connection is closed");
	};
	ssize_t n;
	do
		n = sendmsg(kv->sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return timed_out();
	if (n < 0)
		return fail(kv, -errno, std::string("cannot send to llmcached: ") + std::strerror(errno));
	uint8_t buf[1 << 16];
	do
		n = recv(kv->sock, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return timed_out();
	if (n <= 0)
		return fail(kv, n == 0 ? -ECONNRESET : -errno,
			    "llmcached closed the connection (did it stop? It also drops a client that does not read its "
			    "replies, and refuses a uid past its share of connections; see its log)");
	proto::Header rh;
	if ((size_t)n < sizeof(rh) + sizeof(r))
		return fail(kv, -EBADMSG, "short reply from llmcached");
	std::memcpy(&rh, buf, sizeof(rh));
	std::memcpy(&r, buf + sizeof(rh), sizeof(r));
	if (rh.magic != proto::MAGIC || rh.type != proto::REPLY || rh.seq != kv->seq ||
	    sizeof(rh) + sizeof(r) + r.text_len != (size_t)n)
		return fail(kv, -EBADMSG, "malformed reply from llmcached");
	kv->error.assign(reinterpret_cast<const char *>(buf) + sizeof(rh) + sizeof(r), r.text_len);
	return r.status;
}

int connect_to(llmcache_kv *kv, const char *socket_path)
{
	const char *path = socket_path ? socket_path : "/run/llmcached/llmcached.sock";
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	if (std::strlen(path) >= sizeof(addr.sun_path))
		return fail(kv, -ENAMETOOLONG, "socket path too long");
	std::strcpy(addr.sun_path, path);
	kv->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (kv->sock < 0)
		return fail(kv, -errno, std::string("cannot create a socket: ") + std::strerror(errno));
	// The timeouts bound connect (a full backlog), send and receive alike.
	const timeval tv{(time_t)(kv->timeout_ms / 1000), (suseconds_t)(kv->timeout_ms % 1000) * 1000};
	setsockopt(kv->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(kv->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(kv->sock, (sockaddr *)&addr, sizeof(addr)) < 0) {
		const int e = errno;
		if (e == EAGAIN || e == EINPROGRESS)
			return fail(kv, -ETIMEDOUT, std::string("llmcached at ") + path + " did not accept the connection within " +
							    std::to_string(kv->timeout_ms) + " ms: it is stuck or overloaded");
		return fail(kv, -e, std::string("cannot connect to llmcached at ") + path + ": " + std::strerror(e) +
					    " (is the service running? systemctl start llmcached)");
	}
	return 0;
}

// OPEN, or OPEN_AERP when aerp is given (OPEN_MEMORY with memory too): its W_K and W_V are copied into
// the shared memory first.
int open_session(const char *socket_path, const llmcache_kv_shape *shape, const llmcache_kv_aerp *aerp,
		 const llmcache_kv_memory *memory, llmcache_kv **out)
{
	auto *kv = new (std::nothrow) llmcache_kv();
	*out = kv;
	if (!kv)
		return -ENOMEM;
	kv->shape = *shape;
	proto::OpenAerp a{{shape->layers, shape->q_heads, shape->kv_heads, shape->head_dim, shape->dtype,
			   shape->max_context, shape->max_budget, shape->append_batch},
			  0, 0};
	const proto::Open &o = a.open;
	proto::OpenMemory om{};
	if (aerp) {
		if (aerp->d_model && (!aerp->w_k || !aerp->w_v))
			return fail(kv, -EINVAL, "AERP with d_model " + std::to_string(aerp->d_model) +
							 " needs W_K and W_V (layers x d_model x kv_heads x head_dim floats each)");
		a.budget = aerp->budget;
		a.d_model = aerp->d_model;
		kv->aerp = true;
		kv->x_row = (uint64_t)aerp->d_model * (shape->dtype == LLMCACHE_KV_FP32 ? 4 : 2);
	}
	om.aerp = a;
	if (memory) {
		om.route_threshold = memory->route_threshold;
		kv->memory = true;
	}
	if (!(memory ? proto::ShmLayout::of(om, kv->layout)
	      : aerp ? proto::ShmLayout::of(a, kv->layout)
		     : proto::ShmLayout::of(o, kv->layout)))
		return fail(kv, -EINVAL, "session shape too large for shared memory");
	kv->row = (uint64_t)shape->kv_heads * shape->head_dim * (shape->dtype == LLMCACHE_KV_FP32 ? 4 : 2);
	if (int e = connect_to(kv, socket_path))
		return e;
	kv->memfd = memfd_create("llmcache-kv", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (kv->memfd < 0 || ftruncate(kv->memfd, (off_t)kv->layout.size) < 0 ||
	    fcntl(kv->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return fail(kv, -errno, std::string("cannot create the session's shared memory: ") + std::strerror(errno));
	void *m = mmap(nullptr, kv->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, kv->memfd, 0);
	if (m == MAP_FAILED)
		return fail(kv, -errno, std::string("cannot map the session's shared memory: ") + std::strerror(errno));
	kv->shm = static_cast<uint8_t *>(m);
	if (aerp && aerp->d_model) {
		const size_t w = (size_t)shape->layers * aerp->d_model * shape->kv_heads * shape->head_dim * sizeof(float);
		std::memcpy(kv->shm + kv->layout.w_k, aerp->w_k, w);
		std::memcpy(kv->shm + kv->layout.w_v, aerp->w_v, w);
	}
	proto::Reply r;
	const int e = memory ? call(kv, proto::OPEN_MEMORY, &om, sizeof(om), kv->memfd, r)
		      : aerp ? call(kv, proto::OPEN_AERP, &a, sizeof(a), kv->memfd, r)
			     : call(kv, proto::OPEN, &o, sizeof(o), kv->memfd, r);
	if (e == 0)
		kv->session = r.session;
	return e;
}

int append(llmcache_kv *kv, uint32_t layer, const void *k, const void *v, const void *x, uint32_t n)
{
	if (n > kv->shape.append_batch)
		return fail(kv, -EINVAL, "append of more tokens than the session's append batch");
	if (x && !kv->x_row)
		return fail(kv, -EINVAL, "append with input vectors to a session that does not recompute: open it with "
					 "llmcache_kv_open_aerp and d_model > 0");
	std::memcpy(kv->shm + kv->layout.in_k, k, n * kv->row);
	std::memcpy(kv->shm + kv->layout.in_v, v, n * kv->row);
	if (x)
		std::memcpy(kv->shm + kv->layout.in_x, x, n * kv->x_row);
	const proto::Append a{kv->session, layer, n};
	proto::Reply r{};
	kv->appended = 0;
	const int e = call(kv, x ? proto::APPEND_X : proto::APPEND, &a, sizeof(a), -1, r);
	kv->appended = e == 0 ? n : std::min(r.count, n);
	return e;
}

} // namespace

extern "C" {

int llmcache_kv_open(const char *socket_path, const llmcache_kv_shape *shape, llmcache_kv **out)
{
	return open_session(socket_path, shape, nullptr, nullptr, out);
}

int llmcache_kv_open_aerp(const char *socket_path, const llmcache_kv_shape *shape, const llmcache_kv_aerp *aerp,
			  llmcache_kv **out)
{
	if (!aerp) {
		*out = nullptr;
		return -EINVAL;
	}
	return open_session(socket_path, shape, aerp, nullptr, out);
}

int llmcache_kv_open_memory(const char *socket_path, const llmcache_kv_shape *shape, const llmcache_kv_aerp *aerp,
			    const llmcache_kv_memory *memory, llmcache_kv **out)
{
	if (!aerp || !memory) {
		*out = nullptr;
		return -EINVAL;
	}
	return open_session(socket_path, shape, aerp, memory, out);
}

int llmcache_kv_memory_readout(llmcache_kv *kv, const float **readout, const uint8_t **state)
{
	*readout = nullptr;
	*state = nullptr;
	if (!kv->memory)
		return fail(kv, -EINVAL, "the session has no compressed memory: open it with llmcache_kv_open_memory");
	if (!kv->readout)
		return fail(kv, -EINVAL, "no readout: it comes with a select (llmcache_kv_select or _select_end) that "
					 "succeeded, and lasts until the next call");
	*readout = reinterpret_cast<const float *>(kv->shm + kv->layout.memory);
	*state = kv->shm + kv->layout.memory_state;
	return 0;
}

int llmcache_kv_append(llmcache_kv *kv, uint32_t layer, const void *k, const void *v, uint32_t n)
{
	return append(kv, layer, k, v, nullptr, n);
}

int llmcache_kv_append_x(llmcache_kv *kv, uint32_t layer, const void *k, const void *v, const void *x, uint32_t n)
{
	return append(kv, layer, k, v, x, n);
}

const uint8_t *llmcache_kv_selection_heads(const llmcache_kv *kv)
{
	return kv->aerp ? kv->shm + kv->layout.heads : nullptr;
}

uint32_t llmcache_kv_appended(const llmcache_kv *kv) { return kv->appended; }

static int selection(llmcache_kv *kv, int e, const proto::Reply &r, llmcache_kv_selection *sel)
{
	*sel = {};
	if (e == 0) {
		kv->readout = kv->memory;
		sel->n = r.count;
		sel->positions = reinterpret_cast<const uint32_t *>(kv->shm + kv->layout.positions);
		sel->k = kv->shm + kv->layout.out_k;
		sel->v = kv->shm + kv->layout.out_v;
	}
	return e;
}

static int begin(llmcache_kv *kv, uint16_t type, uint32_t layer, const float *q, uint32_t budget, proto::Reply &r)
{
	std::memcpy(kv->shm + kv->layout.q, q, sizeof(float) * kv->shape.q_heads * kv->shape.head_dim);
	const proto::Select s{kv->session, layer, budget};
	return call(kv, type, &s, sizeof(s), -1, r);
}

int llmcache_kv_select(llmcache_kv *kv, uint32_t layer, const float *q, uint32_t budget, llmcache_kv_selection *sel)
{
	proto::Reply r;
	return selection(kv, begin(kv, proto::SELECT, layer, q, budget, r), r, sel);
}

int llmcache_kv_select_begin(llmcache_kv *kv, uint32_t layer, const float *q, uint32_t budget)
{
	proto::Reply r;
	return begin(kv, proto::SELECT_BEGIN, layer, q, budget, r);
}

int llmcache_kv_select_end(llmcache_kv *kv, llmcache_kv_selection *sel)
{
	const proto::SessionRef s{kv->session};
	proto::Reply r;
	return selection(kv, call(kv, proto::SELECT_END, &s, sizeof(s), -1, r), r, sel);
}

int llmcache_kv_drop(llmcache_kv *kv)
{
	const proto::SessionRef s{kv->session};
	proto::Reply r;
	return call(kv, proto::DROP, &s, sizeof(s), -1, r);
}

void llmcache_kv_close(llmcache_kv *kv)
{
	if (!kv)
		return;
	if (kv->session) {
		const proto::SessionRef s{kv->session};
		proto::Reply r;
		call(kv, proto::CLOSE, &s, sizeof(s), -1, r);
	}
	if (kv->shm)
		munmap(kv->shm, kv->layout.size);
	if (kv->memfd >= 0)
		close(kv->memfd);
	if (kv->sock >= 0)
		close(kv->sock);
	delete kv;
}

const char *llmcache_kv_error(const llmcache_kv *kv) { return kv ? kv->error.c_str() : "out of memory"; }

int llmcache_kv_status(const char *socket_path, char *buf, uint32_t len)
{
	return llmcache_kv_status_timeout(socket_path, buf, len, LLMCACHE_KV_STATUS_TIMEOUT_MS);
}

int llmcache_kv_status_timeout(const char *socket_path, char *buf, uint32_t len, uint32_t timeout_ms)
{
	llmcache_kv kv;
	kv.timeout_ms = timeout_ms ? timeout_ms : 1;
	int e = connect_to(&kv, socket_path);
	proto::Reply r{};
	if (e == 0)
		e = call(&kv, proto::STATUS, nullptr, 0, -1, r);
	if (kv.sock >= 0)
		close(kv.sock);
	if (len) {
		const size_t n = std::min<size_t>(kv.error.size(), len - 1);
		std::memcpy(buf, kv.error.data(), n);
		buf[n] = 0;
	}
	return e < 0 ? e : (int)kv.error.size();
}
uint64_t llmcache_kv_session_id(const llmcache_kv *kv) { return kv->session; }

} // extern "C"
