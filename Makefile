# SPDX-License-Identifier: MIT
# llmcache: the entry point. Userspace builds with CMake into $(BUILD); the kernel module and the BPF
# programs have their own builds under kmod/ and bpf/.
BUILD ?= build
RESULTS ?= results
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all deps demo check bench bench-engine install deb clean kmod vm-check vm-bench

# make (all) installs nothing and needs no root: it names the packages the build lacks. The targets
# that run things (demo, check, bench, vm-*) install what they need first (deps).
all:
	@scripts/install-deps.sh --check build
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh

# The main job: generate the paper's app workloads and a decoder, replay every policy, print the tables.
demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)/bin $(RESULTS)

check: deps
	@$(MAKE) --no-print-directory all
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: deps
	@$(MAKE) --no-print-directory all
	@scripts/bench.sh $(BUILD) $(RESULTS)

# A real engine (llama.cpp through node-llama-cpp, installed from npm) under memory limits.
bench-engine: deps
	@$(MAKE) --no-print-directory all
	@scripts/bench-engine.sh $(BUILD) $(RESULTS)

# llmcache.ko against every installed Debian amd64 kernel's headers (6.1 and 6.12 after make deps).
KMOD_KDIRS ?= $(filter-out %-cloud-amd64 %-rt-amd64,$(wildcard /usr/src/linux-headers-*-amd64))
kmod:
	@test -n "$(KMOD_KDIRS)" || { echo "kmod: no kernel headers installed; run make deps" >&2; exit 1; }
	@for k in $(KMOD_KDIRS); do $(MAKE) --no-print-directory -C kmod KDIR=$$k BUILD=$(abspath $(BUILD)) || exit 1; done

# The kernel module's kselftest suite inside a VM on each packaged kernel (tests/vm/run.sh).
vm-check: deps
	@$(MAKE) --no-print-directory all kmod
	@LLMCACHE_BIN=$(abspath $(BUILD))/bin LLMCACHE_SRC=$(CURDIR) tests/integration/test_kmod_vm.sh

# llmcache.ko against the stock page cache on the decoder workload, in a VM per packaged kernel.
vm-bench: deps
	@$(MAKE) --no-print-directory all kmod
	@scripts/vm-bench.sh $(BUILD) $(RESULTS)

# llmcache for arm64 with Debian's cross toolchain (installs it, as root): the module for Debian's arm64
# 6.1 and 6.12 kernels, the tools, llmcached and the kselftest suite into $(BUILD)/arm64/; then
# tests/vm/run-arm64.sh runs them in qemu-system-aarch64 (Documentation/packaging.md, "arm64").
.PHONY: arm64
arm64:
	@scripts/cross-arm64.sh $(abspath $(BUILD))

install: all
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian packages (debian/), binary only, into $(BUILD)/deb/ (Documentation/packaging.md).
deb:
	@scripts/install-deps.sh build bpf kv packaging
	@scripts/build-deb.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(RESULTS)
