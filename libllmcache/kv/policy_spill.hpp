// SPDX-License-Identifier: MIT
/*
 * The spill policy: how many bytes the CPU pool may hold, when an append must spill, and which pages
 * leave memory.
 *  - Target: without a storage pool or a beta, the budget M_0 (cpu_budget). With HillInfer's beta
 *    (Sec. 3.3, Eq. 1: M_c / f_c = M_s / f_s, so M_c / M_s = beta), beta / (1 + beta) of the session's
 *    KV, never more than M_0.
 *  - When: after an append, if the pool is over M_0, or if the page just filled and the pool is over
 *    the target (pages only become movable at page boundaries, so a split alone is enforced there).
 *  - Which: whole pages, in one batch, down to 7/8 of the target (a batch keeps the device's queue
 *    full and the scan rare). Candidates are full pages in memory that hold neither sink nor recent
 *    tokens; the least often selected go first (HillInfer's hit-rate table at page granularity), then
 *    the oldest page, then the lowest layer.
 *  - Clean demotion: a page that came back to memory keeps its device copy (full pages never change),
 *    so a victim with a copy leaves memory without a write. Those copies hold device slots; when the
 *    device has too few free slots for the victims that do need a write, copies of resident pages give
 *    theirs up, the most often selected first (the spill order reversed: the last to be spilled again),
 *    then the newest page, then the highest layer. Victims' own copies are never dropped.
 */
#pragma once
#include "kv/policy.hpp"

#include <cstddef>

namespace llmcache::kv::policy {

// The CPU pool's byte target under the split; total_bytes: the session's KV, in memory and spilled.
uint64_t cpu_target(const Params &prm, double beta, uint64_t total_bytes);

// What a spill leaves in the pool: 7/8 of the target. The slack above it batches spills.
inline uint64_t spill_floor(uint64_t target) { return target - target / 8; }

// Whether an append that left the pool at cpu_bytes must spill; page_full: the append filled its page.
bool must_spill_after_append(const Params &prm, uint64_t cpu_bytes, uint64_t target, bool page_full);

// The pages to spill, in spill order.
std::vector<PageRef> choose_spill_victims(const PoolSnapshot &pool, const Params &prm, uint64_t target);

// Up to `pages` resident pages whose device copies give up their slots, in that order; none of victims.
std::vector<PageRef> choose_copies_to_drop(const PoolSnapshot &pool, const std::vector<PageRef> &victims, size_t pages);

} // namespace llmcache::kv::policy
