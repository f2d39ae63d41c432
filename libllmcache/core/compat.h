/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The few things the policy core needs from its environment, mapped to the kernel or to a freestanding
 * C environment. The core includes nothing else: no libc, no kernel headers beyond these, no floating
 * point, no allocation (the caller hands it one block of memory).
 */
#ifndef LLC_COMPAT_H
#define LLC_COMPAT_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/limits.h>
#include <linux/math64.h>
#define llc_div_u64(a, b) div64_u64((a), (b))
#ifndef UINT64_MAX
#define UINT64_MAX U64_MAX
#endif
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#define llc_div_u64(a, b) ((uint64_t)(a) / (uint64_t)(b))
#endif

#define LLC_NSEC_PER_SEC 1000000000ULL

#endif /* LLC_COMPAT_H */
