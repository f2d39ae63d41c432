#!/bin/bash
# SPDX-License-Identifier: MIT
# Inside the VM (tests/vm/run.sh): the recorder's test and the userspace mode's, one after the other.
# Prints one line per test and, for a failure, its FAIL lines and last lines; exits with the failures.
# Under TCG, with other VMs on the same cores, the tests take several times longer than on the host:
# their watchdogs get 20 minutes instead of 10.
export LLMCACHE_TEST_TIMEOUT=1200
# Both guest kernels see mmap fault-around (tracepoints on 6.12, kprobes on 6.1): the mmap cases must run.
export LLMTRACE_EXPECT_MMAP=1
fails=0
for t in test_llmtrace_record test_llmcached_bpf_mode; do
	bash "$LLMCACHE_SRC/tests/integration/$t.sh" >"$TMPDIR/$t.out" 2>&1
	rc=$?
	echo "$t: exit $rc: $(grep -E '^(PASS|SKIP)|checks? failed' "$TMPDIR/$t.out" | tr '\n' ' ')"
	if [ $rc -ne 0 ]; then
		fails=$((fails + 1))
		grep -E '^FAIL' "$TMPDIR/$t.out"
		tail -n 20 "$TMPDIR/$t.out"
	fi
done
exit $fails
