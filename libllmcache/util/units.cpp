// SPDX-License-Identifier: MIT
#include "units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace llmcache::units {
namespace {

struct Suffix {
	std::string_view name;
	double factor;
};

constexpr Suffix byte_suffixes[] = {
	{"", 1},          {"B", 1},         {"k", 1024.0},    {"K", 1024.0},
	{"KiB", 1024.0},  {"KB", 1e3},      {"kB", 1e3},      {"M", 1048576.0},
	{"MiB", 1048576.0}, {"MB", 1e6},    {"G", 1073741824.0}, {"GiB", 1073741824.0},
	{"GB", 1e9},      {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
};

constexpr Suffix time_suffixes[] = {
	{"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1},
};

// Examples of a well-written value, for messages.
std::string example(std::string_view what)
{
	return what == "duration" ? "100ms, 1.5s" : what == "bandwidth" ? "100MB/s, 1.5GiB/s" : "64MiB, 1.5GB";
}

// Split "1.5GiB" into 1.5 and "GiB"; throws with `what` when there is no number. Only plain decimals
// (digits with an optional fraction) are numbers: strtod would also take "1e3", "0x100", "inf" and
// "nan", and "-s 1e3" then meant 1000 bytes where "-s 1000" meant 1000 blocks.
double split_number(std::string_view text, std::string_view &suffix, const char *what)
{
	std::string_view t = text;
	while (!t.empty() && t.front() == ' ')
		t.remove_prefix(1);
	size_t i = 0, digits = 0;
	while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])))
		i++, digits++;
	if (i < t.size() && t[i] == '.')
		for (i++; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]));)
			i++, digits++;
	if (digits == 0)
		throw std::invalid_argument("'" + std::string(text) + "' is not a " + what +
					    ": expected a number >= 0 in plain decimal (e.g. " + example(what) + ")");
	double v = std::strtod(std::string(t.substr(0, i)).c_str(), nullptr);
	suffix = t.substr(i);
	while (!suffix.empty() && suffix.front() == ' ')
		suffix.remove_prefix(1);
	if (!suffix.empty() && (suffix.front() == 'e' || suffix.front() == 'E' || suffix.front() == 'x' || suffix.front() == 'X') &&
	    suffix.size() > 1 && (std::isdigit(static_cast<unsigned char>(suffix[1])) || suffix[1] == '+' || suffix[1] == '-' ||
				  std::isxdigit(static_cast<unsigned char>(suffix[1]))))
		throw std::invalid_argument("'" + std::string(text) + "' is not a " + what +
					    ": write it in plain decimal, without an exponent or hex (e.g. " + example(what) + ")");
	return v;
}

template <size_t N>
uint64_t scaled(std::string_view text, const Suffix (&table)[N], const char *what, const char *accepted)
{
	std::string_view suffix;
	double v = split_number(text, suffix, what);
	for (const auto &s : table)
		if (s.name == suffix) {
			double r = std::floor(v * s.factor + 0.5);
			if (r > 1.8e19)
				throw std::invalid_argument("'" + std::string(text) + "' is too large");
			return uint64_t(r);
		}
	throw std::invalid_argument("'" + std::string(text) + "' has an unknown unit '" + std::string(suffix) +
				    "'; use " + accepted);
}

} // namespace

uint64_t parse_bytes(std::string_view text)
{
	return scaled(text, byte_suffixes, "size", "B, KiB, MiB, GiB, TiB (binary) or KB, MB, GB, TB (decimal)");
}

uint64_t parse_count(std::string_view text)
{
	uint64_t v = 0;
	const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
	if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
		throw std::invalid_argument("'" + std::string(text) + "' is not a whole number (digits only)");
	if (ec == std::errc::result_out_of_range)
		throw std::invalid_argument("'" + std::string(text) + "' is too large");
	return v;
}

uint64_t parse_bandwidth(std::string_view text)
{
	if (text.size() > 2 && text.substr(text.size() - 2) == "/s")
		text.remove_suffix(2);
	return scaled(text, byte_suffixes, "bandwidth", "e.g. 100MB/s, 1GB/s, 1.5GiB/s");
}

uint64_t parse_duration_ns(std::string_view text)
{
	return scaled(text, time_suffixes, "duration", "s, ms, us or ns (a plain number is seconds)");
}

std::string format_bytes(uint64_t bytes)
{
	static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = double(bytes);
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	char buf[32];
	std::snprintf(buf, sizeof(buf), i ? "%.1f %s" : "%.0f %s", v, names[i]);
	return buf;
}

std::string format_duration(uint64_t ns)
{
	char buf[32];
	if (ns >= 1000000000ULL)
		std::snprintf(buf, sizeof(buf), "%.3g s", ns / 1e9);
	else if (ns >= 1000000)
		std::snprintf(buf, sizeof(buf), "%.3g ms", ns / 1e6);
	else if (ns >= 1000)
		std::snprintf(buf, sizeof(buf), "%.3g us", ns / 1e3);
	else
		std::snprintf(buf, sizeof(buf), "%llu ns", (unsigned long long)ns);
	return buf;
}

} // namespace llmcache::units
