#!/bin/sh
# SPDX-License-Identifier: MIT
# Random ioctls and sysfs writes against llmcache.ko, run as root inside the VM (tests/vm/run.sh, which
# fails the run when the kernel log shows a BUG, WARNING, Oops, lockup or hung task) with $LLMCACHE_KO
# and $LLMCACHE_SCRATCH set: build/kselftest/llmcache_fuzz for LLMCACHE_FUZZ_SECONDS (60) with seed
# LLMCACHE_FUZZ_SEED (random, printed), as root, as uid nobody and as root without CAP_SYS_ADMIN (see
# tests/kselftest/llmcache_fuzz.c for what each process does and checks); then the module must still
# register and read a file, unload, and load and unload again. Prints PASS or the first FAIL.
fuzz=$(dirname "$LLMCACHE_BIN")/kselftest/llmcache_fuzz
seconds=${LLMCACHE_FUZZ_SECONDS:-60}
seed=${LLMCACHE_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
fail() { echo "FAIL: $*"; rmmod llmcache 2>/dev/null; exit 1; }

[ -x "$fuzz" ] || fail "$fuzz is missing (make -C tests/kselftest)"
insmod "$LLMCACHE_KO" || fail "insmod $LLMCACHE_KO"
"$fuzz" --seed "$seed" --seconds "$seconds" --dir "$LLMCACHE_SCRATCH" || fail "llmcache_fuzz --seed $seed"
# Whatever the fuzz left registered (its files, and the automatic mode's) goes with the module.
s=/sys/kernel/llmcache/stats
echo "after the fuzz: $(cat /sys/kernel/llmcache/registered) files registered; what ran under it:" \
	"$(cat $s/accesses) accesses, $(cat $s/loop_iterations) loop iterations, $(cat $s/shrinker_released) released" \
	"by the shrinker, $(cat $s/seq_dropped) SEQ and $(cat $s/loop_dropped) loop tail blocks dropped," \
	"$(cat $s/pinned) pinned and $(cat $s/hot_protected) protected now"
rmmod llmcache || fail "rmmod after the fuzz (seed $seed)"
insmod "$LLMCACHE_KO" || fail "insmod after the fuzz"
[ "$(cat /sys/kernel/llmcache/registered)" = 0 ] || fail "a fresh module has files registered"
rmmod llmcache || fail "rmmod of a fresh module"
echo "fuzz: seed $seed, $seconds s"
echo PASS
