// SPDX-License-Identifier: MIT
/*
 * Can this process mlock() the pin budget? mlock() is bounded by RLIMIT_MEMLOCK unless the caller has
 * CAP_IPC_LOCK. The daemon checks at start-up, raises its soft limit up to the hard one when that is
 * enough, and otherwise refuses to start with a sentence that says which of the three to change.
 */
#pragma once
#include <cstdint>
#include <string>

namespace llmcache::pagecache {

bool has_cap_ipc_lock();

// 0 when budget_bytes can be locked (the soft limit raised if needed); -EPERM with err otherwise.
int ensure_memlock(uint64_t budget_bytes, std::string &err);

} // namespace llmcache::pagecache
