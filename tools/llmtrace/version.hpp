// SPDX-License-Identifier: MIT
// The version that the trace tools (llmtrace, llmreplay, llmworkload) print for --version. It comes
// from VERSION at the top of the tree, through CMake (LLMCACHE_VERSION, set for every target).
#pragma once

#ifndef LLMCACHE_VERSION
#error "LLMCACHE_VERSION is not set: build with the top-level CMakeLists.txt"
#endif
#define LLMCACHE_TOOLS_VERSION LLMCACHE_VERSION
