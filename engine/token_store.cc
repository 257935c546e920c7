#include "engine/token_store.h"

#include <algorithm>
#include <string>

#include "core/prefix_key.h"
#include "core/rng.h"
#include "core/status.h"

namespace servelab {
namespace {

// Keeps synthesized prompts apart from the workload's streams (core/rng.h RngStream) for
// the same seed: the stream id mixes this constant with the request id.
constexpr uint64_t kPromptStreamSalt = 0x70726f6d70747321ull;  // "prompts!"

}  // namespace

void TokenStore::AddPrompt(int64_t request_id, std::vector<int32_t> prompt) {
  SERVELAB_CHECK(!prompt.empty());
  const auto prompt_len = static_cast<int32_t>(prompt.size());
  const bool inserted = entries_.emplace(request_id, Entry{std::move(prompt), prompt_len}).second;
  SERVELAB_CHECK_MSG(inserted, "request " + std::to_string(request_id) + " already has a prompt");
}

void TokenStore::Append(int64_t request_id, int32_t token) {
  auto it = entries_.find(request_id);
  SERVELAB_CHECK_MSG(it != entries_.end(), "no tokens for request " + std::to_string(request_id));
  it->second.tokens.push_back(token);
}

const TokenStore::Entry& TokenStore::Get(int64_t request_id) const {
  auto it = entries_.find(request_id);
  SERVELAB_CHECK_MSG(it != entries_.end(), "no tokens for request " + std::to_string(request_id));
  return it->second;
}

std::span<const int32_t> TokenStore::Tokens(int64_t request_id) const {
  return Get(request_id).tokens;
}

int32_t TokenStore::PromptLen(int64_t request_id) const { return Get(request_id).prompt_len; }

std::vector<int32_t> SyntheticPrompt(uint64_t seed, int64_t request_id, int32_t length,
                                     int32_t vocab_size) {
  SERVELAB_CHECK(length >= 0 && vocab_size >= 1);
  Rng rng(seed, kPromptStreamSalt ^ static_cast<uint64_t>(request_id));
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.UniformInt(0, vocab_size - 1));
  return ids;
}

std::vector<int32_t> SyntheticPrompt(uint64_t seed, const Request& request, int32_t vocab_size) {
  std::vector<int32_t> ids = SyntheticPrompt(seed, request.id, request.prompt_len, vocab_size);
  if (request.prefix_block_tokens <= 0) return ids;
  const int64_t shared = std::min<int64_t>(
      {request.prefix_identified_tokens, request.prompt_len,
       static_cast<int64_t>(request.prefix_block_hashes.size()) * request.prefix_block_tokens});
  for (int64_t p = 0; p < shared; ++p) {
    const uint64_t hash = request.prefix_block_hashes[static_cast<size_t>(p / request.prefix_block_tokens)];
    ids[static_cast<size_t>(p)] =
        static_cast<int32_t>(MixKey(hash, static_cast<uint64_t>(p)) % static_cast<uint64_t>(vocab_size));
  }
  return ids;
}

}  // namespace servelab
