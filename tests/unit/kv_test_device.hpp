// SPDX-License-Identifier: MIT
// Block devices for the KV tests: a loop device over a file in /tmp when root (losetup), else a file in
// /var/tmp (a file system with O_DIRECT). make_device() registers each one; cleanup_devices() detaches
// and removes them all.
#pragma once
#include "cmocka_cpp.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace kv_test {

struct Device {
	std::string path, file;
	bool loop = false;
};

inline std::vector<Device> &devices()
{
	static std::vector<Device> all;
	return all;
}

inline void cleanup_devices()
{
	for (const Device &d : devices()) {
		if (d.loop)
			std::system(("losetup -d " + d.path + " 2>/dev/null").c_str());
		unlink(d.file.c_str());
	}
	devices().clear();
}

// A zero-filled device of bytes; returns its path.
inline std::string make_device(uint64_t bytes)
{
	char tmpl[] = "/tmp/llmcache-kv-test-XXXXXX";
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	close(fd);
	Device d{tmpl, tmpl, false};
	if (geteuid() == 0) {
		FILE *p = popen(("losetup -f --show " + d.file + " 2>/dev/null").c_str(), "r");
		char line[256] = {0};
		if (p && fgets(line, sizeof(line), p) && std::strncmp(line, "/dev/loop", 9) == 0) {
			line[std::strcspn(line, "\n")] = 0;
			d.path = line;
			d.loop = true;
		}
		if (p)
			pclose(p);
	}
	if (!d.loop) { // not root or no loop devices: a file on a file system with O_DIRECT
		std::string f = "/var/tmp/" + d.file.substr(5);
		rename(d.file.c_str(), f.c_str());
		d.path = d.file = f;
	}
	devices().push_back(d);
	return d.path;
}

} // namespace kv_test
