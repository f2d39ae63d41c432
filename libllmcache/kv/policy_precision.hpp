// SPDX-License-Identifier: MIT
/*
 * Which selected tokens are fetched at full precision (Documentation/kv.md, "Two-plane precision"; the
 * storage analogue of Kelle's 2DRP, which keeps important tokens' KV at high precision and lets the
 * others lose low-order bits). Of the top-k tokens a select chose by score, the best ceil(full * k),
 * ranked as the selection ranks them (score_better: higher score, then lower position), get both
 * planes of their spilled V rows; the others get the high plane alone. Sink and recent tokens are
 * not among the top-k and are always full. Pure: scores in, positions out; the store does the reads.
 */
#pragma once
#include "csd/kernels/kernel_common.h"

#include <cstdint>
#include <span>
#include <vector>

namespace llmcache::kv::policy {

// The positions among top (the top-k scores, any order) to fetch with the high plane only, ascending.
// full is the fraction of top given full precision, in [0, 1].
std::vector<uint32_t> high_plane_only(std::span<const csd_score> top, double full);

} // namespace llmcache::kv::policy
