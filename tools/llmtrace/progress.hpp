// SPDX-License-Identifier: MIT
// A one-line progress report on stderr for llmtrace stat and convert: records read, their rate and,
// when the reader gives byte offsets into a regular file, the fraction read. Redrawn in place at most
// four times a second, and only when stderr is a terminal unless --progress always asks for it.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "trace/trace.hpp"

namespace llmtrace {

class Progress {
public:
	// when: auto, always or never; throws std::invalid_argument otherwise.
	Progress(const std::string &when, const std::string &input) : start_(std::chrono::steady_clock::now())
	{
		if (when != "auto" && when != "always" && when != "never")
			throw std::invalid_argument("--progress must be auto, always or never, not '" + when + "'");
		on_ = when == "always" || (when == "auto" && isatty(STDERR_FILENO));
		struct stat st;
		if (input != "-" && stat(input.c_str(), &st) == 0 && S_ISREG(st.st_mode))
			size_ = uint64_t(st.st_size);
		last_ = start_;
	}
	~Progress() { clear(); }

	// Called per record; cheap except every 65536th.
	void update(uint64_t records, const llmcache::trace::Reader &r)
	{
		if (!on_ || (records & 0xffff) != 0)
			return;
		auto now = std::chrono::steady_clock::now();
		if (now - last_ < std::chrono::milliseconds(250))
			return;
		last_ = now;
		double secs = std::chrono::duration<double>(now - start_).count();
		llmcache::trace::Reader::Position p = r.position();
		char pct[32] = "";
		if (size_ && p.kind == "byte offset")
			std::snprintf(pct, sizeof pct, "%5.1f%%  ", 100.0 * double(p.where) / double(size_));
		std::fprintf(stderr, "\r\033[K%s%.1f M records  %.1f M records/s", pct, double(records) / 1e6,
			     secs > 0 ? double(records) / secs / 1e6 : 0.0);
		drawn_ = true;
	}

	void clear()
	{
		if (drawn_)
			std::fprintf(stderr, "\r\033[K");
		drawn_ = false;
	}

private:
	bool on_ = false, drawn_ = false;
	uint64_t size_ = 0;
	std::chrono::steady_clock::time_point start_, last_;
};

} // namespace llmtrace
