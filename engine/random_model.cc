#include "engine/random_model.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/host_memory.h"
#include "core/rng.h"
#include "engine/safetensors.h"
#include "engine/safetensors_writer.h"
#include "engine/weight_layout.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;

uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

bool IsNorm(const std::string& name) { return name.ends_with("norm.weight"); }

// Tensor `spec`'s seeded values, encoded to its dtype into `out`.
void FillRandom(const TensorSpec& spec, const RandomModelOptions& options,
                std::vector<float>& scratch, std::span<std::byte> out) {
  scratch.resize(out.size() / ElementBytes(spec.dtype));
  Rng rng(options.seed, Fnv1a(spec.name));
  const double mean = IsNorm(spec.name) ? 1.0 : 0.0;
  // Irwin-Hall: the sum of four uniforms (16-bit slices of one draw, centred on their
  // cells) has mean 2 and variance 1/3, so sqrt(3) (sum - 2) has unit variance, a bell
  // shape within +-2 sqrt(3). One draw and no libm call per value: portable and fast.
  const double scale = options.init_std * std::sqrt(3.0) / 65536.0;
  for (float& v : scratch) {
    const uint64_t bits = rng.NextU64();
    const uint64_t sum = (bits & 0xffff) + ((bits >> 16) & 0xffff) + ((bits >> 32) & 0xffff) +
                         (bits >> 48);  // in [0, 4 x 65535]; the cells' centres add 2
    v = static_cast<float>(mean + scale * (static_cast<double>(sum) + 2.0 - 131072.0));
  }
  FromFloat32(scratch, spec.dtype, out);
}

// Shard of each tensor: contiguous runs of about total / shards bytes, none empty.
std::vector<int32_t> AssignShards(const std::vector<TensorSpec>& layout, int32_t shards) {
  uint64_t total = 0;
  for (const TensorSpec& t : layout) total += t.Bytes();
  std::vector<int32_t> shard_of(layout.size());
  int32_t shard = 0;
  size_t in_shard = 0;
  uint64_t done = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    const auto remaining_shards = static_cast<size_t>(shards - shard - 1);
    const bool full = done * shards >= total * static_cast<uint64_t>(shard + 1);
    if (in_shard > 0 && remaining_shards > 0 && (full || layout.size() - i == remaining_shards)) {
      ++shard;
      in_shard = 0;
    }
    shard_of[i] = shard;
    done += layout[i].Bytes();
    ++in_shard;
  }
  return shard_of;
}

std::string ShardName(int32_t k, int32_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k, n);
  return name;
}

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return out ? Status::Ok() : Internal(path.string() + ": cannot write");
}

}  // namespace

StatusOr<WrittenModel> WriteRandomModel(const RandomModelOptions& options, const fs::path& dir) {
  SERVELAB_RETURN_IF_ERROR(ValidateModelConfig(options.config, "random model config"));
  const DType dtype = options.config.torch_dtype;
  // The tensors' count before their list (a name and a shape each): each key is within
  // its bounds, but layers x experts can ask for hundreds of millions of them.
  const ModelSpec& spec = options.config.spec;
  const int64_t tensors = int64_t{spec.num_hidden_layers} * (16 + 3 * int64_t{std::max(spec.num_experts, 0)}) + 8;
  if (tensors > kMaxRandomModelTensors) {
    return InvalidArgument("num_hidden_layers " + std::to_string(spec.num_hidden_layers) + " x num_experts " +
                           std::to_string(spec.num_experts) + ": about " + std::to_string(tensors) +
                           " tensors; a random model has at most " + std::to_string(kMaxRandomModelTensors));
  }
  const std::vector<TensorSpec> layout = HfWeightLayout(options.config, dtype);
  if (options.shards < 1 || static_cast<size_t>(options.shards) > layout.size()) {
    return InvalidArgument("shards " + std::to_string(options.shards) + " is not in [1, " +
                           std::to_string(layout.size()) + "]: each shard holds at least one of the model's " +
                           std::to_string(layout.size()) + " tensors");
  }
  // What the writing will take, before any of it: the files on disk, and the largest
  // tensor's bytes and float32 values in memory at once. In double: a shape's product
  // overflows size_t long before it is refused.
  double total_bytes = 0, largest = 0;
  for (const TensorSpec& t : layout) {
    double elements = 1;
    for (int64_t dim : t.shape) elements *= static_cast<double>(dim);
    total_bytes += elements * ElementBytes(dtype);
    largest = std::max(largest, elements * (ElementBytes(dtype) + sizeof(float)));
  }
  SERVELAB_RETURN_IF_ERROR(CheckFitsDisk(total_bytes, dir, "the model's weights"));
  SERVELAB_RETURN_IF_ERROR(CheckFitsHostMemory(largest, "writing the model's largest tensor"));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal(dir.string() + ": cannot create folder: " + ec.message());

  WrittenModel written;
  written.files.push_back(dir / "config.json");
  SERVELAB_RETURN_IF_ERROR(WriteText(written.files.back(), ModelConfigJson(options.config)));
  for (const TensorSpec& t : layout) {
    written.num_params += static_cast<int64_t>(t.Bytes() / ElementBytes(dtype));
    written.weight_bytes += t.Bytes();
  }
  written.num_tensors = static_cast<int64_t>(layout.size());

  std::vector<float> scratch;
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (options.shards == 1) {
    fs::remove(dir / "model.safetensors.index.json", ec);
    written.files.push_back(dir / "model.safetensors");
    SERVELAB_RETURN_IF_ERROR(WriteSafetensors(
        written.files.back(), layout,
        [&](size_t i, std::span<std::byte> out) { FillRandom(layout[i], options, scratch, out); },
        metadata));
    return written;
  }

  fs::remove(dir / "model.safetensors", ec);
  const std::vector<int32_t> shard_of = AssignShards(layout, options.shards);
  nlohmann::json weight_map = nlohmann::json::object();
  for (int32_t k = 0; k < options.shards; ++k) {
    std::vector<TensorSpec> part;
    for (size_t i = 0; i < layout.size(); ++i) {
      if (shard_of[i] == k) part.push_back(layout[i]);
    }
    const std::string name = ShardName(k + 1, options.shards);
    for (const TensorSpec& t : part) weight_map[t.name] = name;
    written.files.push_back(dir / name);
    SERVELAB_RETURN_IF_ERROR(WriteSafetensors(
        written.files.back(), part,
        [&](size_t i, std::span<std::byte> out) { FillRandom(part[i], options, scratch, out); },
        metadata));
  }
  nlohmann::json index = {{"metadata", {{"total_size", written.weight_bytes}}},
                          {"weight_map", weight_map}};
  written.files.insert(written.files.begin() + 1, dir / "model.safetensors.index.json");
  SERVELAB_RETURN_IF_ERROR(WriteText(written.files[1], index.dump(2) + "\n"));
  return written;
}

StatusOr<WrittenModel> WriteRandomModelInto(const RandomModelOptions& options, const fs::path& dir) {
  // Several writers may make the same model at once (a sweep's points, in threads and
  // processes): each stages its own copy.
  static std::atomic<uint64_t> next_copy{0};
  std::error_code ec;
  fs::path target = fs::absolute(dir, ec).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "dir/"
  fs::create_directories(target.parent_path(), ec);
  // std::string("."), not ".": GCC 12's -Wrestrict misfires on "." + a temporary string.
  const fs::path staging = target.parent_path() /
                           (std::string(".") + target.filename().string() + ".creating." +
                            std::to_string(::getpid()) + "." + std::to_string(next_copy++));
  auto written = WriteRandomModel(options, staging);
  if (written.ok()) {
    fs::create_directories(target, ec);
    if (ec) written = Internal(target.string() + ": cannot create folder: " + ec.message());
  }
  if (written.ok()) {
    // What would shadow the files written: the other layout's weights or index.
    fs::remove(target / (options.shards == 1 ? "model.safetensors.index.json" : "model.safetensors"), ec);
    // Weights first, config.json (files[0]) last.
    std::vector<fs::path>& files = written->files;
    for (size_t i = 1; i <= files.size() && written.ok(); ++i) {
      fs::path& file = files[i % files.size()];
      const fs::path to = target / file.filename();
      fs::rename(file, to, ec);
      if (ec) written = Internal(to.string() + ": " + ec.message());
      else file = to;
    }
  }
  fs::remove_all(staging, ec);
  return written;
}

}  // namespace servelab
