#pragma once
// The workload section of an experiment: synthetic (arrival process x length
// distributions) or a trace replay, plus clients that tag requests by share.
#include <cstdint>
#include <string>
#include <vector>

#include "core/fields.h"

namespace servelab {

enum class ArrivalProcess : uint8_t { kPoisson, kGamma, kConstant, kBurst };
inline constexpr EnumName<ArrivalProcess> kArrivalNames[] = {
    {"poisson", ArrivalProcess::kPoisson},
    {"gamma", ArrivalProcess::kGamma},
    {"constant", ArrivalProcess::kConstant},
    {"burst", ArrivalProcess::kBurst}};

struct ArrivalConfig {
  ArrivalProcess process = ArrivalProcess::kPoisson;
  double rate = 1.0;  // mean requests per second (not used by burst: all arrive at t=0)
  double cv = 1.0;    // gamma only: coefficient of variation of inter-arrival times

  template <class V>
  void VisitFields(V& v) {
    v.Enum("process", process, EnumNames<ArrivalProcess>(kArrivalNames));
    // (At most one arrival per nanosecond; at least one per ~30 years.)
    if (process != ArrivalProcess::kBurst) v.Field("rate", rate, Bounds{1e-9, 1e9});
    if (process == ArrivalProcess::kGamma) v.Field("cv", cv, kPositive);
  }
};

enum class LengthDist : uint8_t { kFixed, kUniform, kNormal, kLognormal, kZipf, kEmpirical };
inline constexpr EnumName<LengthDist> kLengthDistNames[] = {
    {"fixed", LengthDist::kFixed},         {"uniform", LengthDist::kUniform},
    {"normal", LengthDist::kNormal},       {"lognormal", LengthDist::kLognormal},
    {"zipf", LengthDist::kZipf},           {"empirical", LengthDist::kEmpirical}};

// A token-length distribution. Samples are rounded to the nearest integer and clamped
// to [min, max] (max 0 = unbounded); lengths are always >= 1.
struct LengthDistConfig {
  LengthDist dist = LengthDist::kFixed;
  int64_t value = 128;  // fixed
  double mean = 0;      // normal, lognormal: mean of the distribution (not of its log)
  double std = 0;       // normal: standard deviation
  double cv = 1.0;      // lognormal: coefficient of variation (std / mean)
  double theta = 1.0;   // zipf: P(k) proportional to k^-theta over [min, max]
  int64_t min = 1;      // uniform, zipf: lower bound; others: clamp
  int64_t max = 0;      // uniform, zipf: upper bound (required); others: clamp, 0 = none
  std::string path;     // empirical: a CSV with a header, or one integer per line
  std::string column;   // empirical: the CSV column to sample (default: the first)

  static LengthDistConfig Fixed(int64_t tokens) {
    LengthDistConfig config;
    config.value = tokens;
    return config;
  }

  template <class V>
  void VisitFields(V& v) {
    v.Enum("dist", dist, EnumNames<LengthDist>(kLengthDistNames));
    switch (dist) {
      case LengthDist::kFixed:
        v.Field("value", value, kAtLeastOne);
        break;
      case LengthDist::kUniform:
        v.Field("min", min, kAtLeastOne);
        // Required, but 0 (absent) parses: the workload says it is missing, and a resolved
        // config that writes it back parses again.
        v.Field("max", max, kNonNegative);
        break;
      case LengthDist::kNormal:
        v.Field("mean", mean, kPositive);
        v.Field("std", std, kNonNegative);
        v.Field("min", min, kAtLeastOne);
        v.Field("max", max, kNonNegative);
        break;
      case LengthDist::kLognormal:
        v.Field("mean", mean, kPositive);
        v.Field("cv", cv, kNonNegative);
        v.Field("min", min, kAtLeastOne);
        v.Field("max", max, kNonNegative);
        break;
      case LengthDist::kZipf:
        v.Field("theta", theta, kPositive);
        v.Field("min", min, kAtLeastOne);
        v.Field("max", max, kNonNegative);  // required, as uniform's
        break;
      case LengthDist::kEmpirical:
        v.Path("path", path);
        v.Field("column", column);
        v.Field("min", min, kAtLeastOne);
        v.Field("max", max, kNonNegative);
        break;
    }
  }
};

enum class TraceFormat : uint8_t { kAzure, kMooncake, kSplitwise };
inline constexpr EnumName<TraceFormat> kTraceFormatNames[] = {
    {"azure", TraceFormat::kAzure},
    {"mooncake", TraceFormat::kMooncake},
    {"splitwise", TraceFormat::kSplitwise}};

struct TraceConfig {
  std::string path;
  TraceFormat format = TraceFormat::kAzure;
  double time_scale = 1.0;  // multiplies every arrival time (2.0 = half the load)
  double rate = 0.0;        // > 0: rescale arrival times to this mean rate (req/s)

  template <class V>
  void VisitFields(V& v) {
    v.Path("path", path);
    v.Enum("format", format, EnumNames<TraceFormat>(kTraceFormatNames));
    v.Field("time_scale", time_scale, kPositive);
    v.Field("rate", rate, kNonNegative);
  }
};

struct ClientConfig {
  std::string name = "default";
  double share = 1.0;   // fraction of requests tagged with this client (normalized)
  int32_t priority = 0; // lower = more urgent (priority policies)
  double weight = 1.0;  // fairness weight (VTC)

  template <class V>
  void VisitFields(V& v) {
    v.Field("name", name);
    v.Field("share", share, kPositive);
    v.Field("priority", priority);
    v.Field("weight", weight, kPositive);
  }
};

// Shared system prompts (workload.prefix): each request starts, with probability
// `share`, with one of `num_prompts` fixed prompts -- chosen by popularity, P(k) ~
// k^-popularity_theta over k = 1..num_prompts (0: uniform) -- followed by its own
// input_tokens. Requests that start with the same prompt share its KV blocks under
// prefix caching. Lengths are drawn once per prompt from their own seeded stream.
struct SharedPrefixConfig {
  int32_t num_prompts = 1;
  LengthDistConfig prompt_tokens = LengthDistConfig::Fixed(1024);
  double popularity_theta = 0.0;
  double share = 1.0;

  template <class V>
  void VisitFields(V& v) {
    v.Field("num_prompts", num_prompts, Bounds{1, 1'000'000});
    v.Section("prompt_tokens", prompt_tokens);
    v.Field("popularity_theta", popularity_theta, Bounds{0.0, 100.0});
    v.Field("share", share, kUnitInterval);
  }
};

// Multi-turn sessions (workload.sessions): the arrival process starts sessions; each has
// `turns` turns (drawn per session). A turn's prompt is the whole conversation so far --
// the session's system prompt (workload.prefix), every earlier message and answer -- plus
// its new message (input_tokens); its answer is output_tokens long; the next turn arrives
// think_time_s (exponential with this mean; 0 = at once) after the answer is complete, so
// the load is closed-loop. Later turns find the conversation in the prefix cache. A
// session's lengths and think times are drawn up front from its own stream (the same
// conversation whatever the policy); a rejected turn ends its session. At most 10,000
// turns (an unbounded turns distribution stops there) and 2^24 tokens of conversation.
//
// reuse_answers: a turn's answer is part of its identified prefix, so the next turn
// reuses the blocks its decode filled (a real server's next prompt holds exactly that
// answer). The engine cannot feed a turn the tokens it sampled for the previous one, so
// there it must be false: the answer is then computed once more, as the next prompt.
struct SessionConfig {
  LengthDistConfig turns = LengthDistConfig::Fixed(4);
  double think_time_s = 10.0;
  bool reuse_answers = true;

  template <class V>
  void VisitFields(V& v) {
    v.Section("turns", turns);
    v.Field("think_time_s", think_time_s, Bounds{0.0, 1e6});
    v.Field("reuse_answers", reuse_answers);
  }
};

struct WorkloadConfig {
  // Stop after this many requests (0 = no limit) and/or after arrivals pass duration_s
  // (0 = no limit). A synthetic workload needs at least one of the two.
  int64_t num_requests = 0;
  double duration_s = 0;
  ArrivalConfig arrival;
  LengthDistConfig input_tokens = LengthDistConfig::Fixed(512);
  LengthDistConfig output_tokens = LengthDistConfig::Fixed(128);
  bool has_trace = false;
  TraceConfig trace;  // when present, replaces arrival and the length distributions
  std::vector<ClientConfig> clients{ClientConfig{}};
  bool has_prefix = false;
  SharedPrefixConfig prefix;  // synthetic only: the prompt is a shared prefix + input_tokens
  bool has_sessions = false;
  SessionConfig sessions;     // synthetic only; num_requests / duration_s bound the sessions

  template <class V>
  void VisitFields(V& v) {
    v.Field("num_requests", num_requests, Bounds{0, 1e9});
    v.Field("duration_s", duration_s, Bounds{0, 1e9});  // ~31 years: ns fit an int64
    v.OptionalSection("trace", trace, has_trace);
    if (!has_trace) {
      v.Section("arrival", arrival);
      v.Section("input_tokens", input_tokens);
      v.Section("output_tokens", output_tokens);
      v.OptionalSection("prefix", prefix, has_prefix);
      v.OptionalSection("sessions", sessions, has_sessions);
    }
    v.List("clients", clients);
  }
};

}  // namespace servelab
