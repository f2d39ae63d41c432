// SPDX-License-Identifier: MIT
#include "kv/server.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace llmcache::kv {

static std::string errstr(int e) { return std::strerror(e < 0 ? -e : e); }

int Server::open(const ServerConfig &cfg, std::unique_ptr<Server> &out, std::string &err)
{
	std::unique_ptr<Server> s(new Server());
	s->cfg_ = cfg;
	uint64_t regions = cfg.max_sessions;
	if (!cfg.kv.device.empty()) {
		const int fd = ::open(cfg.kv.device.c_str(), O_RDONLY | O_CLOEXEC);
		struct stat st;
		uint64_t size = 0;
		if (fd < 0 || fstat(fd, &st) < 0) {
			err = "cannot open the KV device " + cfg.kv.device + ": " + errstr(errno) +
			      "; create it or fix kv-device in the configuration";
			if (fd >= 0)
				close(fd);
			return -ENOENT;
		}
		if (S_ISBLK(st.st_mode))
			ioctl(fd, BLKGETSIZE64, &size);
		else
			size = st.st_size;
		close(fd);
		if (cfg.session_device_bytes < 2 * SLAB_ALIGN || cfg.session_device_bytes % SLAB_ALIGN) {
			err = "kv-session-device-bytes must be a multiple of 4096 and at least 8192";
			return -EINVAL;
		}
		regions = std::min<uint64_t>(regions, size / cfg.session_device_bytes);
		if (regions == 0) {
			err = "the KV device " + cfg.kv.device + " (" + std::to_string(size) +
			      " bytes) is smaller than one session region of " + std::to_string(cfg.session_device_bytes) +
			      " bytes: lower kv-session-device-bytes or use a larger device";
			return -ENOSPC;
		}
	}
	for (int r = (int)regions; r-- > 0;)
		s->free_regions_.push_back(r);

	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	if (cfg.socket_path.size() >= sizeof(addr.sun_path))
		return err = "socket path " + cfg.socket_path + " is too long", -ENAMETOOLONG;
	std::strcpy(addr.sun_path, cfg.socket_path.c_str());
	s->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->listen_fd_ < 0)
		return err = "cannot create a Unix socket: " + errstr(errno), -errno;
	int b = bind(s->listen_fd_, (sockaddr *)&addr, sizeof(addr));
	if (b < 0 && errno == EADDRINUSE) {
		// A socket file is there: another daemon if it answers, else a leftover to replace.
		const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		const bool alive = connect(probe, (sockaddr *)&addr, sizeof(addr)) == 0;
		close(probe);
		if (alive)
			return err = "another llmcached is listening on " + cfg.socket_path + ": stop it first", -EADDRINUSE;
		unlink(cfg.socket_path.c_str());
		b = bind(s->listen_fd_, (sockaddr *)&addr, sizeof(addr));
	}
	if (b < 0) {
		const int e = errno;
		s->listen_fd_ = (close(s->listen_fd_), -1);
		err = "cannot bind " + cfg.socket_path + ": " + errstr(e) + " (does its directory exist and is it writable?)";
		return -e;
	}
	s->bound_ = true;
	chmod(cfg.socket_path.c_str(), 0666); // any local user may connect; peer credentials isolate them
	if (listen(s->listen_fd_, 64) < 0)
		return err = "cannot listen on " + cfg.socket_path + ": " + errstr(errno), -errno;
	s->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
	s->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->epoll_fd_ < 0 || s->stop_fd_ < 0)
		return err = "cannot create the event loop: " + errstr(errno), -errno;
	for (int fd : {s->listen_fd_, s->stop_fd_}) {
		epoll_event ev{EPOLLIN, {.fd = fd}};
		epoll_ctl(s->epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
	}
	out = std::move(s);
	return 0;
}

Server::~Server()
{
	while (!sessions_.empty())
		free_session(sessions_.size() - 1);
	push_stats(); // the last word: no sessions, the counters of all

	for (const Conn &c : conns_)
		close(c.fd);
	for (int fd : {listen_fd_, epoll_fd_, stop_fd_})
		if (fd >= 0)
			close(fd);
	if (bound_)
		unlink(cfg_.socket_path.c_str());
}

void Server::stop()
{
	const uint64_t one = 1;
	(void)!write(stop_fd_, &one, sizeof(one));
}

void Server::push_stats()
{
	if (!feed_.active())
		return;
	KvStats total = retired_;
	double beta = 0;
	for (const auto &s : sessions_)
		if (s->kv) {
			add_stats(total, s->kv->stats(), true);
			beta = std::max(beta, s->kv->beta());
		}
	std::string err;
	if (feed_.push(kernel_stats(total, (uint32_t)sessions_.size(), beta, cfg_.kv.backend != "none"), err) < 0)
		log(err);
}

int Server::run()
{
	epoll_event evs[32];
	// With the kernel module loaded, the statistics go to /sys/kernel/llmcache/kv/ about once a second.
	using Clock = std::chrono::steady_clock;
	if (feed_.open())
		push_stats();
	auto pushed = Clock::now();
	for (;;) {
		if (feed_.active() && Clock::now() - pushed >= std::chrono::seconds(1)) {
			push_stats();
			pushed = Clock::now();
		}
		const int n = epoll_wait(epoll_fd_, evs, 32, feed_.active() ? 1000 : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (int i = 0; i < n; i++) {
			const int fd = evs[i].data.fd;
			if (fd == stop_fd_)
				return 0;
			if (fd == listen_fd_) {
				accept_one();
				continue;
			}
			auto it = std::find_if(conns_.begin(), conns_.end(), [&](const Conn &c) { return c.fd == fd; });
			if (it == conns_.end())
				continue;
			if (evs[i].events & (EPOLLHUP | EPOLLERR) && !(evs[i].events & EPOLLIN))
				drop_conn(fd);
			else
				serve(*it);
		}
	}
}

void Server::accept_one()
{
	const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	ucred cred{};
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log("failed to read the peer credentials of a client: " + errstr(errno) + "; connection refused");
		close(fd);
		return;
	}
	conns_.push_back({fd, cred.uid, cred.pid});
	epoll_event ev{EPOLLIN, {.fd = fd}};
	epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void Server::free_session(size_t i)
{
	Session &s = *sessions_[i];
	if (s.kv)
		add_stats(retired_, s.kv->stats(), false);
	s.kv.reset();
	if (s.shm)
		munmap(s.shm, s.layout.size);
	if (s.region >= 0)
		free_regions_.push_back(s.region);
	sessions_.erase(sessions_.begin() + (long)i);
}

void Server::drop_conn(int fd)
{
	for (size_t i = sessions_.size(); i-- > 0;)
		if (sessions_[i]->conn == fd)
			free_session(i);
	epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
	close(fd);
	std::erase_if(conns_, [&](const Conn &c) { return c.fd == fd; });
}

Server::Session *Server::find(int conn, uint64_t id)
{
	for (auto &s : sessions_)
		if (s->id == id && s->conn == conn)
			return s.get();
	return nullptr;
}

void Server::serve(Conn &c)
{
	uint8_t buf[proto::MAX_MESSAGE];
	alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
	iovec iov{buf, sizeof(buf)};
	msghdr m{};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctrl;
	m.msg_controllen = sizeof(ctrl);
	const ssize_t n = recvmsg(c.fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			drop_conn(c.fd);
		return;
	}
	int fd = -1;
	for (cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
			std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	proto::Reply r{};
	std::string text = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
				   ? (r.status = -EBADMSG, "malformed message: longer than " + std::to_string(sizeof(buf)) +
								   " bytes or with more than one file descriptor")
				   : handle(c, buf, (size_t)n, fd, r);
	if (fd >= 0)
		close(fd); // the session keeps its own mapping
	proto::Header h{proto::MAGIC, proto::VERSION, proto::REPLY, 0, 0};
	if ((size_t)n >= sizeof(proto::Header))
		std::memcpy(&h.seq, buf + 12, 4);
	r.text_len = (uint32_t)text.size();
	h.length = (uint32_t)(sizeof(r) + text.size());
	iovec out[3] = {{&h, sizeof(h)}, {&r, sizeof(r)}, {text.data(), text.size()}};
	msghdr om{};
	om.msg_iov = out;
	om.msg_iovlen = 3;
	if (sendmsg(c.fd, &om, MSG_NOSIGNAL) < 0)
		drop_conn(c.fd);
}

std::string Server::handle(Conn &c, const uint8_t *buf, size_t len, int fd, proto::Reply &r)
{
	proto::Header h;
	std::string err;
	if ((r.status = proto::parse(buf, len, h, err)) < 0)
		return err;
	const uint8_t *p = buf + sizeof(h);
	if (h.type == proto::OPEN) {
		proto::Open o;
		std::memcpy(&o, p, sizeof(o));
		return open_session(c, o, fd, r);
	}
	if (fd >= 0)
		return r.status = -EBADMSG, "malformed message: only OPEN carries a file descriptor";
	if (h.type == proto::STATUS)
		return status(c);
	if (h.type == proto::PAGECACHE_STATUS)
		return pagecache_status ? pagecache_status()
					: (r.status = -ENOTSUP, "llmcached runs in kv mode: start it with --mode=bpf for the "
								"page-cache policy");
	proto::SessionRef ref;
	std::memcpy(&ref, p, sizeof(ref)); // every other payload starts with the session id
	Session *s = find(c.fd, ref.session);
	if (!s)
		return r.status = -ENOENT, "no session " + std::to_string(ref.session) + " on this connection";
	r.session = s->id;
	const uint64_t row = s->kv->row_bytes();
	switch (h.type) {
	case proto::APPEND: {
		proto::Append a;
		std::memcpy(&a, p, sizeof(a));
		if (a.n_tokens > s->shape.append_batch || a.layer >= s->shape.layers)
			return r.status = -EINVAL, "append of " + std::to_string(a.n_tokens) + " tokens to layer " +
							   std::to_string(a.layer) + ": the session allows " +
							   std::to_string(s->shape.append_batch) + " tokens per append and " +
							   std::to_string(s->shape.layers) + " layers";
		for (uint32_t t = 0; t < a.n_tokens; t++) {
			const int e = s->kv->append(a.layer, s->shm + s->layout.in_k + t * row, s->shm + s->layout.in_v + t * row);
			if (e < 0 && r.status == 0) {
				r.status = e;
				err = s->kv->error();
			}
		}
		r.count = a.n_tokens;
		return err;
	}
	case proto::SELECT:
	case proto::SELECT_BEGIN:
	case proto::SELECT_END: {
		KvSelection sel;
		if (h.type != proto::SELECT_END) {
			proto::Select q;
			std::memcpy(&q, p, sizeof(q));
			if (q.budget > s->shape.max_budget)
				return r.status = -EINVAL, "select budget " + std::to_string(q.budget) +
								   " above the session's " + std::to_string(s->shape.max_budget);
			if ((r.status = s->kv->select_begin(q.layer, reinterpret_cast<const float *>(s->shm + s->layout.q),
							    q.budget)))
				return s->kv->error();
			if (h.type == proto::SELECT_BEGIN)
				return {};
		}
		if ((r.status = s->kv->select_end(sel)))
			return s->kv->error();
		const size_t n = sel.positions.size();
		if (n) {
			std::memcpy(s->shm + s->layout.positions, sel.positions.data(), 4 * n);
			std::memcpy(s->shm + s->layout.out_k, sel.k.data(), n * row);
			std::memcpy(s->shm + s->layout.out_v, sel.v.data(), n * row);
		}
		r.count = (uint32_t)n;
		return {};
	}
	case proto::DROP:
		s->kv.reset();
		if ((r.status = open_store(*s, err)))
			return err;
		return {};
	case proto::CLOSE:
		for (size_t i = 0; i < sessions_.size(); i++)
			if (sessions_[i].get() == s)
				free_session(i);
		return {};
	}
	return r.status = -EBADMSG, "unhandled message type";
}

int Server::open_store(Session &s, std::string &err)
{
	KvShape shape{s.shape.layers, s.shape.q_heads, s.shape.kv_heads, s.shape.head_dim, s.shape.dtype,
		      s.shape.max_context};
	KvOptions o = cfg_.kv;
	if (!o.device.empty()) {
		o.device_offset = (uint64_t)s.region * cfg_.session_device_bytes;
		o.device_capacity = cfg_.session_device_bytes;
	}
	return KvStore::open(shape, o, s.kv, err);
}

std::string Server::open_session(Conn &c, const proto::Open &o, int memfd, proto::Reply &r)
{
	auto s = std::make_unique<Session>();
	s->conn = c.fd;
	s->uid = c.uid;
	s->pid = c.pid;
	s->shape = o;
	const uint32_t kept = cfg_.kv.sink_tokens + cfg_.kv.recent_tokens;
	if (memfd < 0)
		return r.status = -EBADMSG, "OPEN must carry the session's memfd";
	if (!proto::ShmLayout::of(o, s->layout) || o.append_batch == 0 || o.max_budget < kept ||
	    o.max_budget > o.max_context)
		return r.status = -EINVAL, "session shape rejected: append batch must be positive, max budget between " +
						   std::to_string(kept) + " (sink + recent tokens) and max context, shared "
									  "memory under 1 TiB";
	struct stat st;
	const int seals = fcntl(memfd, F_GET_SEALS);
	if (fstat(memfd, &st) < 0 || (uint64_t)st.st_size < s->layout.size || seals < 0 || !(seals & F_SEAL_SHRINK))
		return r.status = -EINVAL, "the session memfd must be at least " + std::to_string(s->layout.size) +
						   " bytes and sealed against shrinking (F_SEAL_SHRINK)";
	if (sessions_.size() >= cfg_.max_sessions || free_regions_.empty())
		return r.status = -EBUSY, "llmcached serves its maximum of " + std::to_string(sessions_.size()) +
						  " sessions: close one or raise kv-max-sessions";
	void *m = mmap(nullptr, s->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (m == MAP_FAILED)
		return r.status = -errno, "cannot map the session memfd: " + errstr(errno);
	s->shm = static_cast<uint8_t *>(m);
	s->region = free_regions_.back();
	free_regions_.pop_back();
	std::string err;
	if ((r.status = open_store(*s, err))) {
		munmap(s->shm, s->layout.size);
		free_regions_.push_back(s->region);
		return err;
	}
	s->id = next_id_++;
	r.session = s->id;
	log("session " + std::to_string(s->id) + " opened by uid " + std::to_string(c.uid) + " pid " +
	    std::to_string(c.pid) + " (" + std::to_string(o.layers) + " layers, backend " + s->kv->backend_name() + ")" +
	    (s->kv->backend_note().empty() ? "" : "; " + s->kv->backend_note()));
	sessions_.push_back(std::move(s));
	return {};
}

std::string Server::status(const Conn &c) const
{
	std::string out;
	for (const auto &s : sessions_) {
		if (c.uid != 0 && s->uid != c.uid)
			continue;
		const KvStats st = s->kv->stats();
		out += "session " + std::to_string(s->id) + " uid " + std::to_string(s->uid) + " pid " + std::to_string(s->pid) +
		       " backend " + s->kv->backend_name() + " tokens " + std::to_string(s->kv->tokens(0)) + " cpu_bytes " +
		       std::to_string(st.cpu_bytes) + " spilled_pages " + std::to_string(st.spilled_pages) +
		       " bytes_written " + std::to_string(st.storage.bytes_written) + " bytes_read " +
		       std::to_string(st.storage.bytes_read) + " partial_reads " + std::to_string(st.storage.runs_read) + " selects " + std::to_string(st.selects) + " promoted_pages " +
		       std::to_string(st.promoted_pages) + " beta " + std::to_string(st.beta()) + "\n";
	}
	return out;
}

} // namespace llmcache::kv
