// SPDX-License-Identifier: MIT
// The version that the trace tools (llmtrace, llmreplay, llmworkload) print for --version; it follows
// project(VERSION) in the top-level CMakeLists.txt.
#pragma once

#define LLMCACHE_TOOLS_VERSION "0.1.0"
