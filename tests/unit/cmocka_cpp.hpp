// SPDX-License-Identifier: MIT
// cmocka.h needs these C headers before it, and its macros (fail, ...) clash with the C++ library's
// headers when those come after it: C++ tests include this first, it brings the usual ones in first.
#pragma once
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
extern "C" {
#include <cmocka.h>
}
