// SPDX-License-Identifier: MIT
/*
 * llmcached's answers to llmcachectl, read, and their JSON. The page-cache status (PAGECACHE_STATUS) is
 * lines of words separated by spaces: the first says what the line describes (global, stats, file,
 * loop, truncated), then "key value" pairs; a file's path is a value with space, newline and % escaped
 * as %20, %0a, %25 (a tab stays as it is). Its JSON is the module's schema (Documentation/admin-guide.md,
 * "The status schema"; loops --json's for the loops), so that a script reads both modes alike. The KV
 * session listing (kv status) is one session a line of "key value" pairs. Keys and values come from the
 * daemon: the JSON library escapes them all.
 */
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "json.hpp"

namespace llmcache::kmod {

struct StatusLine {
	std::string kind; // global, stats, file, loop, truncated
	std::vector<std::pair<std::string, std::string>> values; // in the daemon's order, paths unescaped
	std::string get(const std::string &key) const;           // "0" when the line has no such key
	uint64_t num(const std::string &key) const;
};

std::vector<StatusLine> parse_status(const std::string &text);
// The first line of that kind; throws Failure when there is none.
const StatusLine &find_line(const std::vector<StatusLine> &lines, const std::string &kind);
// status --json, "source": "llmcached"; throws Failure on a value that is not an unsigned decimal.
Json status_json(const std::vector<StatusLine> &lines);
// loops --json: the rule's BW and T as set, the measured ones 0; a stall that cannot be predicted is null.
Json loops_json(const std::vector<StatusLine> &lines);

using Session = std::vector<std::pair<std::string, std::string>>;
std::vector<Session> parse_sessions(const std::string &text);
// kv status --json: backend a string, beta a fraction, the rest counts; throws Failure on anything else.
Json sessions_json(const std::vector<Session> &sessions);

} // namespace llmcache::kmod
