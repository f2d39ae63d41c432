# SPDX-License-Identifier: MIT
# llmcache: the entry point. Userspace builds with CMake into $(BUILD); the kernel module and the BPF
# programs have their own builds under kmod/ and bpf/.
BUILD ?= build
RESULTS ?= results
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all deps demo check bench install clean

all: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh

# The main job: generate the paper's app workloads and a decoder, replay every policy, print the tables.
demo: all
	@scripts/demo.sh $(BUILD)/bin $(RESULTS)

check: all
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: all
	@scripts/bench.sh $(BUILD)/bin $(BUILD)/tests $(RESULTS)

install: all
	@cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(RESULTS)
