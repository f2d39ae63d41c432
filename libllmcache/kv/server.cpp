// SPDX-License-Identifier: MIT
#include "kv/server.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
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
#include <system_error>

namespace llmcache::kv {

static std::string errstr(int e) { return std::strerror(e < 0 ? -e : e); }

namespace {

// Keys of the epoll events that are not connections (connections count from 3).
constexpr uint64_t KEY_STOP = 0, KEY_LISTEN = 1, KEY_DONE = 2;

// The KV device must take the writes of a spill: opened as the pool will open it (read-write, direct
// I/O), so that a read-only, immutable or unsuitable device is refused at start-up, not at the first
// spill. Returns 0 and its size, or -errno with err naming the device, the cause and the fix.
int probe_device(const std::string &dev, uint64_t &size, std::string &err)
{
	const int fd = ::open(dev.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		const int e = errno;
		if (e == EISDIR)
			err = "the KV device " + dev + " is a directory: kv-device takes a block device or a regular file";
		else if (e == EACCES || e == EPERM || e == EROFS || e == ETXTBSY)
			err = "the KV device " + dev + " is not writable (" + errstr(e) +
			      "): llmcached spills the KV to it; make it writable by llmcached's user (chattr -i if it is "
			      "immutable, a read-write mount) or choose another kv-device";
		else if (e == EINVAL)
			err = "the KV device " + dev + " does not support direct I/O (tmpfs?): put the file on ext4 or xfs, "
			      "or use a block device";
		else
			err = "cannot open the KV device " + dev + ": " + errstr(e) +
			      "; create it or fix kv-device in the configuration";
		return -e;
	}
	struct stat st;
	int r = 0;
	size = 0;
	if (fstat(fd, &st) < 0)
		r = -errno, err = "cannot stat the KV device " + dev + ": " + errstr(errno);
	else if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &size) < 0)
		r = -errno, err = "cannot read the size of the KV device " + dev + ": " + errstr(errno);
	else if (S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	else if (!S_ISBLK(st.st_mode))
		r = -ENODEV, err = "the KV device " + dev + " is neither a block device nor a regular file";
	close(fd);
	return r;
}

} // namespace

int Server::open(const ServerConfig &cfg, std::unique_ptr<Server> &out, std::string &err)
{
	std::unique_ptr<Server> s(new Server());
	s->cfg_ = cfg;
	uint64_t regions = cfg.max_sessions;
	if (cfg.session_device_bytes < 2 * SLAB_ALIGN || cfg.session_device_bytes % SLAB_ALIGN) {
		err = "kv-session-device-bytes must be a multiple of 4096 and at least 8192";
		return -EINVAL;
	}
	if (!cfg.kv.device.empty()) {
		uint64_t size = 0;
		if (int r = probe_device(cfg.kv.device, size, err))
			return r;
		regions = std::min<uint64_t>(regions, size / cfg.session_device_bytes);
		if (regions == 0) {
			err = "the KV device " + cfg.kv.device + " (" + std::to_string(size) +
			      " bytes) is smaller than one session region of " + std::to_string(cfg.session_device_bytes) +
			      " bytes: lower kv-session-device-bytes or use a larger device";
			return -ENOSPC;
		}
	}
	s->regions_ = (uint32_t)regions;
	for (int r = (int)regions; r-- > 0;)
		s->free_regions_.push_back(r);
	// Every connection is a descriptor: make room for the most the limits allow.
	rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < cfg.max_conns() + 64ull) {
		nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, cfg.max_conns() + 64ull);
		setrlimit(RLIMIT_NOFILE, &nofile);
	}

	// The socket appears at its path only once it listens: bind() creates the file and listen() comes
	// after, so a client that came in between was refused. It is bound and listening under a temporary
	// name beside the path first, then linked into place; link() fails where a file is already there,
	// which is another daemon if it answers, else a leftover to replace.
	const std::string fresh = cfg.socket_path + "." + std::to_string(getpid());
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	if (fresh.size() >= sizeof(addr.sun_path))
		return err = "socket path " + cfg.socket_path + " is too long", -ENAMETOOLONG;
	std::strcpy(addr.sun_path, fresh.c_str());
	// Only a socket is ever replaced: a file of another kind at the path is somebody's data.
	struct stat st;
	auto not_a_socket = [&] {
		err = cfg.socket_path + " exists and is not a socket: llmcached replaces only a socket a stopped "
					"daemon left; remove it yourself or choose another --socket";
		return -EEXIST;
	};
	if (lstat(cfg.socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
		return not_a_socket();
	s->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->listen_fd_ < 0)
		return err = "cannot create a Unix socket: " + errstr(errno), -errno;
	if (lstat(fresh.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(fresh.c_str()); // a daemon of the same pid died between its bind() and link()
	if (bind(s->listen_fd_, (sockaddr *)&addr, sizeof(addr)) < 0) {
		const int e = errno;
		s->listen_fd_ = (close(s->listen_fd_), -1);
		err = "cannot bind " + cfg.socket_path + ": " + errstr(e) + " (does its directory exist and is it writable?)";
		return -e;
	}
	chmod(fresh.c_str(), 0666); // any local user may connect; peer credentials isolate them
	const auto unpublished = [&](int e, std::string why) {
		unlink(fresh.c_str());
		err = std::move(why);
		return -e;
	};
	if (listen(s->listen_fd_, 64) < 0) {
		const int e = errno;
		return unpublished(e, "cannot listen on " + cfg.socket_path + ": " + errstr(e));
	}
	int linked = link(fresh.c_str(), cfg.socket_path.c_str());
	if (linked < 0 && errno == EEXIST) {
		std::strcpy(addr.sun_path, cfg.socket_path.c_str());
		const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		const bool alive = connect(probe, (sockaddr *)&addr, sizeof(addr)) == 0;
		close(probe);
		if (alive)
			return unpublished(EADDRINUSE, "another llmcached is listening on " + cfg.socket_path + ": stop it first");
		if (lstat(cfg.socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
			not_a_socket();
			return unpublished(EEXIST, err);
		}
		unlink(cfg.socket_path.c_str());
		linked = link(fresh.c_str(), cfg.socket_path.c_str());
	}
	if (linked < 0) {
		const int e = errno;
		return unpublished(e, "cannot create " + cfg.socket_path + ": " + errstr(e));
	}
	unlink(fresh.c_str());
	s->bound_ = true;
	s->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
	s->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->done_ = std::make_shared<Completions>();
	s->done_->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->epoll_fd_ < 0 || s->stop_fd_ < 0 || s->done_->fd < 0)
		return err = "cannot create the event loop: " + errstr(errno), -errno;
	for (auto [fd, key] : {std::pair{s->listen_fd_, KEY_LISTEN}, {s->stop_fd_, KEY_STOP}, {cfg.stop_fd, KEY_STOP},
			       {s->done_->fd, KEY_DONE}}) {
		epoll_event ev{EPOLLIN, {.u64 = key}};
		if (fd >= 0 && epoll_ctl(s->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0)
			return err = "cannot create the event loop: " + errstr(errno), -errno;
	}
	out = std::move(s);
	return 0;
}

static int ms_until(std::chrono::steady_clock::time_point t)
{
	const auto d = std::chrono::ceil<std::chrono::milliseconds>(t - std::chrono::steady_clock::now()).count();
	return (int)std::clamp<long long>(d, 0, 1 << 30);
}

Server::~Server()
{
	// Nobody is answered any more: the socket and the connections go first, then every session is
	// closed by its worker. A worker held by a stalled device past SHUTDOWN_WAIT is left to the
	// process's exit with its session, which is never freed under it (server.hpp).
	if (listen_fd_ >= 0)
		close(listen_fd_);
	if (bound_)
		unlink(cfg_.socket_path.c_str());
	for (const auto &[id, c] : conns_)
		close(c.fd);
	conns_.clear();
	for (auto &s : sessions_)
		if (!s->closing)
			close_session(*s, 0, 0);
	const auto deadline = Clock::now() + SHUTDOWN_WAIT;
	while (!sessions_.empty()) {
		pollfd p{done_->fd, POLLIN, 0};
		const int n = poll(&p, 1, ms_until(deadline));
		if (n > 0)
			complete();
		else if (n == 0 || errno != EINTR)
			break;
	}
	if (!sessions_.empty()) {
		log(std::to_string(sessions_.size()) + " sessions still wait for their device after " +
		    std::to_string(SHUTDOWN_WAIT.count()) + " s: llmcached leaves them to its exit");
		for (auto &s : sessions_) {
			s->worker.detach();
			(void)s.release(); // its worker may still use it
		}
		sessions_.clear();
	}
	push_stats(); // the last word: no sessions, the counters of all

	for (int fd : {epoll_fd_, stop_fd_})
		if (fd >= 0)
			close(fd);
}

Server::Completions::~Completions()
{
	if (fd >= 0)
		close(fd);
}

void Server::Completions::post(Done &&d)
{
	{
		std::lock_guard l(m);
		done.push_back(std::move(d));
	}
	const uint64_t one = 1;
	(void)!write(fd, &one, sizeof(one));
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
		if (s->seen.store) {
			add_stats(total, s->seen.stats, true);
			beta = std::max(beta, s->seen.beta);
		}
	std::string err;
	if (feed_.push(kernel_stats(total, (uint32_t)sessions_.size(), beta, cfg_.kv.backend != "none"), err) < 0)
		log(err);
}

int Server::run()
{
	epoll_event evs[32];
	// With the kernel module loaded, the statistics go to /sys/kernel/llmcache/kv/ about once a second.
	if (feed_.open())
		push_stats();
	auto pushed = Clock::now();
	for (;;) {
		if (feed_.active() && Clock::now() - pushed >= std::chrono::seconds(1)) {
			push_stats();
			pushed = Clock::now();
		}
		int timeout = feed_.active() ? 1000 : -1;
		auto sooner = [&](int ms) { timeout = timeout < 0 ? ms : std::min(timeout, ms); };
		if (const int next = expire_clients(); next >= 0)
			sooner(next);
		if (listen_paused_until_ != Clock::time_point{}) {
			if (Clock::now() >= listen_paused_until_) {
				epoll_event ev{EPOLLIN, {.u64 = KEY_LISTEN}};
				epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
				listen_paused_until_ = {};
			} else {
				sooner(ms_until(listen_paused_until_));
			}
		}
		const int n = epoll_wait(epoll_fd_, evs, 32, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (int i = 0; i < n; i++) {
			const uint64_t key = evs[i].data.u64;
			const uint32_t e = evs[i].events;
			if (key == KEY_STOP)
				return 0;
			if (key == KEY_LISTEN) {
				accept_one();
				continue;
			}
			if (key == KEY_DONE) {
				complete();
				continue;
			}
			auto it = conns_.find(key);
			if (it == conns_.end()) // dropped earlier in this batch
				continue;
			if (e & EPOLLOUT) {
				flush(it->second);
				if ((it = conns_.find(key)) == conns_.end())
					continue;
			}
			if ((e & EPOLLIN) && it->second.out.empty() && !it->second.busy)
				serve(it->second);
			else if ((e & (EPOLLHUP | EPOLLERR)) && !(e & EPOLLOUT))
				drop_conn(key);
		}
	}
}

int Server::expire_clients()
{
	const auto limit = std::chrono::milliseconds(cfg_.client_timeout_ms);
	const auto now = Clock::now();
	int next = -1;
	std::vector<uint64_t> late;
	for (const auto &[id, c] : conns_) {
		if (c.out.empty())
			continue;
		if (now - c.blocked_since >= limit) {
			late.push_back(id);
			continue;
		}
		const int ms = ms_until(c.blocked_since + limit);
		next = next < 0 ? ms : std::min(next, ms);
	}
	for (uint64_t id : late)
		drop_conn(id, "it has not read its replies for " + std::to_string(cfg_.client_timeout_ms) +
				      " ms (kv-client-timeout)");
	return next;
}

void Server::accept_one()
{
	const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
	const auto now = Clock::now();
	// Refusals are logged at most once a second: a client must not flood the log either.
	auto refuse = [&](const std::string &why) {
		if (now - refusal_logged_ >= std::chrono::seconds(1)) {
			log(why);
			refusal_logged_ = now;
		}
	};
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			// The pending connection stays readable: without a pause the loop would spin on it.
			refuse("cannot accept a client: " + errstr(errno) + "; new connections wait 100 ms");
			epoll_event ev{0, {.u64 = KEY_LISTEN}};
			epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
			listen_paused_until_ = now + std::chrono::milliseconds(100);
		}
		return;
	}
	ucred cred{};
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log("failed to read the peer credentials of a client: " + errstr(errno) + "; connection refused");
		close(fd);
		return;
	}
	const size_t of_uid = (size_t)std::count_if(conns_.begin(), conns_.end(),
						    [&](const auto &kv) { return kv.second.uid == cred.uid; });
	if (conns_.size() >= cfg_.max_conns() || (cred.uid != 0 && of_uid >= cfg_.max_conns_per_uid())) {
		refuse("refused a connection of uid " + std::to_string(cred.uid) + " pid " + std::to_string(cred.pid) + ": " +
		       (conns_.size() >= cfg_.max_conns()
				? "llmcached holds its maximum of " + std::to_string(cfg_.max_conns()) + " connections"
				: "the uid holds its maximum of " + std::to_string(cfg_.max_conns_per_uid()) +
					  " connections (kv-max-sessions-per-uid + 8)"));
		close(fd);
		return;
	}
	const uint64_t id = next_conn_++;
	conns_.emplace(id, Conn{id, fd, cred.uid, cred.pid, {}, {}, false, EPOLLIN});
	epoll_event ev{EPOLLIN, {.u64 = id}};
	epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

// A busy connection is watched for nothing: its next request waits in its socket, and epoll still
// reports a hang-up (EPOLLHUP), which drops it.
void Server::watch(Conn &c)
{
	const uint32_t events = c.busy ? 0u : c.out.empty() ? (uint32_t)EPOLLIN : (uint32_t)EPOLLOUT;
	if (events == c.events)
		return;
	c.events = events;
	epoll_event ev{events, {.u64 = c.id}};
	epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void Server::send_reply(Conn &c, std::string packet)
{
	if (c.out.empty()) {
		if (send(c.fd, packet.data(), packet.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return watch(c);
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return drop_conn(c.id);
		c.blocked_since = Clock::now();
	}
	c.out.push_back(std::move(packet));
	watch(c);
}

void Server::flush(Conn &c)
{
	while (!c.out.empty()) {
		if (send(c.fd, c.out.front().data(), c.out.front().size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				drop_conn(c.id);
			return;
		}
		c.out.pop_front();
		c.blocked_since = Clock::now();
	}
	watch(c);
}

void Server::close_session(Session &s, uint64_t conn, uint32_t seq)
{
	Request q;
	q.type = proto::CLOSE;
	q.seq = seq;
	q.conn = conn;
	{
		std::lock_guard l(s.m);
		s.queue.push_back(q);
	}
	s.cv.notify_one();
	s.closing = true;
}

void Server::free_session(Session &s)
{
	if (s.worker.joinable())
		s.worker.join();
	add_stats(retired_, s.seen.stats, false);
	if (s.shm)
		munmap(s.shm, s.layout.size);
	if (s.region >= 0)
		free_regions_.push_back(s.region);
	sessions_.erase(std::find_if(sessions_.begin(), sessions_.end(), [&](const auto &x) { return x.get() == &s; }));
}

void Server::drop_conn(uint64_t id, const std::string &why)
{
	auto it = conns_.find(id);
	if (it == conns_.end())
		return;
	const Conn &c = it->second;
	if (!why.empty())
		log("dropped the connection of uid " + std::to_string(c.uid) + " pid " + std::to_string(c.pid) + ": " + why);
	// A session whose request is running keeps its worker: the close waits behind the request.
	for (auto &s : sessions_)
		if (s->conn == id && !s->closing)
			close_session(*s, 0, 0);
	epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
	close(c.fd);
	conns_.erase(it);
}

Server::Session *Server::find(uint64_t conn, uint64_t id)
{
	for (auto &s : sessions_)
		if (s->id == id && s->conn == conn && !s->closing)
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
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			drop_conn(c.id);
		return;
	}
	// Every descriptor the message brought is now the daemon's: the one a request may carry is kept,
	// any other closed at once. The control buffer has room for one or two: a client that sent more (up to the
	// kernel's 253, the rest dropped with MSG_CTRUNC) would otherwise leak them into the daemon, a few
	// per message, until it could accept nothing.
	int fd = -1;
	bool extra_fds = false;
	for (cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int got;
			std::memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (fd < 0 && !extra_fds) {
				fd = got;
			} else {
				close(got);
				extra_fds = true;
			}
		}
	}
	if (extra_fds && fd >= 0) {
		close(fd);
		fd = -1;
	}
	if (n == 0) {
		// On SOCK_SEQPACKET both an empty packet and the end of the stream read as 0 bytes: the end
		// only if the peer has shut down. An empty packet is a malformed message like any other.
		pollfd p{c.fd, POLLIN | POLLRDHUP, 0};
		if (poll(&p, 1, 0) < 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			if (fd >= 0)
				close(fd);
			return drop_conn(c.id);
		}
	}
	proto::Reply r{};
	std::string text;
	if (extra_fds || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		r.status = -EBADMSG;
		text = "malformed message: longer than " + std::to_string(sizeof(buf)) +
		       " bytes or with more than one file descriptor";
	} else {
		// No request may take the daemon down: a failed allocation fails the request alone.
		try {
			text = handle(c, buf, (size_t)n, fd, r);
		} catch (const std::bad_alloc &) {
			r = {}, r.status = -ENOMEM, text = "llmcached is out of memory for this request";
		} catch (const std::exception &e) {
			r = {}, r.status = -EIO, text = std::string("llmcached failed this request: ") + e.what();
		}
	}
	if (fd >= 0)
		close(fd); // the session keeps its own mapping
	if (c.busy)
		return watch(c); // at a worker: answered when it is done (complete)
	uint32_t seq = 0;
	if ((size_t)n >= sizeof(proto::Header))
		std::memcpy(&seq, buf + 12, 4);
	reply(c, seq, r, text);
}

void Server::reply(Conn &c, uint32_t seq, const proto::Reply &r, const std::string &text)
{
	proto::Header h{proto::MAGIC, proto::VERSION, proto::REPLY, 0, seq};
	proto::Reply rr = r;
	rr.text_len = (uint32_t)text.size();
	h.length = (uint32_t)(sizeof(rr) + text.size());
	std::string packet(sizeof(h) + sizeof(rr) + text.size(), '\0');
	std::memcpy(packet.data(), &h, sizeof(h));
	std::memcpy(packet.data() + sizeof(h), &rr, sizeof(rr));
	std::memcpy(packet.data() + sizeof(h) + sizeof(rr), text.data(), text.size());
	send_reply(c, std::move(packet));
}

std::string Server::handle(Conn &c, const uint8_t *buf, size_t len, int fd, proto::Reply &r)
{
	proto::Header h;
	std::string err;
	if ((r.status = proto::parse(buf, len, h, err)) < 0)
		return err;
	const uint8_t *p = buf + sizeof(h);
	if (h.type == proto::OPEN || h.type == proto::OPEN_AERP || h.type == proto::OPEN_MEMORY) {
		proto::OpenMemory m{};
		std::memcpy(&m, p, proto::payload_size(h.type)); // parse() checked the length for the type
		return open_session(c, h, m, fd, r);
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
	Session *s = find(c.id, ref.session);
	if (!s)
		return r.status = -ENOENT, "no session " + std::to_string(ref.session) + " on this connection";
	r.session = s->id;
	if (!s->seen.store && h.type != proto::CLOSE && h.type != proto::DROP)
		return r.status = -EIO, "session " + std::to_string(s->id) + " lost its store when a DROP failed: drop or close it";
	if (h.type == proto::CLOSE) {
		close_session(*s, c.id, h.seq);
		c.busy = true;
		return {};
	}
	Request q;
	q.type = h.type;
	q.seq = h.seq;
	q.conn = c.id;
	static_assert(sizeof(q.payload) >= std::max({sizeof(proto::Open), sizeof(proto::Append), sizeof(proto::Select)}));
	std::memcpy(q.payload, p, std::min(sizeof(q.payload), proto::payload_size(h.type)));
	dispatch(c, *s, q);
	return {};
}

void Server::dispatch(Conn &c, Session &s, Request q)
{
	{
		std::lock_guard l(s.m);
		s.queue.push_back(q);
	}
	s.cv.notify_one();
	c.busy = true;
}

void Server::work(Session *s, std::shared_ptr<Completions> done)
{
	for (;;) {
		Done d;
		{
			std::unique_lock l(s->m);
			s->cv.wait(l, [&] { return !s->queue.empty(); });
			d.q = s->queue.front();
			s->queue.pop_front();
		}
		d.s = s;
		// No request may take the daemon down: a failed allocation fails the request alone.
		try {
			execute(*s, d);
		} catch (const std::bad_alloc &) {
			d.r = {}, d.r.status = -ENOMEM, d.text = "llmcached is out of memory for this request";
		} catch (const std::exception &e) {
			d.r = {}, d.r.status = -EIO, d.text = std::string("llmcached failed this request: ") + e.what();
		}
		d.seen = look(s->kv.get()); // for CLOSE: the store's last counters
		d.last = d.q.type == proto::CLOSE || (d.q.type == proto::OPEN && d.r.status);
		if (d.last)
			s->kv.reset();
		const bool last = d.last;
		done->post(std::move(d));
		if (last)
			return;
	}
}

Server::Seen Server::look(const KvStore *kv)
{
	Seen v;
	if (kv) {
		v.store = true;
		v.stats = kv->stats();
		v.tokens = kv->tokens(0);
		v.beta = kv->beta();
		v.backend = kv->backend_name();
	}
	return v;
}

// On the session's worker: the request's work on the store and the session's shared memory.
void Server::execute(Session &s, Done &d)
{
	proto::Reply &r = d.r;
	const uint8_t *p = d.q.payload;
	std::string err;
	r.session = s.id;
	auto open_store = [&] {
		KvShape shape{s.shape.layers, s.shape.q_heads, s.shape.kv_heads, s.shape.head_dim, s.shape.dtype,
			      s.shape.max_context};
		if (!s.aerp || !s.opts.aerp.d_model)
			return KvStore::open(shape, s.opts, s.kv, err);
		// The store keeps its own copy of W_K and W_V, taken from the shared memory as the client left it.
		KvOptions o = s.opts;
		const size_t n = (size_t)shape.layers * o.aerp.d_model * shape.kv_heads * shape.head_dim;
		o.aerp.w_k.resize(n);
		o.aerp.w_v.resize(n);
		std::memcpy(o.aerp.w_k.data(), s.shm + s.layout.w_k, 4 * n);
		std::memcpy(o.aerp.w_v.data(), s.shm + s.layout.w_v, 4 * n);
		return KvStore::open(shape, o, s.kv, err);
	};
	auto failed = [&](const char *request, const std::string &why) {
		d.failed = request;
		d.why = why;
		d.text = why;
	};
	switch (d.q.type) {
	case proto::OPEN:
		if ((r.status = open_store()))
			r.session = 0, d.text = err;
		else
			d.note = s.kv->backend_note();
		return;
	case proto::CLOSE:
		return; // work() ends the store
	case proto::DROP:
		s.kv.reset();
		if ((r.status = open_store()))
			failed("DROP", err);
		return;
	}
	if (!s.kv) {
		r.status = -EIO;
		d.text = "session " + std::to_string(s.id) + " lost its store when a DROP failed: drop or close it";
		return;
	}
	const uint64_t row = s.kv->row_bytes();
	switch (d.q.type) {
	case proto::APPEND:
	case proto::APPEND_X: {
		proto::Append a;
		std::memcpy(&a, p, sizeof(a));
		const bool with_x = d.q.type == proto::APPEND_X;
		if (with_x && (!s.aerp || !s.opts.aerp.d_model)) {
			r.status = -EINVAL;
			d.text = "append with input vectors to a session that does not recompute: open it with "
				 "llmcache_kv_open_aerp and d_model > 0";
			return;
		}
		const uint64_t x_row = (uint64_t)s.opts.aerp.d_model * csd_dtype_bytes(s.shape.dtype);
		if (a.n_tokens > s.shape.append_batch || a.layer >= s.shape.layers) {
			r.status = -EINVAL;
			d.text = "append of " + std::to_string(a.n_tokens) + " tokens to layer " + std::to_string(a.layer) +
				 ": the session allows " + std::to_string(s.shape.append_batch) + " tokens per append and " +
				 std::to_string(s.shape.layers) + " layers";
			return;
		}
		// A token whose spill failed is stored (with the error); one the store refused is not, and the
		// ones after it in the batch are not tried: they would take its position.
		uint32_t stored = 0;
		for (uint32_t t = 0; t < a.n_tokens; t++) {
			const uint32_t before = s.kv->tokens(a.layer);
			const int e = s.kv->append(a.layer, s.shm + s.layout.in_k + t * row, s.shm + s.layout.in_v + t * row,
						   with_x ? s.shm + s.layout.in_x + t * x_row : nullptr);
			if (e < 0 && r.status == 0) {
				r.status = e;
				err = s.kv->error();
			}
			if (s.kv->tokens(a.layer) == before)
				break;
			stored++;
		}
		r.count = stored;
		if (r.status)
			failed("APPEND", err);
		return;
	}
	case proto::SELECT:
	case proto::SELECT_BEGIN:
	case proto::SELECT_END: {
		KvSelection sel;
		if (d.q.type != proto::SELECT_END) {
			proto::Select q;
			std::memcpy(&q, p, sizeof(q));
			if (q.budget > s.shape.max_budget) {
				r.status = -EINVAL;
				d.text = "select budget " + std::to_string(q.budget) + " above the session's " +
					 std::to_string(s.shape.max_budget);
				return;
			}
			if ((r.status = s.kv->select_begin(q.layer, reinterpret_cast<const float *>(s.shm + s.layout.q),
							   q.budget)))
				return failed("SELECT", s.kv->error());
			if (d.q.type == proto::SELECT_BEGIN)
				return;
		}
		if ((r.status = s.kv->select_end(sel)))
			return failed("SELECT", s.kv->error());
		const size_t n = sel.positions.size();
		if (n) {
			std::memcpy(s.shm + s.layout.positions, sel.positions.data(), 4 * n);
			std::memcpy(s.shm + s.layout.out_k, sel.k.data(), n * row);
			std::memcpy(s.shm + s.layout.out_v, sel.v.data(), n * row);
			if (s.aerp)
				std::memcpy(s.shm + s.layout.heads, sel.heads.data(), n * s.shape.kv_heads);
		}
		// The memory's readout is there whatever the count: a select may return no token and still read it.
		if (s.memory && sel.memory_state.size() == s.shape.q_heads &&
		    sel.memory.size() == (size_t)s.shape.q_heads * s.shape.head_dim) {
			std::memcpy(s.shm + s.layout.memory, sel.memory.data(), 4 * sel.memory.size());
			std::memcpy(s.shm + s.layout.memory_state, sel.memory_state.data(), sel.memory_state.size());
		}
		r.count = (uint32_t)n;
		return;
	}
	}
	r.status = -EBADMSG, d.text = "unhandled message type";
}

// On the loop: each finished request's state is taken in, logged, and answered if its connection is
// still there; a session whose worker ended is freed.
void Server::complete()
{
	uint64_t n;
	(void)!read(done_->fd, &n, sizeof(n));
	std::vector<Done> batch;
	{
		std::lock_guard l(done_->m);
		batch.swap(done_->done);
	}
	for (Done &d : batch) {
		Session &s = *d.s;
		s.seen = d.seen;
		if (d.failed)
			log_failure(s, d.failed, d.r.status, d.why);
		if (d.q.type == proto::OPEN && d.r.status == 0) {
			log("session " + std::to_string(s.id) + " opened by uid " + std::to_string(s.uid) + " pid " +
			    std::to_string(s.pid) + " (" + std::to_string(s.shape.layers) + " layers, backend " +
			    s.seen.backend + ")" + (d.note.empty() ? "" : "; " + d.note));
		} else if (d.q.type == proto::OPEN) {
			// The store could not open its part of the device (gone, failing): the administrator needs to
			// know as much as the client. At most a line a second, so that a client retrying cannot flood.
			if (const auto now = Clock::now(); now - open_failure_logged_ >= std::chrono::seconds(1)) {
				log("OPEN by uid " + std::to_string(s.uid) + " pid " + std::to_string(s.pid) +
				    " failed: " + d.text);
				open_failure_logged_ = now;
			}
		}
		if (d.last)
			free_session(s);
		if (!d.q.conn)
			continue;
		auto it = conns_.find(d.q.conn);
		if (it == conns_.end())
			continue; // gone while the request ran
		it->second.busy = false;
		reply(it->second, d.q.seq, d.r, d.text);
	}
}

// A session's failures reach its client only, and an engine may not show them: a failing KV device
// was invisible in the daemon's log (found by tests/vm/kv-fault-check.sh). The store's messages name
// the device, the byte offset and the cause. At most one line per session a second, since a failing
// device fails every append that tries to spill; the failures held back are counted in the next line.
void Server::log_failure(Session &s, const char *request, int status, const std::string &why)
{
	if (status == -EINVAL || status == -EBUSY)
		return; // the caller's mistake, answered to the caller
	const auto now = Clock::now();
	if (s.error_logged != Clock::time_point{} && now - s.error_logged < std::chrono::seconds(1)) {
		s.errors_held++;
		return;
	}
	log("session " + std::to_string(s.id) + ": " + request + " failed: " + why +
	    (s.errors_held ? " (" + std::to_string(s.errors_held) + " more failed requests since the last line)" : ""));
	s.error_logged = now;
	s.errors_held = 0;
}

std::string Server::open_session(Conn &c, const proto::Header &h, const proto::OpenMemory &om, int memfd, proto::Reply &r)
{
	const proto::OpenAerp &a = om.aerp;
	const proto::Open &o = a.open;
	const bool memory = h.type == proto::OPEN_MEMORY, aerp = memory || h.type == proto::OPEN_AERP;
	auto s = std::make_unique<Session>();
	s->conn = c.id;
	s->uid = c.uid;
	s->pid = c.pid;
	s->shape = o;
	const uint32_t kept = cfg_.kv.sink_tokens + cfg_.kv.recent_tokens;
	if (memfd < 0)
		return r.status = -EBADMSG, "OPEN must carry the session's memfd";
	// The shape first, field by field: everything else is sized from it.
	std::string err;
	if ((r.status = KvStore::check_shape({o.layers, o.q_heads, o.kv_heads, o.head_dim, o.dtype, o.max_context}, err)))
		return err;
	if (o.append_batch == 0 || o.append_batch > o.max_context)
		return r.status = -EINVAL, "invalid session shape: append_batch " + std::to_string(o.append_batch) +
						   ": must be 1-max_context (" + std::to_string(o.max_context) + ")";
	if (o.max_budget < kept || o.max_budget > o.max_context)
		return r.status = -EINVAL, "invalid session shape: max_budget " + std::to_string(o.max_budget) +
						   ": must be between this daemon's kv-sink-tokens + kv-recent-tokens (" +
						   std::to_string(kept) + ") and max_context (" + std::to_string(o.max_context) + ")";
	if (aerp && !a.budget)
		return r.status = -EINVAL, "invalid AERP session: budget 0; give the tokens each KV head keeps";
	if (aerp && a.d_model > KvStore::MAX_D_MODEL)
		return r.status = -EINVAL, "invalid AERP session: d_model " + std::to_string(a.d_model) + ": must be 0-" +
						   std::to_string(KvStore::MAX_D_MODEL);
	if (memory && om.route_threshold >= o.max_context)
		return r.status = -EINVAL, "invalid compressed-memory session: route threshold " +
						   std::to_string(om.route_threshold) + ": must be below max_context (" +
						   std::to_string(o.max_context) + "), or the memory is never read";
	if (!(memory ? proto::ShmLayout::of(om, s->layout)
	      : aerp ? proto::ShmLayout::of(a, s->layout)
		     : proto::ShmLayout::of(o, s->layout)))
		return r.status = -EINVAL, "invalid session shape: its shared memory would exceed 1 TiB";
	struct stat st;
	const int seals = fcntl(memfd, F_GET_SEALS);
	if (fstat(memfd, &st) < 0 || (uint64_t)st.st_size < s->layout.size || seals < 0 || !(seals & F_SEAL_SHRINK))
		return r.status = -EINVAL, "the session memfd must be at least " + std::to_string(s->layout.size) +
						   " bytes and sealed against shrinking (F_SEAL_SHRINK)";
	const size_t of_uid = (size_t)std::count_if(sessions_.begin(), sessions_.end(), [&](const auto &x) { return x->uid == c.uid; });
	if (sessions_.size() >= cfg_.max_sessions)
		return r.status = -EBUSY, "llmcached serves its maximum of " + std::to_string(cfg_.max_sessions) +
						  " sessions: close one or raise kv-max-sessions";
	if (c.uid != 0 && of_uid >= cfg_.max_sessions_per_uid)
		return r.status = -EBUSY, "uid " + std::to_string(c.uid) + " holds its maximum of " +
						  std::to_string(cfg_.max_sessions_per_uid) +
						  " sessions: close one, or raise kv-max-sessions-per-uid";
	if (free_regions_.empty())
		return r.status = -ENOSPC, "the KV device " + cfg_.kv.device + " holds " + std::to_string(regions_) +
						   " session regions of " + std::to_string(cfg_.session_device_bytes) +
						   " bytes and all are in use: close a session, lower kv-session-device-bytes "
						   "or use a larger device";
	sessions_.reserve(sessions_.size() + 1); // once the worker runs, nothing may throw
	void *m = mmap(nullptr, s->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (m == MAP_FAILED)
		return r.status = -errno, "cannot map the session memfd: " + errstr(errno);
	s->shm = static_cast<uint8_t *>(m);
	s->region = free_regions_.back();
	s->opts = cfg_.kv;
	if (aerp) { // memory only (kv.md, "Kelle's eviction and recomputation"); traced like any session with --kv-trace
		s->aerp = true;
		s->opts.device.clear();
		s->opts.planes = {}; // nothing spills: no planes
		s->opts.aerp.budget = a.budget;
		s->opts.aerp.d_model = a.d_model;
		s->memory = memory;
		s->opts.memory = {memory, om.route_threshold};
	}
	if (!s->opts.device.empty()) {
		s->opts.device_offset = (uint64_t)s->region * cfg_.session_device_bytes;
		s->opts.device_capacity = cfg_.session_device_bytes;
	}
	// The store is opened, used and closed on the session's own thread (server.hpp). Signals stay
	// with the loop's thread: the worker starts with all of them blocked.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	try {
		s->worker = std::thread(work, s.get(), done_);
	} catch (const std::system_error &e) {
		r.status = e.code().value() ? -e.code().value() : -EAGAIN;
		err = std::string("cannot start the session's thread: ") + e.what();
	}
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	if (r.status) {
		munmap(s->shm, s->layout.size);
		return err;
	}
	free_regions_.pop_back();
	s->id = next_id_++;
	if (!s->opts.trace.empty()) // one KV trace per session: FILE.ID (the worker opens it with the store)
		s->opts.trace += "." + std::to_string(s->id);
	Request q;
	q.type = proto::OPEN;
	q.seq = h.seq;
	q.conn = c.id;
	Session &ref = *s;
	sessions_.push_back(std::move(s));
	dispatch(c, ref, q);
	return {};
}

std::string Server::status(const Conn &c) const
{
	std::string out;
	for (const auto &s : sessions_) {
		if ((c.uid != 0 && s->uid != c.uid) || !s->seen.store || s->closing)
			continue;
		const KvStats &st = s->seen.stats;
		out += "session " + std::to_string(s->id) + " uid " + std::to_string(s->uid) + " pid " + std::to_string(s->pid) +
		       " backend " + s->seen.backend + " tokens " + std::to_string(s->seen.tokens) + " cpu_bytes " +
		       std::to_string(st.cpu_bytes) + " spilled_pages " + std::to_string(st.spilled_pages) + " clean_spills " +
		       std::to_string(st.clean_spills) + " bytes_written " + std::to_string(st.storage.bytes_written) + " bytes_read " +
		       std::to_string(st.storage.bytes_read) + " partial_reads " + std::to_string(st.storage.runs_read) + " selects " + std::to_string(st.selects) + " promoted_pages " +
		       std::to_string(st.promoted_pages) + " beta " + std::to_string(st.beta());
		if (s->aerp)
			out += " aerp_tokens " + std::to_string(st.aerp_tokens) + " aerp_x_tokens " + std::to_string(st.aerp_x_tokens) +
			       " aerp_bytes " + std::to_string(st.aerp_bytes) + " aerp_evicted_tokens " +
			       std::to_string(st.aerp_evicted_tokens) + " aerp_recomputed " + std::to_string(st.aerp_recomputed);
		if (s->memory)
			out += " memory_folded " + std::to_string(st.memory_folded) + " memory_bytes " +
			       std::to_string(st.memory_bytes) + " memory_reads " + std::to_string(st.memory_reads) +
			       " memory_short " + std::to_string(st.memory_short);
		if (s->opts.write_through && !s->aerp)
			out += " written_through " + std::to_string(st.written_through) + " write_through_failures " +
			       std::to_string(st.write_through_failures);
		if (s->opts.planes.on)
			out += " plane_high_rows " + std::to_string(st.plane_high_rows) + " plane_full_rows " +
			       std::to_string(st.plane_full_rows);
		out += "\n";
	}
	return out;
}

} // namespace llmcache::kv
