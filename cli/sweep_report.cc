#include "cli/sweep_report.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

#include "core/confidence.h"

namespace servelab {
namespace {

// A metric column read from RunSummary::ToJson() by JSON pointer; a summary without
// that field leaves the cell empty.
struct Column {
  const char* name;
  const char* pointer;
};

constexpr Column kColumns[] = {
    {"finished", "/num_finished"},
    {"rejected", "/num_rejected"},
    {"request_throughput", "/request_throughput"},
    {"output_throughput", "/output_throughput"},
    {"ttft_p50_s", "/ttft_s/p50"},
    {"ttft_p99_s", "/ttft_s/p99"},
    {"tpot_p50_s", "/tpot_s/p50"},
    {"tpot_p99_s", "/tpot_s/p99"},
    {"e2e_mean_s", "/e2e_s/mean"},
    {"e2e_p50_s", "/e2e_s/p50"},
    {"e2e_p99_s", "/e2e_s/p99"},
    {"queue_mean_s", "/queue_s/mean"},
    {"goodput", "/goodput"},
    {"slo_attainment", "/slo_attainment"},
    {"preemptions", "/preemptions"},
    {"gpu_busy_fraction", "/gpu_busy_fraction"},
    {"cost_per_million_output_tokens", "/cost_per_million_output_tokens"},
    {"jain_index", "/jain_index"},
    {"window_jain_index", "/window_jain_index"},
};

// Added when any point ran with a prefix cache (scheduler.prefix_cache).
constexpr Column kPrefixColumns[] = {
    {"prefix_token_hit_rate", "/prefix_cache/token_hit_rate"},
    {"prefix_block_hit_rate", "/prefix_cache/block_hit_rate"},
    {"prefix_hit_tokens", "/prefix_cache/hit_tokens"},
    {"prefix_evicted_blocks", "/prefix_cache/evicted_blocks"},
};

// The cell for a JSON value: integers and doubles as numbers, strings verbatim.
std::string Cell(const nlohmann::ordered_json& j) {
  if (j.is_number_integer()) return std::to_string(j.get<int64_t>());
  if (j.is_number_unsigned()) return std::to_string(j.get<uint64_t>());
  if (j.is_number()) return CsvNumber(j.get<double>());
  if (j.is_string()) return j.get<std::string>();
  if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
  return "";
}

// The optional value of `pointer` in a summary, or null.
const nlohmann::ordered_json* Find(const nlohmann::ordered_json& json, const char* pointer) {
  const nlohmann::ordered_json::json_pointer ptr(pointer);
  return json.contains(ptr) ? &json.at(ptr) : nullptr;
}

bool AnyHas(const std::vector<PointOutcome>& outcomes, const char* pointer) {
  for (const auto& o : outcomes) {
    if (o.ok() && Find(o.summary, pointer) != nullptr) return true;
  }
  return false;
}

// The number at `pointer`, or NaN.
double NumberAt(const nlohmann::ordered_json& json, const char* pointer) {
  const nlohmann::ordered_json* v = Find(json, pointer);
  return v != nullptr && v->is_number() ? v->get<double>() : std::nan("");
}

}  // namespace

std::string CsvNumber(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ptr);
}

std::string CsvQuote(const std::string& field) {
  const bool needs = field.find_first_of(",\"\r\n") != std::string::npos ||
                     (!field.empty() && (field.front() == ' ' || field.back() == ' '));
  if (!needs) return field;
  std::string out = "\"";
  for (const char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string SweepCsv(const Sweep& sweep, const std::vector<PointOutcome>& outcomes) {
  std::vector<Column> columns(std::begin(kColumns), std::end(kColumns));
  if (AnyHas(outcomes, "/prefix_cache")) {
    columns.insert(columns.end(), std::begin(kPrefixColumns), std::end(kPrefixColumns));
  }
  bool replicated = false;
  for (const auto& o : outcomes) replicated = replicated || !o.replicates.empty();
  std::string out;
  for (const auto& axis : sweep.axes) out += CsvQuote(axis.key) + ",";
  out += "folder,status";
  if (replicated) out += ",replicates";
  for (const Column& c : columns) {
    (out += ',') += c.name;
    if (replicated) (out += ",") += std::string(c.name) + "_ci95";
  }
  out += "\n";
  for (size_t p = 0; p < sweep.points.size(); ++p) {
    const SweepPoint& point = sweep.points[p];
    const PointOutcome& o = outcomes[p];
    for (size_t a = 0; a < sweep.axes.size(); ++a) {
      out += CsvQuote(sweep.axes[a].values[point.index[a]]) + ",";
    }
    out += CsvQuote(point.folder) + (o.ok() ? ",ok" : ",failed");
    const bool many = !o.replicates.empty();
    if (replicated) out += "," + (o.ok() ? std::to_string(many ? o.replicates.size() : 1) : "");
    for (const Column& c : columns) {
      out += ',';
      if (!many) {
        const nlohmann::ordered_json* value = o.ok() ? Find(o.summary, c.pointer) : nullptr;
        if (value != nullptr) out += CsvQuote(Cell(*value));
        if (replicated) out += ',';
        continue;
      }
      // The mean over replicates and the half width of its 95% interval.
      std::vector<double> values;
      for (const auto& j : o.replicates) {
        const double v = NumberAt(j, c.pointer);
        if (!std::isnan(v)) values.push_back(v);
      }
      if (values.size() == o.replicates.size()) {
        const Estimate e = MeanWithInterval(values);
        out += CsvNumber(e.mean) + "," + CsvNumber(e.half_width);
      } else {
        out += ',';
      }
    }
    out += "\n";
  }
  return out;
}

std::string CompareTable(const std::vector<std::string>& labels,
                         const std::vector<PointOutcome>& outcomes) {
  const bool jain = AnyHas(outcomes, "/jain_index");
  const bool prefix = AnyHas(outcomes, "/prefix_cache");
  std::string out =
      "| policy | finished | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | "
      "TPOT p99 (ms) | E2E mean (s) | E2E p99 (s) | goodput (req/s) |";
  out += jain ? " Jain |" : "";
  out += prefix ? " prefix hit |\n" : "\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  out += jain ? "---:|" : "";
  out += prefix ? "---:|\n" : "\n";
  for (size_t i = 0; i < outcomes.size(); ++i) {
    char row[512];
    if (!outcomes[i].ok()) {
      std::snprintf(row, sizeof row, "| %s | failed | | | | | | | | |%s%s\n", labels[i].c_str(),
                    jain ? " |" : "", prefix ? " |" : "");
      out += row;
      continue;
    }
    const nlohmann::ordered_json& s = outcomes[i].summary;
    std::snprintf(row, sizeof row,
                  "| %s | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f |",
                  labels[i].c_str(), NumberAt(s, "/num_finished"), NumberAt(s, "/output_throughput"),
                  NumberAt(s, "/ttft_s/p50") * 1e3, NumberAt(s, "/ttft_s/p99") * 1e3,
                  NumberAt(s, "/tpot_s/p50") * 1e3, NumberAt(s, "/tpot_s/p99") * 1e3,
                  NumberAt(s, "/e2e_s/mean"), NumberAt(s, "/e2e_s/p99"), NumberAt(s, "/goodput"));
    out += row;
    if (jain) {
      const double j = NumberAt(s, "/jain_index");
      if (!std::isnan(j)) {
        std::snprintf(row, sizeof row, " %.4f |", j);
        out += row;
      } else {
        out += " |";
      }
    }
    if (prefix) {
      const double hit = NumberAt(s, "/prefix_cache/token_hit_rate");
      if (!std::isnan(hit)) {
        std::snprintf(row, sizeof row, " %.2f%% |", hit * 100);
        out += row;
      } else {
        out += " |";
      }
    }
    out += "\n";
  }
  return out;
}

std::string PairedTable(const std::vector<std::string>& labels,
                        const std::vector<PointOutcome>& outcomes) {
  const struct {
    const char* title;
    const char* pointer;
    double scale;
  } metrics[] = {
      {"output tok/s", "/output_throughput", 1},    {"TTFT p50 (ms)", "/ttft_s/p50", 1e3},
      {"TTFT p99 (ms)", "/ttft_s/p99", 1e3},        {"TPOT p50 (ms)", "/tpot_s/p50", 1e3},
      {"TPOT p99 (ms)", "/tpot_s/p99", 1e3},        {"E2E mean (s)", "/e2e_s/mean", 1},
      {"goodput (req/s)", "/goodput", 1},
  };
  if (outcomes.empty() || outcomes[0].replicates.size() < 2) return "";
  const std::vector<nlohmann::ordered_json>& base = outcomes[0].replicates;
  std::string out = "| vs " + labels[0] + " |";
  for (const auto& m : metrics) (out += " ") += std::string(m.title) + " |";
  out += "\n|---|";
  for (size_t i = 0; i < std::size(metrics); ++i) out += "---:|";
  out += "\n";
  for (size_t p = 1; p < outcomes.size(); ++p) {
    out += "| " + labels[p] + " |";
    const std::vector<nlohmann::ordered_json>& other = outcomes[p].replicates;
    for (const auto& m : metrics) {
      std::vector<double> a, b;
      for (size_t r = 0; r < base.size() && other.size() == base.size(); ++r) {
        a.push_back(NumberAt(base[r], m.pointer) * m.scale);
        b.push_back(NumberAt(other[r], m.pointer) * m.scale);
      }
      if (a.empty()) {
        out += " |";
        continue;
      }
      const Estimate d = PairedDifference(a, b);
      char cell[96];
      std::snprintf(cell, sizeof cell, " %+.2f ± %.2f%s |", d.mean, d.half_width,
                    d.Excludes(0) ? "" : " (n.s.)");
      out += cell;
    }
    out += "\n";
  }
  return out;
}

}  // namespace servelab
