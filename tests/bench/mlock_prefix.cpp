// SPDX-License-Identifier: MIT
// The static-mlock baseline of the real-engine benchmark: what `vmtouch -l` does. Maps a file, locks its
// first BYTES (reading them in, charged to this process's memory cgroup: start it in the engine's), says
// so on stdout and holds the lock until it is killed.
// Usage: mlock_prefix FILE BYTES
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char **argv)
{
	if (argc != 3) {
		std::fprintf(stderr, "usage: mlock_prefix FILE BYTES\n");
		return 2;
	}
	char *end;
	errno = 0;
	const unsigned long long want = std::strtoull(argv[2], &end, 10);
	const int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (errno || *end || end == argv[2]) {
		std::fprintf(stderr, "mlock_prefix: BYTES '%s' is not a whole number\n", argv[2]);
		return 2;
	}
	if (fd < 0 || fstat(fd, &st)) {
		std::fprintf(stderr, "mlock_prefix: cannot open %s: %s\n", argv[1], std::strerror(errno));
		return 1;
	}
	const size_t bytes = size_t(std::min<unsigned long long>(want, (unsigned long long)st.st_size));
	void *m = bytes ? mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
	if (m == MAP_FAILED || (bytes && mlock(m, bytes))) {
		std::fprintf(stderr, "mlock_prefix: cannot lock %zu bytes of %s: %s\n", bytes, argv[1], std::strerror(errno));
		return 1;
	}
	std::printf("locked %zu\n", bytes);
	std::fflush(stdout);
	sigset_t s;
	sigemptyset(&s);
	for (;;)
		sigsuspend(&s);
}
