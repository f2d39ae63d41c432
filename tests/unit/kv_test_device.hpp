// SPDX-License-Identifier: MIT
// Block devices for the KV tests: a loop device over a file in /tmp when root (losetup), else a file in
// /var/tmp (a file system with O_DIRECT). make_device() registers each one; cleanup_devices() detaches
// and removes them all. corrupt_byte() damages one byte in place.
#pragma once
#include "cmocka_cpp.hpp"

#include <fcntl.h>
#include <sys/mman.h>
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

// Flips one bit of the byte at offset at of dev, through O_DIRECT so that no cached copy hides it.
inline void corrupt_byte(const std::string &dev, uint64_t at)
{
	const int fd = open(dev.c_str(), O_RDWR | O_DIRECT);
	assert_true(fd >= 0);
	void *buf = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const off_t blk = (off_t)(at & ~4095ull);
	assert_int_equal(pread(fd, buf, 4096, blk), 4096);
	static_cast<uint8_t *>(buf)[at - blk] ^= 0x10;
	assert_int_equal(pwrite(fd, buf, 4096, blk), 4096);
	munmap(buf, 4096);
	close(fd);
}

} // namespace kv_test
