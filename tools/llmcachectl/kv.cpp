// SPDX-License-Identifier: MIT
/*
 * `llmcachectl kv status`: the KV sessions of llmcached that the caller may see (its own; root sees all),
 * with their pools' statistics, as a table or as JSON. The daemon answers over its Unix socket; its
 * status lines are "key value" pairs, one session per line (daemon_reply.cpp reads them and makes the
 * JSON).
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "daemon_reply.hpp"
#include "kmod.hpp"
#include "kv/llmcache_kv.h"
#include "util/units.hpp"

namespace po = boost::program_options;
using namespace llmcache::kmod;

namespace {

void print_table(const std::vector<Session> &sessions)
{
	if (sessions.empty()) {
		std::puts("no KV sessions");
		return;
	}
	for (const auto &[k, v] : sessions.front())
		std::printf("%*s ", int(std::max(k.size(), size_t(8))), k.c_str());
	std::puts("");
	for (const auto &s : sessions) {
		for (const auto &[k, v] : s)
			std::printf("%*s ", int(std::max(k.size(), size_t(8))), v.c_str());
		std::puts("");
	}
}

} // namespace

int cmd_kv(int argc, char **argv)
{
	std::string socket = "/run/llmcached/llmcached.sock", what, timeout = "5s";
	bool json = false;
	po::options_description opts("Options");
	opts.add_options()("help,h", "show this help")(
		"socket", po::value(&socket)->default_value(socket), "llmcached's Unix socket")(
		"json", po::bool_switch(&json), "print JSON instead of a table")(
		"timeout", po::value(&timeout)->default_value(timeout), "give up when llmcached does not answer within this (1ms-1h)");
	po::options_description hidden;
	hidden.add_options()("what", po::value(&what));
	po::positional_options_description pos;
	pos.add("what", 1);
	po::options_description all;
	all.add(opts).add(hidden);
	po::variables_map vm;
	try {
		po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
		po::notify(vm);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmcachectl kv: %s (see llmcachectl kv --help)\n", e.what());
		return 2;
	}
	if (vm.count("help") || what.empty()) {
		std::cout << "Usage: llmcachectl kv status [options]\n\nThe KV sessions of llmcached (yours; root sees "
			     "all) and their pools' statistics.\n\n"
			  << opts
			  << "\nEXAMPLES\n  llmcachectl kv status\n  llmcachectl kv status --socket /tmp/llmcached.sock "
			     "--json\n  llmcachectl kv status --timeout 500ms\n";
		return what.empty() && !vm.count("help") ? 2 : 0;
	}
	if (what != "status") {
		std::fprintf(stderr, "llmcachectl kv: unknown action '%s': the only one is 'status'\n", what.c_str());
		return 2;
	}
	uint64_t timeout_ns = 0;
	try {
		timeout_ns = llmcache::units::parse_duration_ns(timeout);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "llmcachectl kv: --timeout %s: %s\n", timeout.c_str(), e.what());
		return 2;
	}
	if (timeout_ns < 1'000'000 || timeout_ns > 3600'000'000'000ull) {
		std::fprintf(stderr, "llmcachectl kv: --timeout %s: must be from 1ms to 1h\n", timeout.c_str());
		return 2;
	}
	const uint32_t ms = uint32_t(timeout_ns / 1'000'000);
	std::vector<char> buf(1 << 16);
	int n = llmcache_kv_status_timeout(socket.c_str(), buf.data(), uint32_t(buf.size()), ms);
	if (n < 0) {
		std::fprintf(stderr, "llmcachectl kv status: %s\n", buf.data());
		return 1;
	}
	if (size_t(n) >= buf.size()) {
		buf.resize(size_t(n) + 1);
		n = llmcache_kv_status_timeout(socket.c_str(), buf.data(), uint32_t(buf.size()), ms);
		if (n < 0) {
			std::fprintf(stderr, "llmcachectl kv status: %s\n", buf.data());
			return 1;
		}
	}
	auto sessions = parse_sessions(buf.data());
	return report_errors("kv status", [&] {
		if (json)
			std::printf("%s\n", json_text(sessions_json(sessions)).c_str());
		else
			print_table(sessions);
		return 0;
	});
}
