#pragma once
// The token ids of every request the engine serves: its prompt, then the tokens sampled
// for it, in one array indexed by position. A ModelRunner reads a step's input ids from
// here by position (num_computed_tokens + i), so a request re-prefilled after a recompute
// preemption reads prompt + generated ids with no special case.
//
// The simulator's Request carries only prompt_len; when no prompt was given for a request
// the EngineBackend synthesizes one (SyntheticPrompt): ids uniform over the vocabulary,
// determined by (seed, request id) alone, so a rerun with the same seed feeds the model
// the same tokens.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/request.h"

namespace servelab {

class TokenStore {
 public:
  bool Contains(int64_t request_id) const { return entries_.contains(request_id); }
  // REQUIRES: !Contains(request_id); prompt not empty.
  void AddPrompt(int64_t request_id, std::vector<int32_t> prompt);
  // Appends a sampled token. REQUIRES: Contains(request_id).
  void Append(int64_t request_id, int32_t token);
  // Drops the request's ids (it finished). No-op when absent.
  void Forget(int64_t request_id) { entries_.erase(request_id); }

  // Prompt then generated ids. REQUIRES: Contains(request_id).
  std::span<const int32_t> Tokens(int64_t request_id) const;
  int32_t PromptLen(int64_t request_id) const;
  std::span<const int32_t> Generated(int64_t request_id) const {
    return Tokens(request_id).subspan(static_cast<size_t>(PromptLen(request_id)));
  }
  size_t NumRequests() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // [prompt_len + num_generated]
    int32_t prompt_len = 0;
  };
  const Entry& Get(int64_t request_id) const;

  std::unordered_map<int64_t, Entry> entries_;
};

// `length` ids uniform in [0, vocab_size), from the stream of (seed, request_id).
// REQUIRES: length >= 0, vocab_size >= 1.
std::vector<int32_t> SyntheticPrompt(uint64_t seed, int64_t request_id, int32_t length,
                                     int32_t vocab_size);

// The prompt the engine synthesizes for `request`: SyntheticPrompt's, except that the
// leading tokens its prefix hashes identify (core/prefix_key.h) are a function of those
// hashes and the position alone, so requests the workload says share a prefix share its
// token ids -- and the prefix cache's shared blocks hold exactly their KV.
std::vector<int32_t> SyntheticPrompt(uint64_t seed, const Request& request, int32_t vocab_size);

}  // namespace servelab
