// GOLDEN: the CPU runner's logits equal an independent float64 dense transformer written
// here (no paging, no kernels, no ModelWeights: it reads the checkpoint by Hugging Face
// names), within 1e-4 of the row's scale, for MHA / GQA / MQA, Qwen2 biases with tied
// embeddings, Llama-3 RoPE scaling, a bf16 checkpoint, and the mixtures of experts:
// Mixtral's renormalised top-2 of 4 and Qwen2-MoE's top-k with its gated shared expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <string>

#include "engine/cpu_model_runner.h"
#include "engine/safetensors.h"
#include "tests/engine/test_files.h"
#include "tests/engine/tiny_model.h"

namespace servelab {
namespace {

using testing::LogitsNear;
using testing::TempDir;

using Vec = std::vector<double>;

// A dense reference forward pass in double precision.
class ReferenceModel {
 public:
  ReferenceModel(const ModelConfig& config, const std::filesystem::path& dir) : c_(config) {
    StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir);
    EXPECT_TRUE(file.ok()) << file.status().message();
    for (const TensorView& t : file->tensors()) {
      const std::vector<float> values = ToFloat32(t);
      tensors_[t.name] = Vec(values.begin(), values.end());
    }
  }

  // Logits of every position: [T][V].
  std::vector<Vec> Forward(const std::vector<int32_t>& ids) const {
    const ModelSpec& s = c_.spec;
    const int64_t h = s.hidden_size, d = s.HeadDim();
    const auto n = static_cast<int64_t>(ids.size());
    const Vec& embed = W("model.embed_tokens.weight");
    std::vector<Vec> x(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      x[t] = Vec(embed.begin() + ids[t] * h, embed.begin() + (ids[t] + 1) * h);
    for (int32_t l = 0; l < s.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<Vec> q(n), k(n), v(n);
      for (int64_t t = 0; t < n; ++t) {
        const Vec a = Norm(x[t], W(p + "input_layernorm.weight"));
        q[t] = Proj(p + "self_attn.q_proj", a);
        k[t] = Proj(p + "self_attn.k_proj", a);
        v[t] = Proj(p + "self_attn.v_proj", a);
        Rope(q[t], t);
        Rope(k[t], t);
      }
      const int64_t group = s.num_attention_heads / s.num_key_value_heads;
      for (int64_t t = 0; t < n; ++t) {
        Vec attn(static_cast<size_t>(s.num_attention_heads * d), 0.0);
        for (int64_t head = 0; head < s.num_attention_heads; ++head) {
          const int64_t kvh = head / group;
          Vec scores(static_cast<size_t>(t + 1));
          double max_score = -1e300;
          for (int64_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < d; ++e) dot += q[t][head * d + e] * k[j][kvh * d + e];
            scores[j] = dot / std::sqrt(static_cast<double>(d));
            max_score = std::max(max_score, scores[j]);
          }
          double sum = 0;
          for (double& sc : scores) sum += (sc = std::exp(sc - max_score));
          for (int64_t j = 0; j <= t; ++j) {
            for (int64_t e = 0; e < d; ++e)
              attn[head * d + e] += scores[j] / sum * v[j][kvh * d + e];
          }
        }
        Add(x[t], Proj(p + "self_attn.o_proj", attn));
      }
      for (int64_t t = 0; t < n; ++t) {
        const Vec b = Norm(x[t], W(p + "post_attention_layernorm.weight"));
        Add(x[t], IsMoeFamily(c_.family) ? Experts(p, b) : SwiGlu(p + "mlp.", b));
      }
    }
    const Vec& head = s.tie_word_embeddings ? embed : W("lm_head.weight");
    std::vector<Vec> logits;
    for (int64_t t = 0; t < n; ++t)
      logits.push_back(MatVec(head, Norm(x[t], W("model.norm.weight"))));
    return logits;
  }

 private:
  const Vec& W(const std::string& name) const {
    auto it = tensors_.find(name);
    EXPECT_NE(it, tensors_.end()) << name;
    return it->second;
  }
  // y = M x for M [rows, x.size()] row-major.
  static Vec MatVec(const Vec& m, const Vec& x) {
    Vec y(m.size() / x.size(), 0.0);
    for (size_t r = 0; r < y.size(); ++r) {
      for (size_t c = 0; c < x.size(); ++c) y[r] += m[r * x.size() + c] * x[c];
    }
    return y;
  }
  // down(silu(gate x) * up x), the projections named as Llama's or as Mixtral's.
  Vec SwiGlu(const std::string& prefix, const Vec& x) const {
    const bool mixtral = c_.family == ModelFamily::kMixtral && prefix.find("experts.") != std::string::npos;
    const Vec gate = Proj(prefix + (mixtral ? "w1" : "gate_proj"), x);
    const Vec up = Proj(prefix + (mixtral ? "w3" : "up_proj"), x);
    Vec m(gate.size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    return Proj(prefix + (mixtral ? "w2" : "down_proj"), m);
  }
  // A mixture of experts as Hugging Face's Mixtral and Qwen2-MoE blocks compute it: softmax
  // over every expert's router logit, the k most probable, renormalised when the model says
  // so, their outputs summed by weight; Qwen2-MoE adds its shared expert times
  // sigmoid(x . shared_expert_gate).
  Vec Experts(const std::string& layer, const Vec& x) const {
    const ModelSpec& s = c_.spec;
    const std::string p = layer + (c_.family == ModelFamily::kMixtral ? "block_sparse_moe." : "mlp.");
    const Vec logits = MatVec(W(p + "gate.weight"), x);
    double max_logit = -1e300, sum = 0;
    for (double l : logits) max_logit = std::max(max_logit, l);
    Vec probs(logits.size());
    for (size_t e = 0; e < probs.size(); ++e) sum += (probs[e] = std::exp(logits[e] - max_logit));
    for (double& pr : probs) pr /= sum;
    std::vector<int32_t> order(probs.size());
    for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
    order.resize(static_cast<size_t>(s.num_experts_per_tok));
    double chosen = 0;
    for (int32_t e : order) chosen += probs[e];
    Vec out(x.size(), 0.0);
    for (int32_t e : order) {
      const double weight = c_.norm_topk_prob ? probs[e] / chosen : probs[e];
      const Vec y = SwiGlu(p + "experts." + std::to_string(e) + ".", x);
      for (size_t i = 0; i < out.size(); ++i) out[i] += weight * y[i];
    }
    if (c_.family == ModelFamily::kQwen2Moe) {
      const double g = MatVec(W(p + "shared_expert_gate.weight"), x)[0];
      const Vec y = SwiGlu(p + "shared_expert.", x);
      for (size_t i = 0; i < out.size(); ++i) out[i] += y[i] / (1 + std::exp(-g));
    }
    return out;
  }
  Vec Proj(const std::string& prefix, const Vec& x) const {
    Vec y = MatVec(W(prefix + ".weight"), x);
    if (tensors_.contains(prefix + ".bias")) Add(y, W(prefix + ".bias"));
    return y;
  }
  static void Add(Vec& a, const Vec& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
  Vec Norm(const Vec& x, const Vec& w) const {
    double ms = 0;
    for (double e : x) ms += e * e;
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(x.size()) + c_.spec.rms_norm_eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  double InvFreq(int64_t i) const {
    const int64_t d = c_.spec.HeadDim();
    const double base = std::pow(c_.spec.rope_theta, -2.0 * static_cast<double>(i) / d);
    const RopeScaling& rs = c_.rope_scaling;
    if (rs.type != RopeScaling::Type::kLlama3) return base;
    const double wavelength = 2 * std::numbers::pi / base;
    const double orig = rs.original_max_position_embeddings;
    if (wavelength < orig / rs.high_freq_factor) return base;
    if (wavelength > orig / rs.low_freq_factor) return base / rs.factor;
    const double smooth =
        (orig / wavelength - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
    return (1 - smooth) * base / rs.factor + smooth * base;
  }
  // Rotates each head's (i, i + d/2) pairs by position * inv_freq[i].
  void Rope(Vec& x, int64_t pos) const {
    const int64_t d = c_.spec.HeadDim(), half = d / 2;
    for (size_t head = 0; head < x.size() / d; ++head) {
      double* y = x.data() + head * d;
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(pos) * InvFreq(i);
        const double x0 = y[i], x1 = y[i + half];
        y[i] = x0 * std::cos(a) - x1 * std::sin(a);
        y[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
      }
    }
  }

  ModelConfig c_;
  std::map<std::string, Vec> tensors_;
};

// Fixed tokens: 37 of them, so contexts cross several 4-token blocks.
std::vector<int32_t> FixedTokens(int32_t vocab) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 37; ++i) ids.push_back((i * 31 + 7) % vocab);
  return ids;
}

// Prefill in one step (last position), then token by token (every position), against
// the reference; blocks are scattered, not in order.
void ExpectMatchesReference(const ModelConfig& config, const std::filesystem::path& dir) {
  auto weights = testing::WriteAndLoad(config, dir);
  ASSERT_NE(weights, nullptr);
  const ReferenceModel reference(config, dir);
  const std::vector<int32_t> ids = FixedTokens(config.spec.vocab_size);
  const auto n = static_cast<int32_t>(ids.size());
  const std::vector<Vec> expected = reference.Forward(ids);
  const int32_t vocab = config.spec.vocab_size;
  TokenStore tokens;
  tokens.AddPrompt(7, ids);
  std::vector<int32_t> blocks;
  for (int32_t b = 0; b < 10; ++b) blocks.push_back((b * 7 + 3) % 16);  // 10 of 16, scattered

  auto whole = testing::MakeRunner(weights, 16);
  Request r = testing::MakeRequest(7, n, blocks);
  EXPECT_TRUE(
      LogitsNear(testing::RunStep(*whole, tokens, {testing::Seq(r, 0, n, true)}), expected.back()));
  auto stepwise = testing::MakeRunner(weights, 16);
  for (int32_t pos = 0; pos < n; ++pos) {
    const std::vector<float> logits =
        testing::RunStep(*stepwise, tokens, {testing::Seq(r, pos, 1, true)});
    EXPECT_TRUE(LogitsNear(testing::Row(logits, vocab, 0), expected[pos])) << "position " << pos;
  }
}

TEST(CpuModelRunnerGoldenTest, GqaMatchesReference) {
  TempDir dir;
  ExpectMatchesReference(testing::TinyConfig(2), dir.path());
}

TEST(CpuModelRunnerGoldenTest, MqaMatchesReference) {
  TempDir dir;
  ExpectMatchesReference(testing::TinyConfig(1), dir.path());
}

TEST(CpuModelRunnerGoldenTest, MhaMatchesReference) {
  TempDir dir;
  ExpectMatchesReference(testing::TinyConfig(4), dir.path());
}

TEST(CpuModelRunnerGoldenTest, Qwen2BiasesAndTiedEmbeddingsMatchReference) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2, ModelFamily::kQwen2);
  config.spec.tie_word_embeddings = true;
  ExpectMatchesReference(config, dir.path());
}

TEST(CpuModelRunnerGoldenTest, LlamaWithAttentionBiasMatchesReference) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2);
  config.spec.attention_bias = true;
  config.o_proj_bias = true;
  ExpectMatchesReference(config, dir.path());
}

TEST(CpuModelRunnerGoldenTest, Llama3RopeScalingMatchesReference) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2);
  // Wavelengths of head_dim 16 at theta 10000 span 6 .. 2e4 tokens: with these bounds
  // (16 and 64) some keep their frequency, some are divided, some interpolate.
  config.rope_scaling = RopeScaling{RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 64};
  ExpectMatchesReference(config, dir.path());
}

TEST(CpuModelRunnerGoldenTest, Bf16CheckpointMatchesReference) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2);
  config.torch_dtype = DType::kBf16;
  ExpectMatchesReference(config, dir.path());
}

ModelConfig TinyMixtral() {
  ModelConfig config = testing::TinyConfig(2, ModelFamily::kMixtral);
  config.spec.num_experts = 4;
  config.spec.num_experts_per_tok = 2;
  config.spec.intermediate_size = 48;  // each expert's width
  return config;
}

ModelConfig TinyQwen2Moe(bool norm_topk_prob, int32_t top_k) {
  ModelConfig config = testing::TinyConfig(2, ModelFamily::kQwen2Moe);
  config.spec.num_experts = 6;
  config.spec.num_experts_per_tok = top_k;
  config.spec.moe_intermediate_size = 32;
  config.spec.shared_expert_intermediate_size = 48;
  config.norm_topk_prob = norm_topk_prob;
  return config;
}

TEST(CpuModelRunnerGoldenTest, MixtralTopTwoMatchesReference) {
  TempDir dir;
  ExpectMatchesReference(TinyMixtral(), dir.path());
}

TEST(CpuModelRunnerGoldenTest, MixtralBf16CheckpointMatchesReference) {
  TempDir dir;
  ModelConfig config = TinyMixtral();
  config.torch_dtype = DType::kBf16;
  ExpectMatchesReference(config, dir.path());
}

TEST(CpuModelRunnerGoldenTest, Qwen2MoeSharedExpertMatchesReference) {
  TempDir dir;
  ExpectMatchesReference(TinyQwen2Moe(/*norm_topk_prob=*/false, 2), dir.path());
}

TEST(CpuModelRunnerGoldenTest, Qwen2MoeRenormalisedTopThreeMatchesReference) {
  TempDir dir;
  ExpectMatchesReference(TinyQwen2Moe(/*norm_topk_prob=*/true, 3), dir.path());
}

}  // namespace
}  // namespace servelab
