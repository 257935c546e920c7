#include "driver/vidur_profile.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <optional>
#include <utility>

#include "driver/gpu_catalog.h"
#include "driver/profile_csv_cells.h"

namespace servelab {
namespace {

using profile_csv::Cells;
using profile_csv::Columns;
using profile_csv::Find;
using profile_csv::ForEachDataLine;
using profile_csv::HasColumn;
using profile_csv::OptionalColumn;

// mlp.csv's ops (time_stats.<name>.median) and the op of core/op.h each is.
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kVidurMlpOps = {{
    {"emb", "embedding"},
    {"input_layernorm", "input_norm"},
    {"attn_pre_proj", "qkv_proj"},
    {"attn_rope", "rope"},
    {"attn_post_proj", "o_proj"},
    {"post_attention_layernorm", "post_attention_norm"},
    {"mlp_up_proj", "gate_up_proj"},
    {"mlp_act", "silu_and_mul"},
    {"mlp_down_proj", "down_proj"},
    {"add", "residual_add"},
}};

// The model-shape columns both Vidur layouts share.
struct VidurShape {
  size_t embd, heads, kv_heads, tp;
};

Status ReadVidurShape(const Cells& cells, const VidurShape& c, const char* heads_name,
                      ProfileRow& r) {
  int64_t v = 0;
  SERVELAB_RETURN_IF_ERROR(cells.Count(c.embd, "n_embd", v, 1, Cells::kMaxHidden));
  r.shape.hidden_size = static_cast<int32_t>(v);
  SERVELAB_RETURN_IF_ERROR(cells.Count(c.heads, heads_name, v, 1, Cells::kMaxHeads));
  r.shape.num_attention_heads = static_cast<int32_t>(v);
  SERVELAB_RETURN_IF_ERROR(cells.Count(c.kv_heads, "n_kv_head", v, 1, Cells::kMaxHeads));
  r.shape.num_key_value_heads = static_cast<int32_t>(v);
  SERVELAB_RETURN_IF_ERROR(cells.Count(c.tp, "num_tensor_parallel_workers", v, 1, Cells::kMaxTp));
  r.tp = static_cast<int32_t>(v);
  if (r.shape.hidden_size % r.shape.num_attention_heads != 0) {
    return LineError(cells.Path(), cells.Line(),
                     "the heads (" + std::to_string(r.shape.num_attention_heads) +
                         ") do not divide n_embd (" + std::to_string(r.shape.hidden_size) +
                         ") into whole heads",
                     heads_name);
  }
  r.shape.head_dim = r.shape.hidden_size / r.shape.num_attention_heads;
  return Status::Ok();
}

}  // namespace

std::string VidurDeviceFromName(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  std::vector<std::string> tokens;
  std::string token;
  for (const char ch : name + "_") {
    if (ch == '_' || ch == '-' || ch == '.') {
      if (!token.empty()) tokens.push_back(token);
      token.clear();
    } else {
      token += ch;
    }
  }
  for (const GpuSpec& gpu : GpuCatalog()) {
    const std::string family = gpu.name.substr(0, gpu.name.find('-'));
    if (std::find(tokens.begin(), tokens.end(), family) != tokens.end()) return gpu.name;
  }
  return "";
}


Status ReadVidurMlp(LineFile& file, const std::vector<std::string_view>& header,
                    const std::string& device, ProfileTable& table) {
  auto c = Find(header,
                {"n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "num_tokens",
                 "num_tensor_parallel_workers"},
                file.path());
  if (!c.ok()) return c.status();
  const Columns& col = *c;
  struct OpColumns {
    std::string_view op;
    std::string median, min, max;
    size_t median_at = 0, min_at = 0, max_at = 0;
  };
  std::vector<OpColumns> ops;
  for (const auto& [vidur, ours] : kVidurMlpOps) {
    OpColumns o{ours, "time_stats." + std::string(vidur) + ".median",
                "time_stats." + std::string(vidur) + ".min",
                "time_stats." + std::string(vidur) + ".max"};
    if (!HasColumn(header, o.median)) continue;
    auto m = Find(header, {o.median, o.min, o.max}, file.path());
    if (!m.ok()) return m.status();
    o.median_at = m->at(o.median);
    o.min_at = m->at(o.min);
    o.max_at = m->at(o.max);
    ops.push_back(std::move(o));
  }
  const VidurShape shape{col.at("n_embd"), col.at("n_head"), col.at("n_kv_head"),
                         col.at("num_tensor_parallel_workers")};
  return ForEachDataLine(file, header.size(), [&](const Cells& cells) -> Status {
    ProfileRow base;
    base.line = file.line_number();
    base.device = device;
    SERVELAB_RETURN_IF_ERROR(ReadVidurShape(cells, shape, "n_head", base));
    int64_t v = 0;
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("n_expanded_embd"), "n_expanded_embd", v, 1, Cells::kMaxWidth));
    base.shape.intermediate_size = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("vocab_size"), "vocab_size", v, 1, Cells::kMaxVocab));
    base.shape.vocab_size = static_cast<int32_t>(v);
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("num_tokens"), "num_tokens", base.tokens, 1, Cells::kMaxTokens));
    for (const OpColumns& o : ops) {
      if (cells.Empty(o.median_at)) continue;
      ProfileRow r = base;
      r.op = std::string(o.op);
      SERVELAB_RETURN_IF_ERROR(cells.Number(o.median_at, o.median, r.median_ms));
      SERVELAB_RETURN_IF_ERROR(cells.Number(o.min_at, o.min, r.p10_ms));
      SERVELAB_RETURN_IF_ERROR(cells.Number(o.max_at, o.max, r.p90_ms));
      table.rows.push_back(std::move(r));
    }
    return Status::Ok();
  });
}

Status ReadVidurAttention(LineFile& file, const std::vector<std::string_view>& header,
                          const std::string& device, ProfileTable& table) {
  auto c = Find(header,
                {"n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
                 "prefill_chunk_size", "kv_cache_size", "is_prefill",
                 "time_stats.attn_decode.median", "time_stats.attn_decode.min",
                 "time_stats.attn_decode.max", "time_stats.attn_prefill.median",
                 "time_stats.attn_prefill.min", "time_stats.attn_prefill.max"},
                file.path());
  if (!c.ok()) return c.status();
  const Columns& col = *c;
  const VidurShape shape{col.at("n_embd"), col.at("n_q_head"), col.at("n_kv_head"),
                         col.at("num_tensor_parallel_workers")};
  // The KV length the profiler allocated (optional): FlashAttention's decode splits it.
  const std::optional<size_t> max_model_len = OptionalColumn(header, "max_model_len");
  const std::optional<size_t> backend = OptionalColumn(header, "attention_backend");
  return ForEachDataLine(file, header.size(), [&](const Cells& cells) -> Status {
    ProfileRow r;
    r.line = file.line_number();
    r.device = device;
    SERVELAB_RETURN_IF_ERROR(ReadVidurShape(cells, shape, "n_q_head", r));
    if (max_model_len) {
      SERVELAB_RETURN_IF_ERROR(cells.Count(*max_model_len, "max_model_len", r.kv_capacity, 1, Cells::kMaxContext));
    }
    if (backend) {
      SERVELAB_RETURN_IF_ERROR(cells.Present(*backend, "attention_backend"));
      r.attention_backend = std::string(cells.Text(*backend));
    }
    SERVELAB_RETURN_IF_ERROR(cells.Present(col.at("is_prefill"), "is_prefill"));
    const std::string_view prefill = cells.Text(col.at("is_prefill"));
    if (prefill != "True" && prefill != "False") {
      return LineError(file.path(), r.line,
                       "expected True or False, got '" + std::string(prefill) + "'",
                       "is_prefill");
    }
    const std::string kind = prefill == "True" ? "prefill" : "decode";
    r.op = "attention_" + kind;
    SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("kv_cache_size"), "kv_cache_size", r.context, 0, Cells::kMaxContext));
    if (kind == "decode") {
      SERVELAB_RETURN_IF_ERROR(cells.Count(col.at("batch_size"), "batch_size", r.batch, 1, Cells::kMaxBatch));
      r.tokens = r.batch;
    } else {
      SERVELAB_RETURN_IF_ERROR(
          cells.Count(col.at("prefill_chunk_size"), "prefill_chunk_size", r.tokens, 1, Cells::kMaxTokens));
    }
    const std::string stat = "time_stats.attn_" + kind;
    SERVELAB_RETURN_IF_ERROR(cells.Number(col.at(stat + ".median"), stat + ".median", r.median_ms));
    SERVELAB_RETURN_IF_ERROR(cells.Number(col.at(stat + ".min"), stat + ".min", r.p10_ms));
    SERVELAB_RETURN_IF_ERROR(cells.Number(col.at(stat + ".max"), stat + ".max", r.p90_ms));
    table.rows.push_back(std::move(r));
    return Status::Ok();
  });
}

}  // namespace servelab
