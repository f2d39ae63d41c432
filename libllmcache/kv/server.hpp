// SPDX-License-Identifier: MIT
/*
 * The KV service behind llmcached: a Unix SOCK_SEQPACKET socket, one epoll loop, one KvStore per
 * session. Each connection's peer credentials (SO_PEERCRED) are taken at accept; a session belongs to
 * the connection that opened it and dies with it, so a client can reach only its own sessions, and
 * STATUS lists only the sessions of the caller's uid (root sees all). Each session gets its own region
 * of the storage device. Tensors move through the session's sealed memfd (protocol.hpp).
 *
 * The socket is open to every local user, so no client may stall another or take more than its share
 * (Documentation/security.md):
 *  - Replies are sent without blocking. A reply the client's socket cannot take yet waits in the
 *    connection's queue, and the connection's requests are not read until it has left: the queue
 *    holds at most one reply, and a client that floods requests without reading only fills its own
 *    socket. A client whose reply has waited client_timeout_ms is dropped with its sessions.
 *  - One request per ready connection per turn of the loop: a flooding client gets its turn, no more.
 *  - A uid other than root holds at most max_sessions_per_uid sessions (so as many CPU budgets and
 *    device regions) and max_conns_per_uid() connections.
 */
#pragma once
#include "kv/kernel_stats.hpp"
#include "kv/kv_store.hpp"
#include "kv/protocol.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmcache::kv {

struct ServerConfig {
	std::string socket_path = "/run/llmcached/llmcached.sock";
	KvOptions kv;				      // every session's options; device regions are assigned
	uint64_t session_device_bytes = 1ull << 30; // storage region per session
	uint32_t max_sessions = 64;
	uint32_t max_sessions_per_uid = 16; // for every uid but root
	uint32_t client_timeout_ms = 5000;  // a reply unread this long drops its client
	int stop_fd = -1; // optional: an eventfd the caller owns; readable = stop (as stop() does)
	// Connections a uid other than root may hold: its sessions, and a few for status queries.
	uint32_t max_conns_per_uid() const { return max_sessions_per_uid + 8; }
	uint32_t max_conns() const { return 2 * max_sessions + 64; }
};

class Server {
public:
	static int open(const ServerConfig &cfg, std::unique_ptr<Server> &out, std::string &err);
	~Server();
	int run();   // serves until stop(); 0, or -errno if the loop itself failed
	void stop(); // async-signal-safe
	std::function<void(const std::string &)> log = [](const std::string &) {};
	// Answers PAGECACHE_STATUS (llmcached --mode=bpf); unset, the request gets -ENOTSUP.
	std::function<std::string()> pagecache_status;
	size_t sessions() const { return sessions_.size(); }
	uint32_t regions() const { return regions_; } // session regions on the device (max_sessions without one)

private:
	using Clock = std::chrono::steady_clock;
	struct Conn {
		uint64_t id; // epoll's key: fd numbers are reused, ids never
		int fd;
		uid_t uid;
		pid_t pid;
		std::deque<std::string> out; // replies the socket did not take yet (at most one)
		Clock::time_point blocked_since;
	};
	struct Session {
		uint64_t id;
		uint64_t conn;
		uid_t uid;
		pid_t pid;
		proto::Open shape;
		proto::ShmLayout layout;
		uint8_t *shm = nullptr;
		int region = -1;
		std::unique_ptr<KvStore> kv;
		Clock::time_point error_logged{}; // the last log line about this session's failures
		uint64_t errors_held = 0;	  // failures since then, not logged (log_failure)
	};
	Server() = default;
	void accept_one();
	void serve(Conn &c);
	void send_reply(Conn &c, std::string packet);
	void flush(Conn &c);
	void watch(const Conn &c);		      // EPOLLIN while its queue is empty, else EPOLLOUT
	int expire_clients();			      // drops clients past their deadline; ms to the next one, or -1
	void drop_conn(uint64_t id, const std::string &why = {});
	void free_session(size_t i);
	Session *find(uint64_t conn, uint64_t id);
	std::string handle(Conn &c, const uint8_t *buf, size_t len, int fd, proto::Reply &r);
	std::string open_session(Conn &c, const proto::Open &o, int memfd, proto::Reply &r);
	int open_store(Session &s, std::string &err);
	// Logs a failed request of a session unless it was the caller's mistake (-EINVAL, -EBUSY).
	void log_failure(Session &s, const char *request, int status, const std::string &why);
	std::string status(const Conn &c) const;
	void push_stats(); // to /sys/kernel/llmcache/kv/ through the module, when it is loaded

	ServerConfig cfg_;
	int listen_fd_ = -1, epoll_fd_ = -1, stop_fd_ = -1;
	bool bound_ = false; // the socket file is ours to remove
	std::map<uint64_t, Conn> conns_;
	uint64_t next_conn_ = 2; // 0 and 1 key the stop and listen fds in epoll
	Clock::time_point listen_paused_until_{}, refusal_logged_{}, open_failure_logged_{};
	std::vector<std::unique_ptr<Session>> sessions_;
	std::vector<int> free_regions_;
	uint32_t regions_ = 0;
	uint64_t next_id_ = 1;
	KernelStatsFeed feed_;
	KvStats retired_; // counters of closed sessions
};

} // namespace llmcache::kv
