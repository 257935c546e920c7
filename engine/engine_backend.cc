#include "engine/engine_backend.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "core/uniform_step.h"

namespace servelab {

EngineBackend::EngineBackend(std::unique_ptr<ModelRunner> runner,
                             const EngineBackendOptions& options, int32_t max_model_len)
    : runner_(std::move(runner)), options_(options), max_model_len_(max_model_len) {
  SERVELAB_CHECK(runner_ != nullptr);
  const int32_t window = runner_->Config().ServedContextLen();
  SERVELAB_CHECK(max_model_len_ >= 0 && max_model_len_ <= window);
  if (max_model_len_ == 0) max_model_len_ = window;
  options_.sampling.seed = options_.seed;
  name_ = "engine-" + std::string(runner_->Name());
}

Status EngineBackend::WarmUp(int32_t max_tokens, int32_t max_seqs) {
  SERVELAB_CHECK_MSG(tokens_.NumRequests() == 0, "the warm-up runs before any request is served");
  const KvCapacity capacity = runner_->Capacity();
  const int32_t pool_blocks = capacity.num_gpu_blocks;
  const int64_t pool_tokens = int64_t{pool_blocks} * capacity.block_size;
  const auto rows = static_cast<int32_t>(std::min<int64_t>(max_tokens, pool_tokens));
  if (rows < 1 || max_seqs < 1 || pool_blocks < 1) return Status::Ok();
  // `seqs` sequences of `chunk` new tokens each, nothing cached; skipped where the context
  // served or the pool cannot hold them.
  auto step = [&](int32_t seqs, int64_t chunk) -> Status {
    if (seqs < 1 || chunk < 1 || chunk > max_model_len_ || int64_t{seqs} * chunk > pool_tokens ||
        int64_t{seqs} * ((chunk + capacity.block_size - 1) / capacity.block_size) > pool_blocks) {
      return Status::Ok();
    }
    const UniformStep uniform(UniformStepShape{seqs, static_cast<int32_t>(chunk), 0, false},
                              -int64_t{seqs}, capacity.block_size, 0);
    auto result = Execute(uniform.Plan());
    for (const Request& r : uniform.Requests()) tokens_.Forget(r.id);
    return result.ok() ? Status::Ok() : result.status();
  };
  // Up to `seqs` sequences sharing `rows` tokens: the most rows, as few sequences as the
  // context served allows; the most sequences, one row each at least.
  auto share = [&](int32_t seqs) {
    seqs = std::min(seqs, pool_blocks);
    return step(seqs, std::min<int64_t>({rows / seqs, max_model_len_,
                                         int64_t{pool_blocks / seqs} * capacity.block_size}));
  };
  const auto fewest = static_cast<int32_t>(
      std::min<int64_t>(max_seqs, (int64_t{rows} + max_model_len_ - 1) / max_model_len_));
  SERVELAB_RETURN_IF_ERROR(share(fewest));
  const int32_t most = std::min(max_seqs, rows);
  if (most > fewest) SERVELAB_RETURN_IF_ERROR(share(most));
  if (!runner_->FirstShapesCostMore()) return Status::Ok();
  // A ladder of shapes, each about 1/8 above the last: one sequence's chunk of each token
  // count up to `rows` (the GEMMs' rows), and sequences of 2 tokens up to `most` of them
  // (the LM head's and sampling's emitting rows). Measured on an H200 without it, the
  // first serving run in a process had its mixed steps 24% slower than the model in its
  // first quarter and 3% in its last, and the runs after it in the process none of it.
  for (int32_t v = 2; v <= rows; v = std::max(v + 1, v + v / 8)) SERVELAB_RETURN_IF_ERROR(step(1, v));
  for (int32_t v = 2; v <= most && 2 * v <= rows; v = std::max(v + 1, v + v / 8)) {
    SERVELAB_RETURN_IF_ERROR(step(v, 2));
  }
  return Status::Ok();
}

Status EngineBackend::SetPrompt(int64_t request_id, std::vector<int32_t> ids) {
  const std::string who = "request " + std::to_string(request_id) + ": ";
  if (ids.empty()) return InvalidArgument(who + "empty prompt");
  const int32_t vocab = runner_->Config().spec.vocab_size;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return InvalidArgument(who + "prompt token " + std::to_string(i) + " is " +
                             std::to_string(ids[i]) + ", outside the vocabulary [0, " +
                             std::to_string(vocab) + ")");
    }
  }
  if (tokens_.Contains(request_id)) return InvalidArgument(who + "already has a prompt");
  tokens_.AddPrompt(request_id, std::move(ids));
  return Status::Ok();
}

void EngineBackend::EnsurePrompts(const StepPlan& plan) {
  const int32_t vocab = runner_->Config().spec.vocab_size;
  for (const ScheduledRequest& s : plan.seqs) {
    if (s.is_padding) continue;
    const Request& r = *s.request;
    if (!tokens_.Contains(r.id)) {
      // A request's first step (finished requests were forgotten, and a request is never
      // scheduled after it finished).
      SERVELAB_CHECK(r.num_generated == 0);
      tokens_.AddPrompt(r.id, SyntheticPrompt(options_.seed, r, vocab));
    }
    SERVELAB_CHECK_MSG(tokens_.PromptLen(r.id) == r.prompt_len,
                       "request " + std::to_string(r.id) + ": prompt of " +
                           std::to_string(tokens_.PromptLen(r.id)) + " ids, prompt_len " +
                           std::to_string(r.prompt_len));
  }
}

StatusOr<StepResult> EngineBackend::Execute(const StepPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.sampled_tokens.reserve(static_cast<size_t>(plan.num_emitting));
  result.stopped.reserve(static_cast<size_t>(plan.num_emitting));
  const bool on_device = runner_->SamplesOnDevice(options_.sampling);
  runner_->SwapOut(plan.swap_out);
  runner_->SwapIn(plan.swap_in);
  EnsurePrompts(plan);
  if (on_device) {
    uniforms_.clear();  // draws only matter at temperature > 0 (greedy needs none)
    for (const ScheduledRequest& s : plan.seqs) {
      if (!s.emits_token) continue;
      uniforms_.push_back(options_.sampling.temperature > 0.0f
                              ? SamplingUniform(options_.sampling.seed, s.request->id,
                                                s.request->num_generated)
                              : 0.0);
    }
    SERVELAB_RETURN_IF_ERROR(
        runner_->ExecuteAndSample(plan, tokens_, options_.sampling, uniforms_, device_ids_));
  } else {
    SERVELAB_RETURN_IF_ERROR(runner_->Execute(plan, tokens_, logits_));
  }
  const auto vocab = static_cast<size_t>(runner_->Config().spec.vocab_size);
  const std::vector<int32_t>& eos = runner_->Config().eos_token_ids;
  size_t row = 0;
  for (const ScheduledRequest& s : plan.seqs) {
    if (!s.emits_token) continue;
    const Request& r = *s.request;
    int32_t token = 0;
    if (on_device) {
      token = device_ids_[row];
    } else {
      const std::span<const float> logits(logits_.data() + row * vocab, vocab);
      token = sampler_.Sample(logits, options_.sampling, r.id, r.num_generated);
    }
    ++row;
    tokens_.Append(r.id, token);
    const bool is_eos = std::find(eos.begin(), eos.end(), token) != eos.end();
    result.sampled_tokens.push_back(token);
    result.stopped.push_back(is_eos && !options_.ignore_eos ? 1 : 0);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  result.elapsed =
      std::max<TimeNs>(1, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  return result;
}

}  // namespace servelab
