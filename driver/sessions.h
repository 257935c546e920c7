#pragma once
// Multi-turn sessions (workload.sessions, SessionConfig): each session's conversation is
// drawn whole when it starts -- turns, each turn's message and answer lengths, the think
// times -- from its own stream, and named by prefix hashes (core/prefix_key.h) at
// kSharedPrefixBlockTokens granularity that extend its system prompt's. Turn t's request
// is the conversation up to its message; the next turn comes when it finishes.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/request.h"
#include "core/rng.h"
#include "driver/length_distribution.h"
#include "driver/workload_config.h"

namespace servelab {

// Bounds that keep a session's state small whatever the config asks.
inline constexpr int64_t kMaxTurns = 10000;
inline constexpr int64_t kMaxConversationTokens = int64_t{1} << 24;

class Sessions {
 public:
  // Answers are identified when config.reuse_answers (see SessionConfig).
  Sessions(const SessionConfig& config, uint64_t seed, LengthDistribution messages,
           LengthDistribution answers);

  static StatusOr<LengthDistribution> MakeTurns(const SessionConfig& config);

  // Makes `first` (its id, arrival, client and, with a system prompt, prefix already set;
  // prompt_len = system prompt + first message) the first turn of a new session.
  void Start(Request& first, const LengthDistribution& turns);
  // The next turn of `finished`'s session, or false when it was the last or was rejected
  // (the session's state is then dropped).
  bool Next(const Request& finished, int64_t id, Request& next);

 private:
  struct Session {
    std::vector<int32_t> messages, answers;  // by turn
    std::vector<TimeNs> think;               // by turn: after that turn's answer
    std::vector<uint64_t> hashes;            // the whole conversation's prefix hashes
    int32_t system_tokens = 0;
  };
  void Fill(const Session& s, int64_t session, int32_t turn, Request& r) const;

  SessionConfig config_;
  uint64_t seed_;
  LengthDistribution messages_, answers_;
  bool identify_answers_;
  int64_t next_session_ = 0;
  std::unordered_map<int64_t, Session> live_;
};

}  // namespace servelab
