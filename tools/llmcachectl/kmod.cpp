// SPDX-License-Identifier: MIT
// llmcachectl status / register / unregister / set / set-file: the llmcache.ko interfaces, /sys/kernel/llmcache/
// (read by anyone) and /dev/llmcache (root only). See Documentation/admin-guide.md.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <string>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

#include <boost/program_options.hpp>

#include "../../include/uapi/llmcache.h"
#include "kmod.hpp"
#include "util/units.hpp"

namespace po = boost::program_options;
namespace units = llmcache::units;

namespace llmcache::kmod {

const std::string sysfs = LLMCACHE_SYSFS_DIR;

namespace {
const char *const not_loaded = "the llmcache module is not loaded: insmod build/kmod-$(uname -r)/llmcache.ko "
			       "(see Documentation/admin-guide.md)";
} // namespace

// One sysfs value, newline stripped; throws when it cannot be read.
std::string read_value(const std::string &name)
{
	std::ifstream in(sysfs + "/" + name);
	std::string v;
	if (!in || !std::getline(in, v))
		throw Failure{"cannot read " + sysfs + "/" + name};
	return v;
}

void require_loaded()
{
	if (access(sysfs.c_str(), F_OK))
		throw Failure{not_loaded};
}

int open_device()
{
	require_loaded();
	int dev = open("/dev/" LLMCACHE_DEV_NAME, O_RDWR | O_CLOEXEC);
	if (dev < 0 && (errno == EACCES || errno == EPERM))
		throw Failure{"/dev/" LLMCACHE_DEV_NAME " is root only: run as root"};
	if (dev < 0)
		throw Failure{std::string("cannot open /dev/" LLMCACHE_DEV_NAME ": ") + std::strerror(errno)};
	return dev;
}

std::vector<std::string> file_ids()
{
	std::vector<std::string> ids;
	if (DIR *d = opendir((sysfs + "/files").c_str())) {
		while (dirent *e = readdir(d))
			if (e->d_name[0] != '.')
				ids.push_back(e->d_name);
		closedir(d);
	}
	std::sort(ids.begin(), ids.end(), [](const std::string &a, const std::string &b) {
		return std::stoull(a) < std::stoull(b);
	});
	return ids;
}

} // namespace llmcache::kmod

namespace {

using namespace llmcache::kmod;

// What status shows of each sysfs directory: the names listed here in this order, then any other value
// the directory holds, by name, so that a statistic or tunable added to the module shows up unlisted.
const char *const top_names[] = {"enable", "pin_budget", "hot_reserve", "bw", "t_ns", "seq_drop_ns", "hook_mode",
				 "registered"};
const char *const stat_names[] = {"accesses", "hits", "misses", "seq_blocks", "loop_blocks", "hot_blocks",
				  "loop_iterations", "seqs_created", "seqs_recycled", "chunks_recycled", "pinned",
				  "shrinker_released", "events_dropped", "seq_dropped", "hot_protected",
				  "loop_dropped", "loop_read_ahead", "reuse_room", "seq_seqs", "loop_seqs", "hot_seqs"};
const char *const sizing_names[] = {"bw_measured", "t_measured_ns"};
const char *const auto_names[] = {"mode", "target", "min_size", "registered", "scans"};
const char *const kv_names[] = {"sessions", "selects", "beta_milli", "pushes", "last_push_ns"};
const char *const kv_pool_names[] = {"bytes", "tokens", "spills", "restores", "bus_bytes", "kernel_runs",
				     "scored_tokens", "score_latency_ns"};
const char *const file_fields[] = {"accesses", "seq_blocks", "loop_blocks", "hot_blocks", "added", "removed",
				   "pinned", "flags", "pin_limit"};

// The values of directory dir ("" for the top) as (name, value) pairs, in the order above.
template <size_t N>
std::vector<std::pair<std::string, std::string>> values(const std::string &dir, const char *const (&known)[N])
{
	const std::string prefix = dir.empty() ? "" : dir + "/";
	std::vector<std::string> names(known, known + N), extra;
	if (DIR *d = opendir((sysfs + "/" + dir).c_str())) {
		while (dirent *e = readdir(d))
			if (e->d_type == DT_REG && std::find(names.begin(), names.end(), e->d_name) == names.end())
				extra.push_back(e->d_name);
		closedir(d);
	}
	std::sort(extra.begin(), extra.end());
	names.insert(names.end(), extra.begin(), extra.end());
	std::vector<std::pair<std::string, std::string>> out;
	for (const auto &n : names)
		out.emplace_back(n, read_value(prefix + n));
	return out;
}

// The JSON object of directory dir's known values (names), each a count except those in words.
template <size_t N>
Json json_values(const std::string &dir, const char *const (&names)[N], std::initializer_list<std::string> words = {})
{
	const std::string prefix = dir.empty() ? "" : dir + "/";
	Json out = Json::object();
	for (const char *n : names) {
		const std::string v = read_value(prefix + n);
		out[n] = std::find(words.begin(), words.end(), n) != words.end() ? Json(v) : json_count(v, sysfs + "/" + prefix + n);
	}
	return out;
}

// status --json: the schema of Documentation/admin-guide.md, the documented values only (the human
// form also shows values a newer module adds).
void print_status_json(bool kv)
{
	Json j = {{"source", "llmcache.ko"}};
	j.update(json_values("", top_names, {"hook_mode"}));
	j["stats"] = json_values("stats", stat_names);
	j["sizing"] = json_values("sizing", sizing_names);
	j["auto"] = json_values("auto", auto_names, {"mode"});
	if (kv) {
		j["kv"] = json_values("kv", kv_names);
		j["kv"]["cpu"] = json_values("kv/cpu", kv_pool_names);
		j["kv"]["storage"] = json_values("kv/storage", kv_pool_names);
	}
	j["files"] = Json::array();
	for (const auto &id : file_ids()) {
		Json f = {{"id", json_count(id, sysfs + "/files/" + id)}, {"path", read_value("files/" + id + "/path")}};
		f.update(json_values("files/" + id, file_fields));
		j["files"].push_back(f);
	}
	std::printf("%s\n", json_text(j).c_str());
}

int status(const std::vector<std::string> &args)
{
	bool json = false;
	po::options_description d("llmcachectl status: the module's settings, statistics and registered files");
	d.add_options()("help,h", "show this help")("json", po::bool_switch(&json), "print JSON");
	po::variables_map vm;
	po::store(po::command_line_parser(args).options(d).run(), vm);
	po::notify(vm);
	if (vm.count("help")) {
		std::cout << "Usage: llmcachectl status [--json]\n\n" << d
			  << "\nEXAMPLES\n  llmcachectl status\n  llmcachectl status --json\n";
		return 0;
	}
	require_loaded();
	// kv/: llmcached's last push (absent when the module could not create it).
	const bool kv = access((sysfs + "/kv").c_str(), F_OK) == 0;
	if (json) {
		print_status_json(kv);
		return 0;
	}
	const auto top = values("", top_names), stats = values("stats", stat_names),
		   sizing = values("sizing", sizing_names), autom = values("auto", auto_names);
	const auto kvs = kv ? values("kv", kv_names) : decltype(top){};
	const auto cpu = kv ? values("kv/cpu", kv_pool_names) : kvs, storage = kv ? values("kv/storage", kv_pool_names) : kvs;
	auto get = [](const auto &kv, const std::string &name) {
		for (const auto &[k, v] : kv)
			if (k == name)
				return v;
		return std::string();
	};
	auto num = [&](const auto &kv, const std::string &name) { return std::stoull(get(kv, name)); };
	const uint64_t drop = num(top, "seq_drop_ns");
	std::printf("llmcache.ko: %s, hooks %s, %s files registered\n", num(top, "enable") ? "enabled" : "disabled",
		    get(top, "hook_mode").c_str(), get(top, "registered").c_str());
	std::printf("pin budget %s, hot reserve %s, BW %s, T %s, SEQ drop %s\n",
		    units::format_bytes(num(top, "pin_budget")).c_str(), units::format_bytes(num(top, "hot_reserve")).c_str(),
		    num(top, "bw") ? (units::format_bytes(num(top, "bw")) + "/s").c_str() : "measured",
		    num(top, "t_ns") ? units::format_duration(num(top, "t_ns")).c_str() : "measured",
		    drop ? ("after " + units::format_duration(drop)).c_str() : "off");
	const uint64_t bw_m = num(sizing, "bw_measured"), t_m = num(sizing, "t_measured_ns");
	std::printf("measured: BW %s, T %s\n", bw_m ? (units::format_bytes(bw_m) + "/s").c_str() : "none yet",
		    t_m ? units::format_duration(t_m).c_str() : "none (no loops)");
	if (get(autom, "mode") == "off")
		std::printf("automatic mode off\n");
	else
		std::printf("automatic mode: %s %s, files from %s, %s registered in %s scans\n", get(autom, "mode").c_str(),
			    get(autom, "target").c_str(), units::format_bytes(num(autom, "min_size")).c_str(),
			    get(autom, "registered").c_str(), get(autom, "scans").c_str());
	for (const auto &[k, v] : top) // values without a place above (added to the module since)
		if (std::find(std::begin(top_names), std::end(top_names), k) == std::end(top_names))
			std::printf("  %-18s %s\n", k.c_str(), v.c_str());
	for (const auto &[k, v] : stats)
		std::printf("  %-18s %s\n", k.c_str(), v.c_str());
	if (kv && num(kvs, "pushes"))
		std::printf("KV (llmcached): %s sessions, %s selects, CPU pool %s (%s tokens), storage %s (%s tokens)\n",
			    get(kvs, "sessions").c_str(), get(kvs, "selects").c_str(),
			    units::format_bytes(num(cpu, "bytes")).c_str(), get(cpu, "tokens").c_str(),
			    units::format_bytes(num(storage, "bytes")).c_str(), get(storage, "tokens").c_str());
	for (const auto &id : file_ids()) {
		std::string p = "files/" + id + "/";
		const uint64_t limit = std::stoull(read_value(p + "pin_limit"));
		std::printf("file %s: %s\n  accesses %s (SEQ %s, LOOP %s, HOT %s), pinned %s, flags %s, pin limit %s\n",
			    id.c_str(), read_value(p + "path").c_str(), read_value(p + "accesses").c_str(),
			    read_value(p + "seq_blocks").c_str(), read_value(p + "loop_blocks").c_str(),
			    read_value(p + "hot_blocks").c_str(), read_value(p + "pinned").c_str(),
			    read_value(p + "flags").c_str(), limit ? units::format_bytes(limit).c_str() : "none");
	}
	return 0;
}

// A command's arguments: the options of visible (which has --help) and a list of words; fills values,
// returns whether --help was given. Throws po::error on an unknown option.
bool positionals(const std::vector<std::string> &args, const po::options_description &visible,
		 std::vector<std::string> &values)
{
	po::options_description hidden, all;
	hidden.add_options()("value", po::value(&values));
	po::positional_options_description pos;
	pos.add("value", -1);
	all.add(visible).add(hidden);
	po::variables_map vm;
	po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
	po::notify(vm);
	return vm.count("help") > 0;
}

// register / unregister / set-file PATH...: one ioctl per file; register and set-file take the
// per-file options (register sets them right after registering when any is given).
int registration(const std::string &cmd, const std::vector<std::string> &args)
{
	const bool reg = cmd == "register", opts_cmd = cmd == "set-file", takes_opts = reg || opts_cmd;
	bool no_pin = false, no_drop = false, no_protect = false, no_read_ahead = false;
	std::string pin_limit_text = "0";
	std::vector<std::string> paths;
	po::options_description d("Options");
	d.add_options()("help,h", "show this help");
	if (takes_opts)
		d.add_options()("no-pin", po::bool_switch(&no_pin), "never pin the files' blocks")(
			"no-drop", po::bool_switch(&no_drop), "never invalidate the files' SEQ blocks")(
			"no-protect", po::bool_switch(&no_protect), "never protect the files' HOT blocks")(
			"no-read-ahead", po::bool_switch(&no_read_ahead),
			"never read the files' loops ahead of an mmap engine")(
			"pin-limit", po::value(&pin_limit_text)->default_value(pin_limit_text),
			"bytes each file may pin (0: only pin_budget limits it)");
	const bool help = positionals(args, d, paths);
	if (help || paths.empty()) {
		if (opts_cmd)
			std::printf("Usage: llmcachectl set-file PATH... [options]\n\nSet the options of registered files "
				    "(root only); options not given are cleared.\n\n");
		else
			std::printf("Usage: llmcachectl %s PATH...%s\n\n%s regular files %s llmcache.ko (root only).\n\n",
				    cmd.c_str(), reg ? " [options]" : "", reg ? "Register" : "Unregister", reg ? "with" : "from");
		if (takes_opts)
			std::cout << d;
		std::printf("\nEXAMPLES\n  llmcachectl %s model/weights.bin model/tokenizer.bin\n%s", cmd.c_str(),
			    reg        ? "  llmcachectl register --no-pin model/scratch.bin\n"
					 "  llmcachectl register --pin-limit 256MiB model/weights.bin\n"
			    : opts_cmd ? "  llmcachectl set-file --no-pin model/scratch.bin\n"
					 "  llmcachectl set-file --pin-limit 256MiB model/weights.bin\n"
				       : "");
		return help ? 0 : 2;
	}
	llmcache_ioc_file_opts opts{};
	opts.flags = (no_pin ? LLMCACHE_FILE_NO_PIN : 0) | (no_drop ? LLMCACHE_FILE_NO_DROP : 0) |
		     (no_protect ? LLMCACHE_FILE_NO_PROTECT : 0) | (no_read_ahead ? LLMCACHE_FILE_NO_READ_AHEAD : 0);
	try {
		opts.pin_limit = units::parse_bytes(pin_limit_text);
	} catch (const std::invalid_argument &e) {
		throw po::error(std::string("--pin-limit: ") + e.what());
	}
	const bool set_opts = opts_cmd || (reg && (opts.flags || opts.pin_limit));
	int dev = open_device(), failed = 0;
	for (const auto &path : paths) {
		int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			std::fprintf(stderr, "llmcachectl %s: %s: %s\n", cmd.c_str(), path.c_str(), std::strerror(errno));
			failed++;
			continue;
		}
		llmcache_ioc_file req{};
		req.fd = fd;
		opts.fd = fd;
		if ((!opts_cmd && ioctl(dev, reg ? LLMCACHE_IOC_REGISTER : LLMCACHE_IOC_UNREGISTER, &req)) ||
		    (set_opts && ioctl(dev, LLMCACHE_IOC_SET_FILE_OPTS, &opts))) {
			const char *why = errno == EEXIST   ? "already registered"
					  : errno == ENOENT ? "not registered"
					  : errno == EINVAL ? "not a regular file"
							    : std::strerror(errno);
			std::fprintf(stderr, "llmcachectl %s: %s: %s\n", cmd.c_str(), path.c_str(), why);
			failed++;
		} else if (opts_cmd) {
			std::printf("%s: flags %u, pin limit %s\n", path.c_str(), opts.flags,
				    opts.pin_limit ? units::format_bytes(opts.pin_limit).c_str() : "none");
		} else {
			std::printf("%s %s (%s/files/%llu)\n", reg ? "registered" : "unregistered", path.c_str(),
				    sysfs.c_str(), (unsigned long long)req.id);
		}
		close(fd);
	}
	close(dev);
	return failed ? 1 : 0;
}

int set(const std::vector<std::string> &args)
{
	std::vector<std::string> settings;
	po::options_description help_only;
	help_only.add_options()("help,h", "show this help");
	const bool help = positionals(args, help_only, settings);
	if (help || settings.empty()) {
		std::printf("Usage: llmcachectl set NAME=VALUE...\n\nNames: enable (0 or 1), pin_budget and hot_reserve "
			    "(bytes: 512MiB), bw (100MB/s), t (100ms),\nseq_drop (1s: drop a file's "
			    "one-time scans this long after its last one; 0 or \"off\": never).\nbw and t take 0 or \"measured\": "
			    "the sizing rule then uses the measured values (llmcachectl loops).\n\nEXAMPLES\n"
			    "  llmcachectl set pin_budget=512MiB hot_reserve=4MiB\n  llmcachectl set bw=1GB/s t=100ms\n"
			    "  llmcachectl set seq_drop=200ms\n");
		return help ? 0 : 2;
	}
	require_loaded();
	for (const auto &s : settings) {
		auto eq = s.find('=');
		if (eq == std::string::npos)
			throw po::error("'" + s + "' is not NAME=VALUE");
		std::string name = s.substr(0, eq), text = s.substr(eq + 1);
		uint64_t v;
		try {
			if (name == "enable") {
				if (text != "0" && text != "1")
					throw std::invalid_argument("'" + text + "' is not 0 or 1");
				v = text == "1";
			} else if (name == "pin_budget" || name == "hot_reserve") {
				v = units::parse_bytes(text);
			} else if (name == "bw") {
				v = text == "measured" ? 0 : units::parse_bandwidth(text);
			} else if (name == "t" || name == "t_ns") {
				name = "t_ns";
				v = text == "measured" ? 0 : units::parse_duration_ns(text);
			} else if (name == "seq_drop" || name == "seq_drop_ns") {
				name = "seq_drop_ns";
				v = text == "off" ? 0 : units::parse_duration_ns(text);
			} else {
				throw po::error("unknown setting '" + name +
						"': say enable, pin_budget, hot_reserve, bw, t or seq_drop");
			}
		} catch (const std::invalid_argument &e) {
			throw po::error(name + ": " + e.what());
		}
		std::ofstream out(sysfs + "/" + name);
		out << v << '\n';
		out.flush();
		if (!out)
			throw Failure{"writing " + std::to_string(v) + " to " + sysfs + "/" + name + " failed" +
				      (geteuid() ? ": run as root" : "")};
		std::printf("%s = %llu\n", name.c_str(), (unsigned long long)v);
	}
	return 0;
}

int run(const std::string &cmd, int argc, char **argv)
{
	std::vector<std::string> args(argv + 1, argv + argc);
	return report_errors(cmd, [&] {
		if (cmd == "status")
			return status(args);
		if (cmd == "set")
			return set(args);
		return registration(cmd, args);
	});
}

} // namespace

int cmd_status(int argc, char **argv) { return run("status", argc, argv); }
int cmd_register(int argc, char **argv) { return run("register", argc, argv); }
int cmd_unregister(int argc, char **argv) { return run("unregister", argc, argv); }
int cmd_set(int argc, char **argv) { return run("set", argc, argv); }
int cmd_set_file(int argc, char **argv) { return run("set-file", argc, argv); }
