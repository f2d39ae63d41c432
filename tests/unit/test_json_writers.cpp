// SPDX-License-Identifier: MIT
// The JSON writers escape what they are given and keep numbers' types: llmcachectl's JSON of llmcached's
// status, loops and KV sessions (keys and values both come from the daemon), the simulator's report and
// the KV replay's figures. Each output is parsed back with nlohmann_json: a string must come back byte
// for byte, a count as an unsigned integer, a ratio or a fraction as a float even when it is whole.
#include "cmocka_cpp.hpp"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "kv/kv_replay.hpp"
#include "sim/report.hpp"
#include "tools/llmcachectl/daemon_reply.hpp"
#include "tools/llmcachectl/kmod.hpp"

namespace ctl = llmcache::kmod;

namespace {

// A path that a hand-written writer gets wrong: a quote, a backslash, a newline, a tab, a space and a
// percent sign.
const std::string odd_path = "/models/a\"b\\c\nd\te f%.gguf";
// The same as llmcached writes it in its status (space, newline and % escaped).
const std::string odd_path_in_status = "/models/a\"b\\c%0ad\te%20f%25.gguf";

// llmcached's status with every kind of line, its file at odd_path.
std::string daemon_status_text()
{
	return "global mode bpf enable 1 pin_budget 1048576 hot_reserve 65536 bw 0 t_ns 100000000 hook_mode "
	       "bpf-filemap registered 1 effective_budget 524288\n"
	       "stats accesses 10 hits 4 misses 6 events_dropped 3 pinned 2\n"
	       "file id 1 accesses 10 pinned 2 blocks 16 path " +
	       odd_path_in_status +
	       "\n"
	       "loop seq 7 file 1 first 0 n 16 iterations 5 period_ns 2000000 s_min 16 pinned 2 deficit 14 stall_ns "
	       "18446744073709551615\n";
}

nlohmann::json parse_back(const std::string &text)
{
	assert_true(nlohmann::json::accept(text));
	return nlohmann::json::parse(text);
}

void assert_count(const nlohmann::json &j, uint64_t want)
{
	assert_true(j.is_number_unsigned());
	assert_int_equal(j.get<uint64_t>(), want);
}

} // namespace

static void status_json__path_with_quote_backslash_newline__escaped_and_intact(void **)
{
	const std::string text = ctl::json_text(ctl::status_json(ctl::parse_status(daemon_status_text())));
	assert_true(text.find('\n') == std::string::npos); // one line
	assert_non_null(std::strstr(text.c_str(), R"("path":"/models/a\"b\\c\nd\te f%.gguf")"));
	const nlohmann::json j = parse_back(text);
	assert_string_equal(j["files"][0]["path"].get<std::string>().c_str(), odd_path.c_str());
}

static void status_json__daemon_values__words_strings_counts_unsigned(void **)
{
	const nlohmann::json j = parse_back(ctl::json_text(ctl::status_json(ctl::parse_status(daemon_status_text()))));
	assert_string_equal(j["source"].get<std::string>().c_str(), "llmcached");
	assert_string_equal(j["hook_mode"].get<std::string>().c_str(), "bpf-filemap");
	assert_false(j.contains("mode")); // the daemon's word for its mode, not the schema's
	assert_count(j["enable"], 1);
	assert_count(j["pin_budget"], 1048576);
	assert_count(j["t_ns"], 100000000);
	assert_count(j["effective_budget"], 524288);
	assert_count(j["stats"]["accesses"], 10);
	assert_count(j["stats"]["records_lost"], 3); // the daemon's events_dropped, the schema's name
	assert_false(j["stats"].contains("events_dropped"));
	assert_count(j["files"][0]["id"], 1);
	assert_count(j["files"][0]["blocks"], 16);
}

static void status_json__key_with_quote_and_backslash__escaped(void **)
{
	const std::string status = "global mode bpf enable 1 hook_mode bpf-filemap\n"
				   "stats we\"ird\\key 5 events_dropped 0\n";
	const std::string text = ctl::json_text(ctl::status_json(ctl::parse_status(status)));
	assert_non_null(std::strstr(text.c_str(), R"("we\"ird\\key":5)"));
	assert_count(parse_back(text)["stats"]["we\"ird\\key"], 5);
}

static void status_json__value_not_a_count__failure_names_it(void **)
{
	const std::string status = "global mode bpf enable 1\nstats accesses 12x\n";
	try {
		ctl::status_json(ctl::parse_status(status));
		fail_msg("a value that is not an unsigned decimal was accepted");
	} catch (const ctl::Failure &f) {
		assert_non_null(std::strstr(f.what.c_str(), "llmcached's stats accesses is '12x'"));
	}
}

static void status_json__no_stats_line__failure(void **)
{
	try {
		ctl::status_json(ctl::parse_status("global mode bpf enable 1\n"));
		fail_msg("a status without its stats line was accepted");
	} catch (const ctl::Failure &f) {
		assert_non_null(std::strstr(f.what.c_str(), "no 'stats' line"));
	}
}

static void loops_json__unknown_stall__null_and_the_files_path(void **)
{
	const std::string text = ctl::json_text(ctl::loops_json(ctl::parse_status(daemon_status_text())));
	const nlohmann::json j = parse_back(text);
	assert_count(j["total"], 1);
	assert_string_equal(j["bw_source"].get<std::string>().c_str(), "set");
	const nlohmann::json &loop = j["loops"][0];
	assert_string_equal(loop["path"].get<std::string>().c_str(), odd_path.c_str());
	assert_count(loop["seq"], 7);
	assert_count(loop["blocks"], 16);
	assert_count(loop["deficit"], 14);
	assert_true(loop["stall_ns"].is_null());
}

static void sessions_json__backend_string_beta_float_rest_counts(void **)
{
	const std::string listing = "session 3 backend emulated tokens 100 beta 1 odd\"key\\ 7\n"
				    "session 4 backend xrt tokens 0 beta 0.25\n";
	const std::string text = ctl::json_text(ctl::sessions_json(ctl::parse_sessions(listing)));
	assert_non_null(std::strstr(text.c_str(), R"("beta":1.0)")); // a fraction, even a whole one
	const nlohmann::json j = parse_back(text);
	const nlohmann::json &s = j["sessions"][0];
	assert_count(s["session"], 3);
	assert_string_equal(s["backend"].get<std::string>().c_str(), "emulated");
	assert_count(s["tokens"], 100);
	assert_true(s["beta"].is_number_float());
	assert_count(s["odd\"key\\"], 7);
	assert_true(j["sessions"][1]["beta"].is_number_float());
	assert_true(j["sessions"][1]["beta"].get<double>() == 0.25);
}

static void json_text__bytes_not_utf8__replaced_on_one_line(void **)
{
	const std::string text = ctl::json_text({{"path", std::string("/m/\xff\n")}});
	assert_string_equal(text.c_str(), "{\"path\":\"/m/\xef\xbf\xbd\\n\"}");
}

static void report_json__trace_path_with_quote_backslash_newline__escaped_and_intact(void **)
{
	using namespace llmcache::sim;
	Report r;
	r.trace_path = odd_path;
	r.trace_name = "a\"b\\c\nd";
	r.format = "csv";
	r.producer = "test";
	r.records = 100;
	r.accesses = 100;
	r.files = 1;
	r.footprint = 50;
	r.notes = {"a note with \"quotes\"\tand a tab"};
	r.policies = {"lru", "llm"};
	r.sizes = {parse_cache_size("10%"), parse_cache_size("100%")};
	r.capacities = {5, 50};
	RunResult none, all;
	none.misses = 100;
	all.hits = 100;
	all.has_classes = true;
	r.results = {none, all, none, all};
	r.bandwidths = {100000000};
	std::ostringstream out;
	write_json(out, r);
	const nlohmann::json j = parse_back(out.str());
	assert_string_equal(j["trace"]["path"].get<std::string>().c_str(), odd_path.c_str());
	assert_string_equal(j["trace"]["name"].get<std::string>().c_str(), "a\"b\\c\nd");
	assert_string_equal(j["trace"]["notes"][0].get<std::string>().c_str(), "a note with \"quotes\"\tand a tab");
	assert_count(j["trace"]["records"], 100);
	assert_count(j["trace"]["footprint_bytes"], 50 * 4096);
	assert_count(j["sizes"][0]["capacity_blocks"], 5);
	assert_count(j["latency_model"]["request_bytes"], 1024);
	assert_true(j["latency_model"]["io_setup_s"].is_number_float());
	// Hit ratios are floats even at exactly 0 and 1.
	assert_true(j["results"][0]["hit_ratio"].is_number_float());
	assert_true(j["results"][0]["hit_ratio"].get<double>() == 0.0);
	assert_true(j["results"][1]["hit_ratio"].is_number_float());
	assert_true(j["results"][1]["hit_ratio"].get<double>() == 1.0);
	assert_count(j["results"][1]["hits"], 100);
	assert_true(j["results"][0]["fetch_latency_s"]["100MB/s"].is_number_float());
	assert_true(j["results"][1]["classes"].is_object());
}

static void kv_replay_json__beta_float_budget_null_figures_counts(void **)
{
	llmcache::kv::KvReplayResult r;
	r.params.beta = 0;
	r.params.select_budget = 0;
	r.figures.appends = 5;
	r.figures.bytes_written = 1ull << 40;
	const nlohmann::json j = parse_back(llmcache::kv::format_kv_replay_json(r));
	assert_true(j["beta"].is_number_float());
	assert_true(j["select_budget"].is_null());
	assert_count(j["appends"], 5);
	assert_count(j["bytes_written"], 1ull << 40);
	assert_count(j["device"], 1); // a bool written as a count, as the text form has it
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(status_json__path_with_quote_backslash_newline__escaped_and_intact),
		cmocka_unit_test(status_json__daemon_values__words_strings_counts_unsigned),
		cmocka_unit_test(status_json__key_with_quote_and_backslash__escaped),
		cmocka_unit_test(status_json__value_not_a_count__failure_names_it),
		cmocka_unit_test(status_json__no_stats_line__failure),
		cmocka_unit_test(loops_json__unknown_stall__null_and_the_files_path),
		cmocka_unit_test(sessions_json__backend_string_beta_float_rest_counts),
		cmocka_unit_test(json_text__bytes_not_utf8__replaced_on_one_line),
		cmocka_unit_test(report_json__trace_path_with_quote_backslash_newline__escaped_and_intact),
		cmocka_unit_test(kv_replay_json__beta_float_budget_null_figures_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
