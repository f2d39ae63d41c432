// SPDX-License-Identifier: MIT
// cmocka.h needs these headers before it; C++ tests include this instead.
#pragma once
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
extern "C" {
#include <cmocka.h>
}
