#include "driver/sessions.h"

#include <algorithm>
#include <limits>

#include "core/prefix_key.h"
#include "driver/shared_prefixes.h"

namespace servelab {

Sessions::Sessions(const SessionConfig& config, uint64_t seed, LengthDistribution messages,
                   LengthDistribution answers)
    : config_(config),
      seed_(seed),
      messages_(std::move(messages)),
      answers_(std::move(answers)),
      identify_answers_(config.reuse_answers) {}

StatusOr<LengthDistribution> Sessions::MakeTurns(const SessionConfig& config) {
  if (!(config.think_time_s >= 0 && config.think_time_s <= 1e6)) {
    return InvalidArgument("workload.sessions.think_time_s: must be in [0, 1000000]");
  }
  LengthDistConfig turns = config.turns;
  const int64_t asked = turns.dist == LengthDist::kFixed ? turns.value : turns.max;
  if (asked > kMaxTurns) {
    return InvalidArgument("workload.sessions.turns: at most " + std::to_string(kMaxTurns) +
                           " turns per session, got " + std::to_string(asked));
  }
  if (turns.max == 0) turns.max = kMaxTurns;  // unbounded distributions stop there
  return LengthDistribution::Make(turns, "workload.sessions.turns");
}

void Sessions::Start(Request& first, const LengthDistribution& turns) {
  const int64_t id = next_session_++;
  Rng rng(DeriveSeed(seed_, static_cast<uint64_t>(RngStream::kSessions)) ^
              static_cast<uint64_t>(id),
          0);
  Session s;
  const int32_t n = turns.Sample(rng);
  // The first message is already drawn (first.prompt_len less the system prompt).
  s.system_tokens = first.prefix_identified_tokens;
  const int64_t first_message = int64_t{first.prompt_len} - s.system_tokens;
  int64_t total = s.system_tokens;
  for (int32_t t = 0; t < n; ++t) {
    const int32_t message = t == 0 ? static_cast<int32_t>(first_message) : messages_.Sample(rng);
    const int32_t answer = t == 0 ? first.target_output_len : answers_.Sample(rng);
    // A longer conversation fits no model: no turn past it is drawn (the first always is,
    // and is rejected as too long if it is).
    if (t > 0 && total + message + answer > kMaxConversationTokens) break;
    s.messages.push_back(message);
    s.answers.push_back(answer);
    const double think = config_.think_time_s > 0 ? rng.Exponential(config_.think_time_s) : 0.0;
    s.think.push_back(FromSeconds(std::min(think, 1e9)));
    total += message + answer;
  }
  // Hashes for at most kMaxConversationTokens (1M of them, 8 MB): a first turn longer
  // than that is identified only that far.
  total = std::min(total, kMaxConversationTokens);
  // The system prompt's full hash blocks, then the session's own.
  s.hashes.assign(first.prefix_block_hashes.begin(), first.prefix_block_hashes.end());
  uint64_t parent = s.hashes.empty() ? MixKey(0x5e55105eULL, 0) : s.hashes.back();
  const auto blocks = static_cast<size_t>((total + kSharedPrefixBlockTokens - 1) / kSharedPrefixBlockTokens);
  for (size_t j = s.hashes.size(); j < blocks; ++j) {
    parent = MixKey(parent, MixKey(0x5e55105eULL ^ static_cast<uint64_t>(id), j));
    s.hashes.push_back(parent);
  }
  Fill(s, id, 0, first);
  if (n > 1) live_.emplace(id, std::move(s));
}

void Sessions::Fill(const Session& s, int64_t session, int32_t turn, Request& r) const {
  int64_t history = s.system_tokens;
  for (int32_t t = 0; t < turn; ++t) history += s.messages[t] + s.answers[t];
  const int64_t prompt = history + s.messages[turn];
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  r.session = session;
  r.turn = turn;
  r.prompt_len = static_cast<int32_t>(std::min(prompt, kMax));
  r.target_output_len = s.answers[turn];
  const int64_t identified = prompt + (identify_answers_ ? s.answers[turn] : 0);
  r.prefix_block_tokens = kSharedPrefixBlockTokens;
  r.prefix_identified_tokens = static_cast<int32_t>(
      std::min({identified, kMax, static_cast<int64_t>(s.hashes.size()) * kSharedPrefixBlockTokens}));
  const auto needed = static_cast<size_t>((int64_t{r.prefix_identified_tokens} + kSharedPrefixBlockTokens - 1) /
                                          kSharedPrefixBlockTokens);
  r.prefix_block_hashes.assign(s.hashes.begin(),
                               s.hashes.begin() + static_cast<ptrdiff_t>(std::min(needed, s.hashes.size())));
}

bool Sessions::Next(const Request& finished, int64_t id, Request& next) {
  const auto it = live_.find(finished.session);
  if (it == live_.end()) return false;
  const Session& s = it->second;
  const int32_t turn = finished.turn + 1;
  if (finished.state != RequestState::kFinished || turn >= static_cast<int32_t>(s.messages.size())) {
    live_.erase(it);
    return false;
  }
  next.id = id;
  next.arrival = finished.finish + s.think[static_cast<size_t>(finished.turn)];
  next.client = finished.client;
  next.priority = finished.priority;
  Fill(s, finished.session, turn, next);
  if (turn + 1 == static_cast<int32_t>(s.messages.size())) live_.erase(it);
  return true;
}

}  // namespace servelab
