# SPDX-License-Identifier: MIT
# Cross-build the userspace (library, tools, llmcached) for arm64 on a Debian amd64 host with Debian's
# cross toolchain (crossbuild-essential-arm64) and the arm64 libraries installed through multiarch
# (dpkg --add-architecture arm64; libboost-program-options-dev:arm64, liburing-dev:arm64,
# libcmocka-dev:arm64). scripts/cross-arm64.sh installs them and drives this file:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# The arm64 libraries and headers live in the host's own root under the multiarch triplet
# (/usr/lib/aarch64-linux-gnu, /usr/include/aarch64-linux-gnu), so the root is "/" and only the
# triplet tells the two architectures apart: CMAKE_LIBRARY_ARCHITECTURE makes find_library and
# find_package look in the arm64 directories, and pkg-config reads the arm64 .pc files only.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Programs (cmake, clang, bpftool) come from the host; libraries and headers only from the arm64
# multiarch directories or the cross toolchain's own root.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# The host's pkg-config, reading the arm64 .pc files only (bookworm's pkg-config has no
# aarch64-linux-gnu-pkg-config wrapper). A library without an arm64 .pc is then simply absent: libbpf
# (the BPF recorder, llmtrace) and XRT (the SmartSSD backend) are left out of the arm64 build.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
