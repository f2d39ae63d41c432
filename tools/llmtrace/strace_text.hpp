// SPDX-License-Identifier: MIT
// Trace writers for llmtrace: the library's (libllmcache/trace), plus strace-like text, which the library
// only reads.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "trace/trace.hpp"

namespace llmtrace {

// trace::open_writer(), and Format::strace as `strace -f -ttt -yy`-style text (see strace_text.cpp).
std::unique_ptr<llmcache::trace::Writer> open_writer(const std::string &path, llmcache::trace::Format f,
						     std::string_view producer);

} // namespace llmtrace
