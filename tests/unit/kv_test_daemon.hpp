// SPDX-License-Identifier: MIT
// One llmcached for a test binary's KV sessions, as cmocka group setup and teardown: the daemon built
// beside the test (../bin/llmcached), its socket and stderr log in a fresh directory under /var/tmp,
// one sink and two recent tokens kept (--kv-sink-tokens 1 --kv-recent-tokens 2), so that a test's
// small sessions evict.
#pragma once
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace kv_test_daemon {

inline std::string dir; // the daemon's directory: dir + "/sock" is its socket
inline pid_t pid = -1;

// Starts the daemon in /var/tmp/llmcached-NAME-XXXXXX and waits up to 5 s for its socket; 0 or -1.
inline int start(const char *name)
{
	char self[4096];
	const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const std::string p(self, n > 0 ? (size_t)n : 0);
	const std::string bin = p.substr(0, p.rfind('/')) + "/../bin/llmcached";
	std::string tmpl = std::string("/var/tmp/llmcached-") + name + "-XXXXXX";
	if (!mkdtemp(tmpl.data()) || access(bin.c_str(), X_OK) != 0)
		return -1;
	dir = tmpl;
	pid = fork();
	if (pid == 0) {
		const int fd = open((dir + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 2);
		const std::string sock = dir + "/sock";
		execl(bin.c_str(), bin.c_str(), "--socket", sock.c_str(), "--kv-sink-tokens", "1", "--kv-recent-tokens",
		      "2", (char *)nullptr);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct stat st;
		if (stat((dir + "/sock").c_str(), &st) == 0)
			return 0;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	return -1;
}

inline int stop()
{
	if (pid > 0 && kill(pid, SIGTERM) == 0)
		waitpid(pid, nullptr, 0);
	std::system(("rm -rf " + dir).c_str());
	return 0;
}

} // namespace kv_test_daemon
