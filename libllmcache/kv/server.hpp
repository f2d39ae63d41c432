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
 *  - No session's device I/O runs on the loop. Each session has its own thread, its worker, and its
 *    store lives there: the worker opens it (OPEN), runs every APPEND, SELECT, SELECT_BEGIN/END and
 *    DROP, and destroys it (CLOSE, the connection's end, shutdown), one request at a time in the
 *    order they came. A device that stalls (a suspended device-mapper table, a hung path) holds that
 *    session's worker only: the loop goes on parsing, accepting, answering STATUS and dispatching the
 *    other sessions' requests. The loop reads a connection's next request only once the reply to the
 *    last has been sent, so a connection has one request in progress or one reply queued, never
 *    more; while a request is in progress nothing is read and the client timeout does not run (a
 *    request held by the device is not the client's fault). A finished request comes back to the
 *    loop through an eventfd (Completions), and the loop alone sends the reply, logs, and touches
 *    the sessions list, the connections and the counters.
 *  - Who touches what: the worker alone uses the session's KvStore and the session's shared memory
 *    while a request is queued; the loop alone everything else. STATUS and the sysfs push (push_stats)
 *    read a copy of the store's counters (Seen) that each finished request brings back, so they never
 *    wait for a worker: a session's line shows it as of its last finished request. pagecache_status
 *    runs on the loop as before (the callback's owner needs no locking against the workers).
 *  - A session whose connection goes while its request runs is not freed under its worker: it is
 *    marked closing, a close request is queued behind the running one, the finished request's reply
 *    is dropped, and the session (its memory, its region, its place in the per-uid count) is freed
 *    when the worker has destroyed the store and ended. Until then it counts against its uid's limit,
 *    since it still holds its region and its memory.
 *  - Shutdown (the destructor, after run() returned): the socket is closed and removed, every session
 *    gets a close request, and the daemon waits up to SHUTDOWN_WAIT for the workers. A worker still
 *    held by a stalled device then is left to the process's exit, with its session (never freed under
 *    it), and the log says how many. Workers block every signal, so stop() (async-signal-safe: it
 *    only writes an eventfd) runs on the loop's thread or another, never inside a worker's I/O.
 */
#pragma once
#include "kv/kernel_stats.hpp"
#include "kv/kv_store.hpp"
#include "kv/protocol.hpp"

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
	size_t sessions() const { return sessions_.size(); } // closing ones included
	// How long the destructor waits for the sessions' workers (a stalled device's) before it leaves them.
	static constexpr std::chrono::seconds SHUTDOWN_WAIT{5};
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
		bool busy = false;   // a request of this connection is at a session's worker
		uint32_t events = 0; // what epoll watches for it now
	};
	// A session's store as the loop last saw it: what STATUS and push_stats show.
	struct Seen {
		bool store = false; // false: not open yet, or lost when a DROP failed
		KvStats stats;
		uint32_t tokens = 0; // of layer 0
		double beta = 0;
		const char *backend = "none"; // the backend's name: a literal
	};
	// A request for a session's worker: the header's type and sequence number, the payload, and the
	// connection to answer (0: nobody, for a close the connection's end or shutdown asked for).
	struct Request {
		uint16_t type = 0;
		uint32_t seq = 0;
		uint64_t conn = 0;
		uint8_t payload[32] = {};
	};
	struct Session;
	// A request the worker finished, back to the loop.
	struct Done {
		Session *s = nullptr;
		Request q;
		proto::Reply r{};
		std::string text;
		const char *failed = nullptr; // a failure to log (log_failure): the request's name, and why
		std::string why;
		Seen seen;
		std::string note; // OPEN: the store's fallbacks, for the log
		bool last = false; // the worker has ended: the store is gone (CLOSE, or an OPEN that failed)
	};
	// Finished requests, handed from the workers to the loop: a worker appends and writes the eventfd,
	// the loop reads it and takes them all. Shared, so that a worker left behind at shutdown never
	// touches a freed Server.
	struct Completions {
		std::mutex m;
		std::vector<Done> done;
		int fd = -1;
		~Completions();
		void post(Done &&d);
	};
	struct Session {
		uint64_t id;
		uint64_t conn;
		uid_t uid;
		pid_t pid;
		proto::Open shape;
		proto::ShmLayout layout;
		KvOptions opts; // the daemon's, with this session's device region
		bool aerp = false; // opened by OPEN_AERP: memory only, W_K and W_V in the shared memory
		bool memory = false; // opened by OPEN_MEMORY: AERP with the compressed memory, readouts in the shared memory
		uint8_t *shm = nullptr;
		int region = -1;
		// The loop's: the last state seen, whether it is going, requests given to the worker.
		Seen seen;
		bool closing = false;
		Clock::time_point error_logged{}; // the last log line about this session's failures
		uint64_t errors_held = 0;	  // failures since then, not logged (log_failure)
		// The worker's while a request is queued: the store. The queue itself is under m.
		std::unique_ptr<KvStore> kv;
		std::mutex m;
		std::condition_variable cv;
		std::deque<Request> queue;
		std::thread worker;
	};
	Server() = default;
	void accept_one();
	void serve(Conn &c);
	void reply(Conn &c, uint32_t seq, const proto::Reply &r, const std::string &text);
	void send_reply(Conn &c, std::string packet);
	void flush(Conn &c);
	void watch(Conn &c); // EPOLLIN while idle, EPOLLOUT while a reply waits, nothing while busy
	int expire_clients(); // drops clients past their deadline; ms to the next one, or -1
	void drop_conn(uint64_t id, const std::string &why = {});
	void close_session(Session &s, uint64_t conn, uint32_t seq); // queues its end; conn answered then
	void free_session(Session &s); // once its worker has ended
	Session *find(uint64_t conn, uint64_t id);
	std::string handle(Conn &c, const uint8_t *buf, size_t len, int fd, proto::Reply &r);
	// OPEN, OPEN_AERP or OPEN_MEMORY (h.type): the fields the type has are set in om, the others are zero.
	std::string open_session(Conn &c, const proto::Header &h, const proto::OpenMemory &om, int memfd, proto::Reply &r);
	void dispatch(Conn &c, Session &s, Request q);
	void complete(); // takes the finished requests in
	// On the worker: runs its session's requests until one ends it. Static: it touches its session
	// and the completions only, never the Server.
	static void work(Session *s, std::shared_ptr<Completions> done);
	static void execute(Session &s, Done &d);
	static Seen look(const KvStore *kv);
	// Logs a failed request of a session unless it was the caller's mistake (-EINVAL, -EBUSY).
	void log_failure(Session &s, const char *request, int status, const std::string &why);
	std::string status(const Conn &c) const;
	void push_stats(); // to /sys/kernel/llmcache/kv/ through the module, when it is loaded

	ServerConfig cfg_;
	int listen_fd_ = -1, epoll_fd_ = -1, stop_fd_ = -1;
	bool bound_ = false; // the socket file is ours to remove
	std::map<uint64_t, Conn> conns_;
	uint64_t next_conn_ = 3; // 0, 1 and 2 key the stop, listen and completion fds in epoll
	Clock::time_point listen_paused_until_{}, refusal_logged_{}, open_failure_logged_{};
	std::vector<std::unique_ptr<Session>> sessions_;
	std::vector<int> free_regions_;
	uint32_t regions_ = 0;
	uint64_t next_id_ = 1;
	KernelStatsFeed feed_;
	KvStats retired_; // counters of closed sessions
	std::shared_ptr<Completions> done_;
};

} // namespace llmcache::kv
