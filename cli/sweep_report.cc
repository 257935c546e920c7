#include "cli/sweep_report.h"

#include <charconv>
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

std::vector<nlohmann::ordered_json> Jsons(const std::vector<StatusOr<RunSummary>>& results) {
  std::vector<nlohmann::ordered_json> out;
  for (const auto& r : results) out.push_back(r.ok() ? r->ToJson() : nlohmann::ordered_json());
  return out;
}

bool AnyHas(const std::vector<nlohmann::ordered_json>& jsons, const char* pointer) {
  for (const auto& j : jsons) {
    if (!j.is_null() && Find(j, pointer) != nullptr) return true;
  }
  return false;
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

std::string SweepCsv(const Sweep& sweep, const std::vector<StatusOr<RunSummary>>& results,
                     const std::vector<std::vector<RunSummary>>& replicates) {
  const std::vector<nlohmann::ordered_json> jsons = Jsons(results);
  std::vector<Column> columns(std::begin(kColumns), std::end(kColumns));
  if (AnyHas(jsons, "/prefix_cache")) {
    columns.insert(columns.end(), std::begin(kPrefixColumns), std::end(kPrefixColumns));
  }
  bool replicated = false;
  for (const auto& r : replicates) replicated = replicated || !r.empty();
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
    for (size_t a = 0; a < sweep.axes.size(); ++a) {
      out += CsvQuote(sweep.axes[a].values[point.index[a]]) + ",";
    }
    out += CsvQuote(point.folder) + (results[p].ok() ? ",ok" : ",failed");
    const bool many = p < replicates.size() && !replicates[p].empty();
    if (replicated) out += "," + (results[p].ok() ? std::to_string(many ? replicates[p].size() : 1) : "");
    std::vector<nlohmann::ordered_json> each;
    if (many) {
      for (const RunSummary& r : replicates[p]) each.push_back(r.ToJson());
    }
    for (const Column& c : columns) {
      const nlohmann::ordered_json* value =
          jsons[p].is_null() ? nullptr : Find(jsons[p], c.pointer);
      out += ',';
      if (!many) {
        if (value != nullptr) out += CsvQuote(Cell(*value));
        if (replicated) out += ',';
        continue;
      }
      // The mean over replicates and the half width of its 95% interval.
      std::vector<double> values;
      for (const auto& j : each) {
        const nlohmann::ordered_json* v = Find(j, c.pointer);
        if (v != nullptr && v->is_number()) values.push_back(v->get<double>());
      }
      if (values.size() == each.size()) {
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
                         const std::vector<StatusOr<RunSummary>>& results) {
  const std::vector<nlohmann::ordered_json> jsons = Jsons(results);
  const bool jain = AnyHas(jsons, "/jain_index");
  const bool prefix = AnyHas(jsons, "/prefix_cache");
  std::string out =
      "| policy | finished | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | "
      "TPOT p99 (ms) | E2E mean (s) | E2E p99 (s) | goodput (req/s) |";
  out += jain ? " Jain |" : "";
  out += prefix ? " prefix hit |\n" : "\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  out += jain ? "---:|" : "";
  out += prefix ? "---:|\n" : "\n";
  for (size_t i = 0; i < results.size(); ++i) {
    char row[512];
    if (!results[i].ok()) {
      std::snprintf(row, sizeof row, "| %s | failed | | | | | | | | |%s%s\n", labels[i].c_str(),
                    jain ? " |" : "", prefix ? " |" : "");
      out += row;
      continue;
    }
    const RunSummary& s = *results[i];
    std::snprintf(row, sizeof row,
                  "| %s | %lld | %.1f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f |",
                  labels[i].c_str(), static_cast<long long>(s.num_finished), s.output_throughput,
                  s.ttft_s.p50 * 1e3, s.ttft_s.p99 * 1e3, s.tpot_s.p50 * 1e3, s.tpot_s.p99 * 1e3,
                  s.e2e_s.mean, s.e2e_s.p99, s.goodput);
    out += row;
    if (jain) {
      const nlohmann::ordered_json* j = Find(jsons[i], "/jain_index");
      if (j != nullptr && j->is_number()) {
        std::snprintf(row, sizeof row, " %.4f |", j->get<double>());
        out += row;
      } else {
        out += " |";
      }
    }
    if (prefix) {
      const nlohmann::ordered_json* j = Find(jsons[i], "/prefix_cache/token_hit_rate");
      if (j != nullptr && j->is_number()) {
        std::snprintf(row, sizeof row, " %.2f%% |", j->get<double>() * 100);
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
                        const std::vector<std::vector<RunSummary>>& replicates) {
  const struct {
    const char* title;
    double scale;
    double (*get)(const RunSummary&);
  } metrics[] = {
      {"output tok/s", 1, [](const RunSummary& s) { return s.output_throughput; }},
      {"TTFT p50 (ms)", 1e3, [](const RunSummary& s) { return s.ttft_s.p50; }},
      {"TTFT p99 (ms)", 1e3, [](const RunSummary& s) { return s.ttft_s.p99; }},
      {"TPOT p50 (ms)", 1e3, [](const RunSummary& s) { return s.tpot_s.p50; }},
      {"TPOT p99 (ms)", 1e3, [](const RunSummary& s) { return s.tpot_s.p99; }},
      {"E2E mean (s)", 1, [](const RunSummary& s) { return s.e2e_s.mean; }},
      {"goodput (req/s)", 1, [](const RunSummary& s) { return s.goodput; }},
  };
  if (replicates.empty() || replicates[0].size() < 2) return "";
  const std::vector<RunSummary>& base = replicates[0];
  std::string out = "| vs " + labels[0] + " |";
  for (const auto& m : metrics) (out += " ") += std::string(m.title) + " |";
  out += "\n|---|";
  for (size_t i = 0; i < std::size(metrics); ++i) out += "---:|";
  out += "\n";
  for (size_t p = 1; p < replicates.size(); ++p) {
    out += "| " + labels[p] + " |";
    if (replicates[p].size() != base.size()) {
      for (size_t i = 0; i < std::size(metrics); ++i) out += " |";
      out += "\n";
      continue;
    }
    for (const auto& m : metrics) {
      std::vector<double> a, b;
      for (size_t r = 0; r < base.size(); ++r) {
        a.push_back(m.get(base[r]) * m.scale);
        b.push_back(m.get(replicates[p][r]) * m.scale);
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
