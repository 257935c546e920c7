#include "driver/profile_table.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/op.h"
#include "core/percentile.h"
#include "core/text.h"
#include "driver/profile_csv_cells.h"
#include "driver/trace_reader.h"
#include "driver/vidur_profile.h"
#include "kernels/decode_graph_shape.h"

namespace servelab {
namespace {

using profile_csv::Cells;
using profile_csv::Columns;
using profile_csv::Find;
using profile_csv::ForEachDataLine;
using profile_csv::HasColumn;
using profile_csv::OptionalColumn;

// The MoE columns of a servelab row, where the header has them: num_experts 0 (a dense
// model: no other expert column above 0) or 1 to 4,096 with experts_per_token 1 to it,
// widths 0 (the expert: intermediate_size; no shared expert) to 2^22.
Status ReadExperts(const Cells& cells, const std::string& path, ProfileRow& r,
                   std::optional<size_t> experts, std::optional<size_t> per_token,
                   std::optional<size_t> expert_width, std::optional<size_t> shared_width) {
  struct Field {
    std::optional<size_t> column;
    std::string_view name;
    int32_t& out;
    int64_t most;
  };
  const Field fields[] = {
      {experts, "num_experts", r.shape.num_experts, int64_t{1} << 12},
      {per_token, "experts_per_token", r.shape.num_experts_per_tok, int64_t{1} << 12},
      {expert_width, "expert_intermediate_size", r.shape.moe_intermediate_size, int64_t{1} << 22},
      {shared_width, "shared_expert_intermediate_size", r.shape.shared_expert_intermediate_size,
       int64_t{1} << 22},
  };
  for (const Field& f : fields) {
    if (!f.column) continue;
    int64_t v = 0;
    SERVELAB_RETURN_IF_ERROR(cells.Count(*f.column, f.name, v, 0, f.most));
    f.out = static_cast<int32_t>(v);
  }
  const ModelSpec& m = r.shape;
  if (m.num_experts == 0 && (m.num_experts_per_tok > 0 || m.moe_intermediate_size > 0 ||
                             m.shared_expert_intermediate_size > 0)) {
    return LineError(path, r.line, "expert sizes without experts (num_experts is 0)",
                     "num_experts");
  }
  if (m.num_experts > 0 && (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts)) {
    return LineError(path, r.line,
                     "a token picks 1 to num_experts (" + std::to_string(m.num_experts) +
                         ") experts, got " + std::to_string(m.num_experts_per_tok),
                     "experts_per_token");
  }
  return Status::Ok();
}

// The routing columns of a servelab row, where the header has them: 0 (not counted), or on
// a moe_mlp or step row of a MoE shape experts_run in [1, num_experts] and
// single_row_experts in [0, experts_run].
Status ReadRouting(const Cells& cells, const std::string& path, ProfileRow& r,
                   std::optional<size_t> experts_run, std::optional<size_t> single_row) {
  if (experts_run) {
    SERVELAB_RETURN_IF_ERROR(cells.Number(*experts_run, "experts_run", r.experts_run));
  }
  if (single_row) {
    SERVELAB_RETURN_IF_ERROR(cells.Number(*single_row, "single_row_experts", r.single_row_experts));
  }
  const double experts = r.shape.num_experts;
  if (r.experts_run == 0 && r.single_row_experts == 0) return Status::Ok();
  if ((r.op != "moe_mlp" && r.op != "step") || !r.shape.IsMoe()) {
    return LineError(path, r.line,
                     "experts counted on a row that is not a MoE shape's moe_mlp or step",
                     r.experts_run != 0 ? "experts_run" : "single_row_experts");
  }
  if (!(r.experts_run >= 1 && r.experts_run <= experts)) {
    return LineError(path, r.line,
                     "a MoE layer runs 1 to num_experts (" + std::to_string(r.shape.num_experts) +
                         ") experts, or 0 when not counted",
                     "experts_run");
  }
  if (!(r.single_row_experts >= 0 && r.single_row_experts <= r.experts_run)) {
    return LineError(path, r.line, "0 to experts_run of the experts run are given one row",
                     "single_row_experts");
  }
  return Status::Ok();
}

// The graph columns of a servelab row, where the header has them: both empty (not
// recorded), both 0 (run op by op), or on a decode step row of a GPU the graph's rows, at
// least its sequences, and its context bucket, covering the context and the new token.
Status ReadGraph(const Cells& cells, const std::string& path, ProfileRow& r,
                 std::optional<size_t> rows, std::optional<size_t> context) {
  if (!rows || !context) {
    if (rows || context) {
      return LineError(path, r.line, "graph_rows and graph_context come together",
                       rows ? "graph_context" : "graph_rows");
    }
    return Status::Ok();
  }
  if (cells.Empty(*rows) && cells.Empty(*context)) return Status::Ok();  // not recorded
  SERVELAB_RETURN_IF_ERROR(cells.Count(*rows, "graph_rows", r.graph_rows, 0, Cells::kMaxBatch));
  SERVELAB_RETURN_IF_ERROR(cells.Count(*context, "graph_context", r.graph_context, 0, Cells::kMaxContext));
  if ((r.graph_rows == 0) != (r.graph_context == 0)) {
    return LineError(path, r.line, "a graph has rows and a context bucket, or neither (0 and 0: run op by op)",
                     r.graph_rows == 0 ? "graph_rows" : "graph_context");
  }
  if (r.graph_rows == 0) return Status::Ok();
  if ((r.op != "step" && r.op != kStepAfterPrefill) || r.tokens != r.batch || r.device == "cpu") {
    return LineError(path, r.line, "a CUDA graph on a row that is not a GPU's decode step", "graph_rows");
  }
  // At most the graph the runner's rule gives without its caps (which only lower it).
  const int64_t most_rows = kernels::DecodeGraphBatch(static_cast<int32_t>(r.batch), 0);
  if (r.graph_rows < r.batch || r.graph_rows > most_rows) {
    return LineError(path, r.line,
                     "a graph of " + std::to_string(r.graph_rows) + " rows for " + std::to_string(r.batch) +
                         " sequences (the runner's: " + std::to_string(r.batch) + " to " +
                         std::to_string(most_rows) + ")",
                     "graph_rows");
  }
  const int64_t most_context = kernels::DecodeGraphContextBucket(static_cast<int32_t>(r.context + 1), 0);
  if (r.graph_context <= r.context || r.graph_context > most_context) {
    return LineError(path, r.line,
                     "a context bucket of " + std::to_string(r.graph_context) + " for context " +
                         std::to_string(r.context) + " and the new token (the runner's: " +
                         std::to_string(r.context + 1) + " to " + std::to_string(most_context) + ")",
                     "graph_context");
  }
  return Status::Ok();
}

// A kStepAfterPrefill row's place after its chunk and the chunk's size: both >= 1 there
// (a decode: tokens = batch), both 0 (or absent) on every other row.
Status ReadAfterPrefill(const Cells& cells, const std::string& path, ProfileRow& r,
                        std::optional<size_t> after, std::optional<size_t> chunk) {
  int64_t k = 0, tokens = 0;
  if (after) SERVELAB_RETURN_IF_ERROR(cells.Count(*after, "after_prefill", k, 0, kMaxAfterPrefill));
  if (chunk) SERVELAB_RETURN_IF_ERROR(cells.Count(*chunk, "prefill_before", tokens, 0, Cells::kMaxTokens));
  r.after_prefill = static_cast<int32_t>(k);
  r.prefill_before = static_cast<int32_t>(tokens);
  if (r.op != kStepAfterPrefill) {
    if (k == 0 && tokens == 0) return Status::Ok();
    return LineError(path, r.line, "after_prefill and prefill_before belong to " + std::string(kStepAfterPrefill) +
                     " rows only", k != 0 ? "after_prefill" : "prefill_before");
  }
  if (k < 1) return LineError(path, r.line, "a decode step after a prefill chunk: 1 or more", "after_prefill");
  if (tokens < 1) return LineError(path, r.line, "the chunk before the decodes: 1 token or more", "prefill_before");
  if (r.tokens != r.batch) {
    return LineError(path, r.line, "a decode step: tokens = batch (one new token a sequence)", "tokens");
  }
  return Status::Ok();
}

Status ReadServelab(LineFile& file, const std::vector<std::string_view>& header,
                    ProfileTable& table) {
  auto c = Find(header,
                {"device", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
                 "intermediate_size", "vocab_size", "layers", "op", "tokens", "batch", "context", "tp",
                 "median_ms", "p10_ms", "p90_ms", "repeats"},
                file.path());
  if (!c.ok()) return c.status();
  const Columns& col = *c;
  // A mixture of experts' shape (optional: profiles of dense models written before these
  // columns lack them).
  const auto experts = OptionalColumn(header, "num_experts");
  const auto per_token = OptionalColumn(header, "experts_per_token");
  const auto expert_width = OptionalColumn(header, "expert_intermediate_size");
  const auto shared_width = OptionalColumn(header, "shared_expert_intermediate_size");
  const auto experts_run = OptionalColumn(header, "experts_run");
  const auto single_row = OptionalColumn(header, "single_row_experts");
  const auto graph_rows = OptionalColumn(header, "graph_rows");
  const auto graph_context = OptionalColumn(header, "graph_context");
  const auto after_prefill = OptionalColumn(header, "after_prefill");
  const auto prefill_before = OptionalColumn(header, "prefill_before");
  std::vector<std::string> ops = OpNames();
  ops.push_back("step");
  ops.push_back(kStepAfterPrefill);
  return ForEachDataLine(file, header.size(), [&](const Cells& cells) -> Status {
    ProfileRow r;
    r.line = file.line_number();
    SERVELAB_RETURN_IF_ERROR(cells.Present(col.at("device"), "device"));
    r.device = std::string(cells.Text(col.at("device")));
    if (r.device.empty()) return LineError(file.path(), r.line, "empty device", "device");
    int64_t v = 0;
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("hidden_size"), "hidden_size", v, 1, Cells::kMaxHidden));
    r.shape.hidden_size = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("num_heads"), "num_heads", v, 1, Cells::kMaxHeads));
    r.shape.num_attention_heads = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("num_kv_heads"), "num_kv_heads", v, 1, Cells::kMaxHeads));
    r.shape.num_key_value_heads = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("head_dim"), "head_dim", v, 1, Cells::kMaxHeads));
    r.shape.head_dim = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("intermediate_size"), "intermediate_size", v, 0, Cells::kMaxWidth));
    r.shape.intermediate_size = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("vocab_size"), "vocab_size", v, 0, Cells::kMaxVocab));
    r.shape.vocab_size = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("layers"), "layers", v, 0, Cells::kMaxLayers));
    r.shape.num_hidden_layers = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Present(col.at("op"), "op"));
    r.op = std::string(cells.Text(col.at("op")));
    if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) {
      return LineError(file.path(), r.line,
                       "unknown op '" + r.op + "'" + DidYouMean(r.op, ops) + " (ops: " +
                           Join(ops, ", ") + ")",
                       "op");
    }
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("tokens"), "tokens", r.tokens, 1, Cells::kMaxTokens));
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("batch"), "batch", r.batch, 1, Cells::kMaxBatch));
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("context"), "context", r.context, 0, Cells::kMaxContext));
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("tp"), "tp", v, 1, Cells::kMaxTp));
    r.tp = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Number(col.at("median_ms"), "median_ms", r.median_ms));
    SERVELAB_RETURN_IF_ERROR(cells.Number(col.at("p10_ms"), "p10_ms", r.p10_ms));
    SERVELAB_RETURN_IF_ERROR(cells.Number(col.at("p90_ms"), "p90_ms", r.p90_ms));
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("repeats"), "repeats", v));
    r.repeats = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(ReadExperts(cells, file.path(), r, experts, per_token, expert_width,
                                         shared_width));
    if (r.op == "moe_mlp" && !r.shape.IsMoe()) {
      return LineError(file.path(), r.line, "moe_mlp needs a mixture of experts' shape",
                       "num_experts");
    }
    SERVELAB_RETURN_IF_ERROR(ReadRouting(cells, file.path(), r, experts_run, single_row));
    SERVELAB_RETURN_IF_ERROR(ReadGraph(cells, file.path(), r, graph_rows, graph_context));
    SERVELAB_RETURN_IF_ERROR(ReadAfterPrefill(cells, file.path(), r, after_prefill, prefill_before));
    table.rows.push_back(std::move(r));
    return Status::Ok();
  });
}

// Folds each row into the first of its configuration (ProfileTable::merged_rows).
void MergeRepeatedRows(ProfileTable& table) {
  std::map<std::string, size_t> first_of;
  std::vector<ProfileRow> kept;
  kept.reserve(table.rows.size());
  std::vector<int64_t> counts;  // rows folded into each kept row, itself included
  for (ProfileRow& r : table.rows) {
    // The configuration: everything the servelab layout writes but what was measured
    // (routing to its 4 decimals), and the two fields only Vidur's rows set.
    ProfileRow sizes = r;
    sizes.median_ms = sizes.p10_ms = sizes.p90_ms = 0;
    sizes.repeats = 0;
    std::ostringstream key;
    WriteProfileRow(key, sizes);
    key << sizes.kv_capacity << ',' << sizes.attention_backend;
    const auto [at, fresh] = first_of.emplace(key.str(), kept.size());
    if (fresh) {
      kept.push_back(std::move(r));
      counts.push_back(1);
      continue;
    }
    ProfileRow& into = kept[at->second];
    int64_t& n = counts[at->second];
    const auto count = static_cast<double>(n + 1);  // running means
    into.median_ms += (r.median_ms - into.median_ms) / count;
    into.p10_ms += (r.p10_ms - into.p10_ms) / count;
    into.p90_ms += (r.p90_ms - into.p90_ms) / count;
    into.repeats = static_cast<int32_t>(std::min<int64_t>(int64_t{into.repeats} + r.repeats, INT32_MAX));
    ++n;
    ++table.merged_rows;
  }
  table.rows = std::move(kept);
}

}  // namespace

StatusOr<ProfileTable> ReadProfile(const std::string& path, const std::string& device) {
  auto file = LineFile::Open(path, kMaxProfileFileBytes);
  if (!file.ok()) return file.status();
  ProfileTable table;
  table.path = path;
  std::string header_line;
  if (!file->Next(header_line)) return InvalidArgument(path + ": empty profile");
  std::vector<std::string_view> header;
  SplitCsvLine(header_line, header);
  const bool vidur_mlp = HasColumn(header, "time_stats.attn_pre_proj.median") ||
                         HasColumn(header, "time_stats.mlp_up_proj.median");
  const bool vidur_attention = HasColumn(header, "time_stats.attn_decode.median") ||
                               HasColumn(header, "time_stats.attn_prefill.median");
  if (vidur_mlp || vidur_attention) {
    const std::string gpu = device.empty() ? VidurDeviceFromName(path) : device;
    if (gpu.empty()) {
      return InvalidArgument(path + ": a Vidur profile does not name its GPU and its file "
                             "name holds no catalog GPU (a100, h100, ...): pass --device");
    }
    table.layout = vidur_mlp ? "vidur-mlp" : "vidur-attention";
    SERVELAB_RETURN_IF_ERROR(vidur_mlp ? ReadVidurMlp(*file, header, gpu, table)
                                       : ReadVidurAttention(*file, header, gpu, table));
  } else {
    table.layout = "servelab";
    SERVELAB_RETURN_IF_ERROR(ReadServelab(*file, header, table));
  }
  if (table.rows.empty()) return InvalidArgument(path + ": no measurements in the profile");
  MergeRepeatedRows(table);
  return table;
}

std::string ProfileCsvHeader() {
  return "device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,vocab_size,"
         "layers,op,tokens,batch,context,tp,median_ms,p10_ms,p90_ms,repeats,num_experts,"
         "experts_per_token,expert_intermediate_size,shared_expert_intermediate_size,experts_run,"
         "single_row_experts,graph_rows,graph_context,after_prefill,prefill_before\n";
}

void WriteProfileRow(std::ostream& out, const ProfileRow& r) {
  char times[96], routing[64];
  std::snprintf(times, sizeof times, "%.6f,%.6f,%.6f", r.median_ms, r.p10_ms, r.p90_ms);
  std::snprintf(routing, sizeof routing, "%.4f,%.4f", r.experts_run, r.single_row_experts);
  out << r.device << ',' << r.shape.hidden_size << ',' << r.shape.num_attention_heads << ','
      << r.shape.num_key_value_heads << ',' << r.shape.HeadDim() << ','
      << r.shape.intermediate_size << ',' << r.shape.vocab_size << ','
      << r.shape.num_hidden_layers << ',' << r.op << ','
      << r.tokens << ',' << r.batch << ',' << r.context << ',' << r.tp << ',' << times << ','
      << r.repeats << ',' << r.shape.num_experts << ',' << r.shape.num_experts_per_tok << ','
      << r.shape.moe_intermediate_size << ',' << r.shape.shared_expert_intermediate_size << ','
      << routing << ',';
  if (r.GraphRecorded()) out << r.graph_rows << ',' << r.graph_context;
  else out << ',';  // not recorded: empty cells
  out << ',' << r.after_prefill << ',' << r.prefill_before << '\n';
}

ProfileSpread SpreadOf(std::span<const ProfileRow> rows) {
  std::vector<double> spreads;
  for (const ProfileRow& r : rows) {
    if (r.op == "step" && r.median_ms > 0 && r.repeats >= kMinSpreadRepeats) {
      spreads.push_back((r.p90_ms - r.p10_ms) / r.median_ms * 100.0);
    }
  }
  ProfileSpread spread;
  spread.rows = static_cast<int64_t>(spreads.size());
  if (spreads.empty()) return spread;
  std::sort(spreads.begin(), spreads.end());
  spread.median_pct = PercentileOfSorted(spreads, 50);
  spread.p90_pct = PercentileOfSorted(spreads, 90);
  return spread;
}

}  // namespace servelab
