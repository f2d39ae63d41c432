// SPDX-License-Identifier: MIT
/*
 * The KV service behind llmcached: a Unix SOCK_SEQPACKET socket, one epoll loop, one KvStore per
 * session. Each connection's peer credentials (SO_PEERCRED) are taken at accept; a session belongs to
 * the connection that opened it and dies with it, so a client can reach only its own sessions, and
 * STATUS lists only the sessions of the caller's uid (root sees all). Each session gets its own region
 * of the storage device. Tensors move through the session's sealed memfd (protocol.hpp).
 */
#pragma once
#include "kv/kernel_stats.hpp"
#include "kv/kv_store.hpp"
#include "kv/protocol.hpp"

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmcache::kv {

struct ServerConfig {
	std::string socket_path = "/run/llmcached/llmcached.sock";
	KvOptions kv;				      // every session's options; device regions are assigned
	uint64_t session_device_bytes = 1ull << 30; // storage region per session
	uint32_t max_sessions = 64;
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

private:
	struct Conn {
		int fd;
		uid_t uid;
		pid_t pid;
	};
	struct Session {
		uint64_t id;
		int conn;
		uid_t uid;
		pid_t pid;
		proto::Open shape;
		proto::ShmLayout layout;
		uint8_t *shm = nullptr;
		int region = -1;
		std::unique_ptr<KvStore> kv;
	};
	Server() = default;
	void accept_one();
	void serve(Conn &c);
	void drop_conn(int fd);
	void free_session(size_t i);
	Session *find(int conn, uint64_t id);
	std::string handle(Conn &c, const uint8_t *buf, size_t len, int fd, proto::Reply &r);
	std::string open_session(Conn &c, const proto::Open &o, int memfd, proto::Reply &r);
	int open_store(Session &s, std::string &err);
	std::string status(const Conn &c) const;
	void push_stats(); // to /sys/kernel/llmcache/kv/ through the module, when it is loaded

	ServerConfig cfg_;
	int listen_fd_ = -1, epoll_fd_ = -1, stop_fd_ = -1;
	bool bound_ = false; // the socket file is ours to remove
	std::vector<Conn> conns_;
	std::vector<std::unique_ptr<Session>> sessions_;
	std::vector<int> free_regions_;
	uint64_t next_id_ = 1;
	KernelStatsFeed feed_;
	KvStats retired_; // counters of closed sessions
};

} // namespace llmcache::kv
