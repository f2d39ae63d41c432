// SPDX-License-Identifier: MIT
// Parsing and printing of the sizes, bandwidths and durations that every tool takes on its command line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llmcache::units {

// "4096", "64MiB", "1.5GiB", "100MB" (decimal), "4KiB", "512k" (= KiB). Throws std::invalid_argument
// with a message naming the text and the accepted suffixes.
uint64_t parse_bytes(std::string_view text);
// A count: a whole decimal number and nothing else (no sign, no unit), up to 2^64 - 1. Throws
// std::invalid_argument naming the text (a command-line parser would read "-1" as 2^32 - 1 or 2^64 - 1).
uint64_t parse_count(std::string_view text);
// Bytes per second: "100MB/s", "1GB/s", "1.5GiB/s", or a plain number of bytes per second.
uint64_t parse_bandwidth(std::string_view text);
// Nanoseconds: "0.1" or "0.1s" (seconds), "100ms", "50us", "2000ns".
uint64_t parse_duration_ns(std::string_view text);

std::string format_bytes(uint64_t bytes);  // "64.0 MiB"
std::string format_duration(uint64_t ns);  // "12.5 ms"

} // namespace llmcache::units
