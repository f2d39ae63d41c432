// SPDX-License-Identifier: MIT
// llmcached's status and session listings read, and their JSON (daemon_reply.hpp).
#include "daemon_reply.hpp"

#include <algorithm>
#include <exception>
#include <initializer_list>
#include <sstream>

#include "kmod.hpp"

namespace llmcache::kmod {

namespace {

// The words of a line: the daemon separates them with spaces, and escapes the spaces of a path, not its
// tabs or other white space, which stay in the word.
std::vector<std::string> split_words(const std::string &line)
{
	std::vector<std::string> out;
	for (size_t at = 0; at < line.size();) {
		const size_t end = std::min(line.find(' ', at), line.size());
		if (end > at)
			out.push_back(line.substr(at, end - at));
		at = end + 1;
	}
	return out;
}

std::string unescape(const std::string &s)
{
	std::string out;
	for (size_t i = 0; i < s.size(); i++) {
		if (s[i] == '%' && i + 2 < s.size()) {
			out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
			i += 2;
		} else {
			out += s[i];
		}
	}
	return out;
}

// Line l's values into object out, after the keys out already has: the words as strings, the rest as
// counts (the protocol's values are unsigned decimals but for these).
void add_values(Json &out, const StatusLine &l, std::initializer_list<std::string> words = {})
{
	for (const auto &[k, v] : l.values)
		if (!out.contains(k))
			out[k] = std::find(words.begin(), words.end(), k) != words.end()
					 ? Json(v)
					 : json_count(v, "llmcached's " + l.kind + " " + k);
}

} // namespace

std::string StatusLine::get(const std::string &key) const
{
	for (const auto &[k, v] : values)
		if (k == key)
			return v;
	return "0";
}

uint64_t StatusLine::num(const std::string &key) const { return std::stoull(get(key)); }

std::vector<StatusLine> parse_status(const std::string &text)
{
	std::vector<StatusLine> out;
	std::istringstream lines(text);
	for (std::string line; std::getline(lines, line);) {
		const std::vector<std::string> w = split_words(line);
		StatusLine l;
		l.kind = w.empty() ? "" : w[0];
		for (size_t i = 1; i + 1 < w.size(); i += 2)
			l.values.emplace_back(w[i], w[i] == "path" ? unescape(w[i + 1]) : w[i + 1]);
		out.push_back(std::move(l));
	}
	return out;
}

const StatusLine &find_line(const std::vector<StatusLine> &lines, const std::string &kind)
{
	for (const StatusLine &l : lines)
		if (l.kind == kind)
			return l;
	throw Failure{"llmcached's status has no '" + kind + "' line: is llmcachectl older than the daemon?"};
}

Json status_json(const std::vector<StatusLine> &lines)
{
	Json j = {{"source", "llmcached"}};
	add_values(j, find_line(lines, "global"), {"mode", "hook_mode"});
	j.erase("mode");
	add_values(j["stats"] = Json::object(), find_line(lines, "stats"));
	// The daemon's events_dropped counts feed records the ring had no room for, the module's the
	// blocks of events too large to classify: one key, one unit.
	j["stats"]["records_lost"] = j["stats"]["events_dropped"];
	j["stats"].erase("events_dropped");
	j["files"] = Json::array();
	for (const StatusLine &l : lines)
		if (l.kind == "file") {
			Json f = {{"id", json_count(l.get("id"), "llmcached's file id")}, {"path", l.get("path")}};
			add_values(f, l);
			j["files"].push_back(f);
		}
	return j;
}

Json loops_json(const std::vector<StatusLine> &lines)
{
	const StatusLine &g = find_line(lines, "global");
	auto path_of = [&](const std::string &id) {
		for (const StatusLine &l : lines)
			if (l.kind == "file" && l.get("id") == id)
				return l.get("path");
		return std::string("?"); // not in a truncated listing
	};
	size_t total = 0;
	for (const StatusLine &l : lines)
		total += l.kind == "loop";
	Json j = {{"bw", g.num("bw")}, {"bw_source", "set"}, {"t_ns", g.num("t_ns")}, {"t_source", "set"},
		  {"bw_measured", 0}, {"t_measured_ns", 0}, {"total", total}, {"loops", Json::array()}};
	for (const StatusLine &l : lines)
		if (l.kind == "loop")
			j["loops"].push_back({{"file_id", l.num("file")}, {"path", path_of(l.get("file"))}, {"seq", l.num("seq")},
					      {"first_block", l.num("first")}, {"blocks", l.num("n")},
					      {"period_ns", l.num("period_ns")}, {"iterations", l.num("iterations")},
					      {"s_min", l.num("s_min")}, {"pinned", l.num("pinned")}, {"deficit", l.num("deficit")},
					      {"stall_ns", l.num("stall_ns") == UINT64_MAX ? Json() : Json(l.num("stall_ns"))}});
	return j;
}

std::vector<Session> parse_sessions(const std::string &text)
{
	std::vector<Session> out;
	std::istringstream lines(text);
	for (std::string line; std::getline(lines, line);) {
		const std::vector<std::string> w = split_words(line);
		Session s;
		for (size_t i = 0; i + 1 < w.size(); i += 2)
			s.emplace_back(w[i], w[i + 1]);
		if (!s.empty())
			out.push_back(std::move(s));
	}
	return out;
}

Json sessions_json(const std::vector<Session> &sessions)
{
	Json out = {{"sessions", Json::array()}};
	for (const auto &s : sessions) {
		Json j = Json::object();
		for (const auto &[k, v] : s) {
			if (k == "backend") {
				j[k] = v;
			} else if (k == "beta") {
				size_t used = 0;
				try {
					j[k] = std::stod(v, &used);
				} catch (const std::exception &) {
				}
				if (used == 0 || used != v.size())
					throw Failure{"llmcached's session beta is '" + v + "', not a number"};
			} else {
				j[k] = json_count(v, "llmcached's session " + k);
			}
		}
		out["sessions"].push_back(j);
	}
	return out;
}

} // namespace llmcache::kmod
