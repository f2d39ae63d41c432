// SPDX-License-Identifier: MIT
// Tables, CSV, JSON and SVG for a replay sweep. The SVG is written by hand: a plot area with grid lines and
// "nice" ticks (steps of 1, 2, 2.5 or 5 times a power of ten), one polyline with markers per series, a legend
// on the right and a title naming the trace.
#include "sim/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "util/units.hpp"

namespace llmcache::sim {

namespace {

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, f);
	std::vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

constexpr const char *class_names[LLMCACHE_NR_CLASSES] = {"SEQ", "LOOP", "HOT"};

double mib(uint64_t blocks) { return double(blocks) * LLMCACHE_BLOCK_SIZE / (1024.0 * 1024.0); }

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

// The unit, and its scale from seconds, that suits values up to `max` seconds.
std::pair<double, const char *> time_unit(double max)
{
	if (max >= 1.0)
		return {1.0, "s"};
	if (max >= 1e-3)
		return {1e3, "ms"};
	return {1e6, "us"};
}

// Columns aligned to their widest cell: the first left-aligned, the others right-aligned.
void write_table(std::ostream &os, const std::vector<std::vector<std::string>> &rows)
{
	std::vector<size_t> width;
	for (const auto &row : rows)
		for (size_t c = 0; c < row.size(); c++) {
			width.resize(std::max(width.size(), row.size()));
			width[c] = std::max(width[c], row[c].size());
		}
	for (const auto &row : rows) {
		std::string line = " ";
		for (size_t c = 0; c < row.size(); c++) {
			const std::string pad(width[c] - row[c].size(), ' ');
			line += "  " + (c == 0 ? row[c] + pad : pad + row[c]);
		}
		while (!line.empty() && line.back() == ' ')
			line.pop_back();
		os << line << '\n';
	}
}

size_t policy_index(const Report &r, const std::string &name)
{
	auto it = std::find(r.policies.begin(), r.policies.end(), name);
	if (it == r.policies.end())
		throw std::invalid_argument("latency policy '" + name + "' was not replayed");
	return size_t(it - r.policies.begin());
}

std::string csv_field(const std::string &s)
{
	if (s.find_first_of(",\"\n") == std::string::npos)
		return s;
	std::string out = "\"";
	for (char c : s)
		out += c == '"' ? std::string("\"\"") : std::string(1, c);
	return out + '"';
}

std::string xml_escape(std::string_view s)
{
	std::string out;
	for (char c : s) {
		switch (c) {
		case '<': out += "&lt;"; break;
		case '>': out += "&gt;"; break;
		case '&': out += "&amp;"; break;
		case '"': out += "&quot;"; break;
		default: out += c;
		}
	}
	return out;
}

// ---- SVG ----

struct Series {
	std::string name;
	std::vector<std::pair<double, double>> points; // sorted by x
};

struct Axis {
	double max = 1, step = 1;
	std::string label;
	std::string suffix; // appended to tick labels, e.g. "%"
};

// A step of 1, 2, 2.5 or 5 x 10^k giving at most about `ticks` intervals up to `max`, and max rounded up.
Axis nice_axis(double max, int ticks, std::string label, std::string suffix = {})
{
	Axis a{1, 1, std::move(label), std::move(suffix)};
	if (!(max > 0))
		return a;
	const double raw = max / ticks, mag = std::pow(10.0, std::floor(std::log10(raw)));
	for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
		if (m * mag >= raw * (1 - 1e-9)) {
			a.step = m * mag;
			break;
		}
	a.max = std::ceil(max / a.step - 1e-9) * a.step;
	return a;
}

constexpr const char *palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
				   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#637939",
				   "#843c39", "#393b79"};
constexpr int nr_shapes = 7;

void marker(std::ostream &os, size_t i, double x, double y)
{
	const char *c = palette[i % std::size(palette)];
	const double r = 4;
	switch (i % nr_shapes) {
	case 0:
		os << fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>", x, y, r, c);
		break;
	case 1:
		os << fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x - r, y - r, 2 * r,
			  2 * r, c);
		break;
	case 2:
		os << fmt("<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>", x, y - r - 1, x - r - 1,
			  y + r, x + r + 1, y + r, c);
		break;
	case 3:
		os << fmt("<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>", x, y - r - 1,
			  x + r + 1, y, x, y + r + 1, x - r - 1, y, c);
		break;
	case 4:
		os << fmt("<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>", x, y + r + 1, x - r - 1,
			  y - r, x + r + 1, y - r, c);
		break;
	case 5:
		os << fmt("<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" stroke-width=\"2\"/>",
			  x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r, c);
		break;
	default:
		os << fmt("<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" stroke-width=\"2\"/>",
			  x - r - 1, y, x + r + 1, y, x, y - r - 1, x, y + r + 1, c);
	}
	os << '\n';
}

std::string tick_label(double v, const std::string &suffix) { return fmt("%.6g", v) + suffix; }

void write_plot(std::ostream &os, const std::string &title, const std::string &subtitle, const Axis &xa,
		const Axis &ya, const std::vector<Series> &series)
{
	const double W = 780, H = 480, left = 80, right = 170, top = 56, bottom = 60;
	const double pw = W - left - right, ph = H - top - bottom;
	auto X = [&](double x) { return left + pw * x / xa.max; };
	auto Y = [&](double y) { return top + ph * (1 - y / ya.max); };

	os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	   << fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		  "font-family=\"sans-serif\" font-size=\"12\">\n",
		  W, H, W, H)
	   << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
	   << fmt("<text x=\"%.1f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
		  left + pw / 2, xml_escape(title).c_str())
	   << fmt("<text x=\"%.1f\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", left + pw / 2,
		  xml_escape(subtitle).c_str());

	// Grid and ticks.
	os << "<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
	for (double v = 0; v <= ya.max * (1 + 1e-9); v += ya.step)
		os << fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left, Y(v), left + pw, Y(v));
	for (double v = 0; v <= xa.max * (1 + 1e-9); v += xa.step)
		os << fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", X(v), top, X(v), top + ph);
	os << "</g>\n<g text-anchor=\"end\">\n";
	for (double v = 0; v <= ya.max * (1 + 1e-9); v += ya.step)
		os << fmt("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", left - 6, Y(v) + 4,
			  xml_escape(tick_label(v, ya.suffix)).c_str());
	os << "</g>\n<g text-anchor=\"middle\">\n";
	for (double v = 0; v <= xa.max * (1 + 1e-9); v += xa.step)
		os << fmt("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", X(v), top + ph + 18,
			  xml_escape(tick_label(v, xa.suffix)).c_str());
	os << "</g>\n"
	   << fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", left,
		  top, pw, ph)
	   << fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", left + pw / 2, H - 16,
		  xml_escape(xa.label).c_str())
	   << fmt("<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", 22.0,
		  top + ph / 2, xml_escape(ya.label).c_str());

	// Series and legend.
	for (size_t i = 0; i < series.size(); i++) {
		const char *c = palette[i % std::size(palette)];
		os << fmt("<g id=\"series-%zu\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", i, c);
		for (size_t k = 0; k < series[i].points.size(); k++)
			os << (k ? " " : "") << fmt("%.1f,%.1f", X(series[i].points[k].first), Y(series[i].points[k].second));
		os << "\"/>\n";
		for (const auto &[x, y] : series[i].points)
			marker(os, i, X(x), Y(y));
		const double ly = top + 10 + 20 * double(i), lx = left + pw + 16;
		os << fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", lx,
			  ly, lx + 28, ly, c);
		marker(os, i, lx + 14, ly);
		os << fmt("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n</g>\n", lx + 36, ly + 4,
			  xml_escape(series[i].name).c_str());
	}
	os << "</svg>\n";
}

// x of size s: its percentage of the footprint when every size was given in %, else MiB.
bool x_in_percent(const Report &r)
{
	return std::all_of(r.sizes.begin(), r.sizes.end(),
			   [](const CacheSize &c) { return c.kind == CacheSize::Kind::fraction; });
}

double x_of(const Report &r, size_t s) { return x_in_percent(r) ? r.sizes[s].value * 100.0 : mib(r.capacities[s]); }

Axis x_axis(const Report &r)
{
	double max = 0;
	for (size_t s = 0; s < r.sizes.size(); s++)
		max = std::max(max, x_of(r, s));
	return x_in_percent(r) ? nice_axis(max, 10, "Cache size (% of footprint)", "%")
			       : nice_axis(max, 8, "Cache size (MiB)");
}

std::vector<size_t> sizes_by_x(const Report &r)
{
	std::vector<size_t> order(r.sizes.size());
	std::iota(order.begin(), order.end(), 0);
	std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x_of(r, a) < x_of(r, b); });
	return order;
}

std::string trace_subtitle(const Report &r)
{
	return fmt("%llu accesses, footprint %llu blocks (%.1f MiB)", (unsigned long long)r.accesses,
		   (unsigned long long)r.footprint, mib(r.footprint));
}

std::vector<std::string> size_cells(const Report &r, size_t s)
{
	return {r.sizes[s].text, std::to_string(r.capacities[s]), fmt("%.1f", mib(r.capacities[s]))};
}

} // namespace

void Report::set_trace(const Trace &t, const std::string &path, const std::string &format_name)
{
	trace_path = path;
	const size_t slash = path.find_last_of('/');
	trace_name = slash == std::string::npos ? path : path.substr(slash + 1);
	format = format_name;
	producer = t.producer;
	records = t.records;
	accesses = t.requests.size();
	files = t.files.size();
	footprint = t.footprint;
	notes = t.notes;
}

void Report::set_top_files(const Trace &t, size_t n)
{
	std::vector<uint64_t> count(t.files.size());
	for (const Request &q : t.requests)
		count[key_file(q.key)]++;
	std::vector<uint32_t> order(count.size());
	for (uint32_t f = 0; f < order.size(); f++)
		order[f] = f;
	n = std::min(n, order.size());
	std::partial_sort(order.begin(), order.begin() + ptrdiff_t(n), order.end(),
			  [&](uint32_t a, uint32_t b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
	top_files.clear();
	for (size_t i = 0; i < n; i++) {
		const uint32_t f = order[i];
		const std::string &path = f < t.paths.size() ? t.paths[f] : std::string();
		top_files.push_back({f, path.empty() ? "file " + std::to_string(f) : path, count[f]});
	}
}

std::string format_bandwidth(uint64_t bps)
{
	if (bps >= 1000000000 && bps % 10000000 == 0)
		return fmt("%gGB/s", double(bps) / 1e9);
	if (bps >= 1000000 && bps % 10000 == 0)
		return fmt("%gMB/s", double(bps) / 1e6);
	if (bps >= 1000 && bps % 10 == 0)
		return fmt("%gKB/s", double(bps) / 1e3);
	return fmt("%lluB/s", (unsigned long long)bps);
}

void write_summary(std::ostream &os, const Report &r)
{
	os << "trace: " << r.trace_path << " (" << r.format << (r.producer.empty() ? "" : ", " + r.producer) << ")\n"
	   << fmt("records: %llu  accesses: %llu (4 KiB blocks)  files: %llu  footprint: %llu blocks (%s)\n",
		  (unsigned long long)r.records, (unsigned long long)r.accesses, (unsigned long long)r.files,
		  (unsigned long long)r.footprint, units::format_bytes(r.footprint * LLMCACHE_BLOCK_SIZE).c_str());
	for (const auto &n : r.notes)
		os << "note: " << n << '\n';
}

void write_tables(std::ostream &os, const Report &r)
{
	std::vector<std::vector<std::string>> rows{{"cache", "blocks", "MiB"}};
	for (const auto &p : r.policies)
		rows[0].push_back(p);
	for (size_t s = 0; s < r.sizes.size(); s++) {
		rows.push_back(size_cells(r, s));
		for (size_t p = 0; p < r.policies.size(); p++)
			rows.back().push_back(fmt("%.2f", 100.0 * r.at(p, s).hit_ratio()));
	}
	os << "\nhit ratio (%):\n";
	write_table(os, rows);

	for (size_t s = 0; s < r.sizes.size() && !r.top_files.empty(); s++) {
		rows = {{"file", "accesses"}};
		for (const auto &p : r.policies)
			rows[0].push_back(p);
		for (const Report::FileRow &f : r.top_files) {
			rows.push_back({f.name, std::to_string(f.accesses)});
			for (size_t p = 0; p < r.policies.size(); p++) {
				const std::vector<uint64_t> &fh = r.at(p, s).file_hits;
				rows.back().push_back(fmt("%.2f", percent(f.number < fh.size() ? fh[f.number] : 0, f.accesses)));
			}
		}
		os << fmt("\nhit ratio (%%) of the %zu most accessed files at %s (%llu blocks):\n", r.top_files.size(),
			  r.sizes[s].text.c_str(), (unsigned long long)r.capacities[s]);
		write_table(os, rows);
	}

	for (size_t p = 0; p < r.policies.size(); p++) {
		if (r.sizes.empty() || !r.at(p, 0).has_classes)
			continue;
		rows = {{"cache", "blocks", "MiB"}};
		for (const char *c : class_names)
			rows[0].push_back(std::string(c) + " hits/accesses");
		for (size_t s = 0; s < r.sizes.size(); s++) {
			rows.push_back(size_cells(r, s));
			const Policy::ClassStats &cs = r.at(p, s).classes;
			for (int c = 0; c < LLMCACHE_NR_CLASSES; c++)
				rows.back().push_back(fmt("%llu/%llu (%.1f%%)", (unsigned long long)cs.hits[c],
							  (unsigned long long)cs.accesses[c], percent(cs.hits[c], cs.accesses[c])));
		}
		os << '\n' << r.policies[p] << " hits by class:\n";
		write_table(os, rows);
	}

	if (r.bandwidths.empty())
		return;
	const size_t lp = policy_index(r, r.latency_policy);
	std::vector<std::vector<double>> secs(r.sizes.size());
	double max = 0;
	for (size_t s = 0; s < r.sizes.size(); s++)
		for (uint64_t bw : r.bandwidths) {
			secs[s].push_back(fetch_latency(r.at(lp, s).hits, r.at(lp, s).misses, double(bw), r.model).total_s());
			max = std::max(max, secs[s].back());
		}
	const auto [scale, unit] = time_unit(max);
	rows = {{"cache", "blocks", "MiB", "misses"}};
	for (uint64_t bw : r.bandwidths)
		rows[0].push_back(format_bandwidth(bw));
	for (size_t s = 0; s < r.sizes.size(); s++) {
		rows.push_back(size_cells(r, s));
		rows.back().push_back(std::to_string(r.at(lp, s).misses));
		for (double v : secs[s])
			rows.back().push_back(fmt("%.3f", v * scale));
	}
	os << '\n'
	   << fmt("%s total data-fetch latency (%s) by storage bandwidth (per miss %g us + %llu B/BW; per access %llu x "
		  "(%g us + %llu B / %s)):\n",
		  r.latency_policy.c_str(), unit, r.model.io_setup_s * 1e6, (unsigned long long)r.model.page_bytes,
		  (unsigned long long)(r.model.page_bytes / std::max<uint64_t>(1, r.model.request_bytes)),
		  r.model.transfer_setup_s * 1e6, (unsigned long long)r.model.request_bytes,
		  format_bandwidth(uint64_t(r.model.transfer_bytes_per_s)).c_str());
	write_table(os, rows);
}

void write_csv(std::ostream &os, const Report &r)
{
	os << "policy,size,capacity_blocks,capacity_bytes,capacity_fraction,accesses,hits,misses,hit_ratio,"
	      "seq_accesses,seq_hits,loop_accesses,loop_hits,hot_accesses,hot_hits";
	for (uint64_t bw : r.bandwidths)
		os << ",fetch_s@" << format_bandwidth(bw);
	os << '\n';
	for (size_t p = 0; p < r.policies.size(); p++)
		for (size_t s = 0; s < r.sizes.size(); s++) {
			const RunResult &res = r.at(p, s);
			os << csv_field(r.policies[p]) << ',' << csv_field(r.sizes[s].text) << ',' << r.capacities[s] << ','
			   << r.capacities[s] * LLMCACHE_BLOCK_SIZE << ','
			   << fmt("%.6g", r.footprint ? double(r.capacities[s]) / double(r.footprint) : 0.0) << ','
			   << res.accesses() << ',' << res.hits << ',' << res.misses << ',' << fmt("%.6f", res.hit_ratio());
			for (int c = 0; c < LLMCACHE_NR_CLASSES; c++)
				if (res.has_classes)
					os << ',' << res.classes.accesses[c] << ',' << res.classes.hits[c];
				else
					os << ",,";
			for (uint64_t bw : r.bandwidths)
				os << ',' << fmt("%.9g", fetch_latency(res.hits, res.misses, double(bw), r.model).total_s());
			os << '\n';
		}
}

void write_json(std::ostream &os, const Report &r)
{
	using Json = nlohmann::ordered_json;
	Json out;
	out["trace"] = {{"path", r.trace_path},
			{"name", r.trace_name},
			{"format", r.format},
			{"producer", r.producer},
			{"records", r.records},
			{"accesses", r.accesses},
			{"files", r.files},
			{"footprint_blocks", r.footprint},
			{"footprint_bytes", r.footprint * LLMCACHE_BLOCK_SIZE},
			{"notes", r.notes}};
	out["sizes"] = Json::array();
	for (size_t s = 0; s < r.sizes.size(); s++)
		out["sizes"].push_back({{"size", r.sizes[s].text},
					{"capacity_blocks", r.capacities[s]},
					{"capacity_bytes", r.capacities[s] * LLMCACHE_BLOCK_SIZE}});
	out["bandwidths"] = Json::array();
	for (uint64_t bw : r.bandwidths)
		out["bandwidths"].push_back({{"name", format_bandwidth(bw)}, {"bytes_per_s", bw}});
	out["latency_model"] = {{"request_bytes", r.model.request_bytes},
				{"page_bytes", r.model.page_bytes},
				{"io_setup_s", r.model.io_setup_s},
				{"transfer_bytes_per_s", r.model.transfer_bytes_per_s},
				{"transfer_setup_s", r.model.transfer_setup_s}};
	out["results"] = Json::array();
	for (size_t p = 0; p < r.policies.size(); p++)
		for (size_t s = 0; s < r.sizes.size(); s++) {
			const RunResult &res = r.at(p, s);
			Json one = {{"policy", r.policies[p]},
				    {"size", r.sizes[s].text},
				    {"capacity_blocks", r.capacities[s]},
				    {"accesses", res.accesses()},
				    {"hits", res.hits},
				    {"misses", res.misses},
				    {"hit_ratio", res.hit_ratio()}};
			if (res.has_classes)
				for (int c = 0; c < LLMCACHE_NR_CLASSES; c++) {
					std::string name = class_names[c];
					std::transform(name.begin(), name.end(), name.begin(), ::tolower);
					one["classes"][name] = {{"accesses", res.classes.accesses[c]}, {"hits", res.classes.hits[c]}};
				}
			if (!r.top_files.empty()) {
				one["files"] = Json::array();
				for (const Report::FileRow &f : r.top_files)
					one["files"].push_back({{"file", f.name},
								{"accesses", f.accesses},
								{"hits", f.number < res.file_hits.size() ? res.file_hits[f.number] : 0}});
			}
			if (!r.bandwidths.empty())
				for (uint64_t bw : r.bandwidths)
					one["fetch_latency_s"][format_bandwidth(bw)] =
						fetch_latency(res.hits, res.misses, double(bw), r.model).total_s();
			out["results"].push_back(one);
		}
	// Non-finite numbers become null; bytes of a path that are not UTF-8 become U+FFFD.
	os << out.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

void write_hit_ratio_svg(std::ostream &os, const Report &r)
{
	std::vector<Series> series;
	const std::vector<size_t> order = sizes_by_x(r);
	for (size_t p = 0; p < r.policies.size(); p++) {
		series.push_back({r.policies[p], {}});
		for (size_t s : order)
			series.back().points.emplace_back(x_of(r, s), 100.0 * r.at(p, s).hit_ratio());
	}
	Axis ya{100, 10, "Hit ratio (%)", "%"};
	write_plot(os, "Hit ratio vs cache size: " + r.trace_name, trace_subtitle(r), x_axis(r), ya, series);
}

void write_latency_svg(std::ostream &os, const Report &r)
{
	const size_t lp = policy_index(r, r.latency_policy);
	const std::vector<size_t> order = sizes_by_x(r);
	double max = 0;
	for (size_t s : order)
		for (uint64_t bw : r.bandwidths)
			max = std::max(max, fetch_latency(r.at(lp, s).hits, r.at(lp, s).misses, double(bw), r.model).total_s());
	const auto [scale, unit] = time_unit(max);
	std::vector<Series> series;
	for (uint64_t bw : r.bandwidths) {
		series.push_back({format_bandwidth(bw), {}});
		for (size_t s : order) {
			const RunResult &res = r.at(lp, s);
			series.back().points.emplace_back(x_of(r, s),
							  scale * fetch_latency(res.hits, res.misses, double(bw), r.model).total_s());
		}
	}
	write_plot(os, "Data-fetch latency (" + r.latency_policy + ") vs cache size: " + r.trace_name,
		   trace_subtitle(r) + "; one line per storage bandwidth", x_axis(r),
		   nice_axis(max * scale, 8, std::string("Total fetch latency (") + unit + ")"), series);
}

} // namespace llmcache::sim
