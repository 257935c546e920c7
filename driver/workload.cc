// MakeWorkload: synthetic (arrival process x length distributions, generated lazily)
// or trace replay (read whole, then rescaled), both tagged with clients by share.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "core/prefix_key.h"
#include "core/rng.h"
#include "core/text.h"
#include "driver/arrival_process.h"
#include "driver/length_distribution.h"
#include "driver/sessions.h"
#include "driver/shared_prefixes.h"
#include "driver/trace_reader.h"
#include "driver/workload.h"

namespace servelab {
namespace {

// Tags requests with a client drawn by share (shares normalized) from its own stream.
class ClientPicker {
 public:
  static StatusOr<ClientPicker> Make(const std::vector<ClientConfig>& clients) {
    ClientPicker picker;
    double total = 0.0;
    for (size_t i = 0; i < clients.size(); ++i) {
      const double share = clients[i].share;
      if (!(share > 0) || !std::isfinite(share)) {
        return InvalidArgument("workload.clients[" + std::to_string(i) +
                               "].share: must be > 0, got " + std::to_string(share));
      }
      total += share;
      picker.cdf_.push_back(total);
      picker.priorities_.push_back(clients[i].priority);
    }
    for (double& c : picker.cdf_) c /= total;
    if (!picker.cdf_.empty()) picker.cdf_.back() = 1.0;
    return picker;
  }

  // No clients configured means one implicit client 0 with priority 0.
  void Pick(Rng& rng, Request& request) const {
    int32_t client = 0;
    if (cdf_.size() > 1) {
      const double u = rng.Uniform();
      client = static_cast<int32_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    }
    request.client = client;
    request.priority = priorities_.empty() ? 0 : priorities_[client];
  }

 private:
  std::vector<double> cdf_;  // cumulative normalized shares; last entry exactly 1
  std::vector<int32_t> priorities_;
};

// Limits shared by both kinds: stop after `max_requests` (0: none) or at the first
// arrival later than `duration` (kNever: none).
struct StopRule {
  int64_t max_requests = 0;
  TimeNs duration = kNever;

  bool Stops(int64_t next_id, TimeNs arrival) const {
    return (max_requests > 0 && next_id >= max_requests) ||
           (duration != kNever && arrival > duration);
  }
};

class SyntheticWorkload final : public Workload {
 public:
  SyntheticWorkload(const WorkloadConfig& config, uint64_t seed, ArrivalGenerator arrivals,
                    LengthDistribution input, LengthDistribution output, ClientPicker clients,
                    StopRule stop, std::optional<SharedPrefixes> prefixes,
                    std::optional<LengthDistribution> turns)
      : arrivals_(std::move(arrivals)),
        input_(std::move(input)),
        output_(std::move(output)),
        clients_(std::move(clients)),
        stop_(stop),
        joint_(input_.IsEmpirical() && output_.IsEmpirical() &&
               config.input_tokens.path == config.output_tokens.path),
        arrival_rng_(seed, RngStream::kArrivals),
        input_rng_(seed, RngStream::kInputLengths),
        output_rng_(seed, RngStream::kOutputLengths),
        client_rng_(seed, RngStream::kClients),
        prefixes_(std::move(prefixes)),
        prefix_rng_(seed, RngStream::kPrefixChoice),
        turns_(std::move(turns)) {
    if (turns_) sessions_.emplace(config.sessions, seed, input_, output_);
    // Same file => same rows (every row holds a value in each sampled column).
    SERVELAB_CHECK(!joint_ || input_.NumRows() == output_.NumRows());
  }

  bool Next(Request& request) override {
    if (done_) return false;
    const TimeNs arrival = arrivals_.Next(arrival_rng_);
    // Follow-ups take ids too: the stop rule counts what the arrival process started.
    if (stop_.Stops(started_, arrival)) {
      done_ = true;
      return false;
    }
    request.id = next_id_++;
    ++started_;
    request.arrival = arrival;
    if (joint_) {
      // One row, drawn from the input stream, for both: keeps (input, output) pairs.
      const size_t row = input_.SampleRow(input_rng_);
      request.prompt_len = input_.Row(row);
      request.target_output_len = output_.Row(row);
    } else {
      request.prompt_len = input_.Sample(input_rng_);
      request.target_output_len = output_.Sample(output_rng_);
    }
    request.prefix_block_hashes.clear();
    request.prefix_block_tokens = 0;
    request.prefix_identified_tokens = 0;
    if (prefixes_) prefixes_->Apply(prefix_rng_, request);
    clients_.Pick(client_rng_, request);
    request.session = -1;
    request.turn = 0;
    if (sessions_) sessions_->Start(request, *turns_);
    return true;
  }

  bool FollowUp(const Request& finished, Request& next) override {
    if (!sessions_ || !sessions_->Next(finished, next_id_, next)) return false;
    ++next_id_;
    return true;
  }
  bool HasFollowUps() const override { return sessions_.has_value(); }

 private:
  ArrivalGenerator arrivals_;
  LengthDistribution input_;
  LengthDistribution output_;
  ClientPicker clients_;
  StopRule stop_;
  bool joint_;
  Rng arrival_rng_;
  Rng input_rng_;
  Rng output_rng_;
  Rng client_rng_;
  std::optional<SharedPrefixes> prefixes_;  // workload.prefix
  Rng prefix_rng_;
  int64_t started_ = 0;  // requests (sessions) the arrival process started
  std::optional<LengthDistribution> turns_;  // workload.sessions
  std::optional<Sessions> sessions_;
  int64_t next_id_ = 0;
  bool done_ = false;
};

class TraceWorkload final : public Workload {
 public:
  TraceWorkload(std::vector<TraceRecord> records, int32_t block_tokens, uint64_t seed,
                ClientPicker clients, StopRule stop)
      : records_(std::move(records)),
        block_tokens_(block_tokens),
        clients_(std::move(clients)),
        stop_(stop),
        client_rng_(seed, RngStream::kClients) {}

  bool Next(Request& request) override {
    if (next_ >= records_.size()) return false;
    const TraceRecord& record = records_[next_];
    if (stop_.Stops(static_cast<int64_t>(next_), record.arrival)) {
      next_ = records_.size();
      return false;
    }
    request.id = static_cast<int64_t>(next_++);
    request.arrival = record.arrival;
    request.prompt_len = record.prompt_len;
    request.target_output_len = record.output_len;
    // The trace's ids name a block's contents; the cache wants prefix hashes.
    request.prefix_block_hashes.assign(record.prefix_block_hashes.begin(),
                                       record.prefix_block_hashes.end());
    ChainPrefixHashes(request.prefix_block_hashes);
    const bool keyed = !record.prefix_block_hashes.empty();
    request.prefix_block_tokens = keyed ? block_tokens_ : 0;
    request.prefix_identified_tokens = keyed ? record.prompt_len : 0;
    clients_.Pick(client_rng_, request);
    return true;
  }

 private:
  std::vector<TraceRecord> records_;  // arrival order, times already scaled
  int32_t block_tokens_;
  ClientPicker clients_;
  StopRule stop_;
  Rng client_rng_;
  size_t next_ = 0;
};

// Multiplies trace times by time_scale, or, when rate > 0, by the factor that makes the
// mean rate (n - 1) / (t_last - t_first) equal rate (rate wins over time_scale).
Status ScaleTraceTimes(const TraceConfig& trace, std::vector<TraceRecord>& records) {
  if (!(trace.time_scale > 0) || !std::isfinite(trace.time_scale)) {
    return InvalidArgument("workload.trace.time_scale: must be > 0, got " +
                           std::to_string(trace.time_scale));
  }
  if (!(trace.rate >= 0) || !std::isfinite(trace.rate)) {
    return InvalidArgument("workload.trace.rate: must be >= 0, got " +
                           std::to_string(trace.rate));
  }
  double factor = trace.time_scale;
  if (trace.rate > 0) {
    // Records are sorted and the first is at 0, so the span is the last arrival.
    const TimeNs span = records.back().arrival;
    if (records.size() < 2 || span <= 0) {
      return InvalidArgument("workload.trace.rate: cannot rescale '" + trace.path +
                             "': all its arrivals share one time");
    }
    const double mean_rate = static_cast<double>(records.size() - 1) / ToSeconds(span);
    factor = mean_rate / trace.rate;
  }
  if (factor == 1.0) return Status::Ok();
  for (TraceRecord& r : records) {
    r.arrival = static_cast<TimeNs>(std::llround(static_cast<double>(r.arrival) * factor));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Workload>> MakeWorkload(const WorkloadConfig& config, uint64_t seed) {
  if (config.num_requests < 0) {
    return InvalidArgument("workload.num_requests: must be >= 0, got " +
                           std::to_string(config.num_requests));
  }
  if (!(config.duration_s >= 0) || !std::isfinite(config.duration_s)) {
    return InvalidArgument("workload.duration_s: must be >= 0, got " +
                           std::to_string(config.duration_s));
  }
  StopRule stop;
  stop.max_requests = config.num_requests;
  if (config.duration_s > 0) stop.duration = FromSeconds(config.duration_s);
  auto clients = ClientPicker::Make(config.clients);
  if (!clients.ok()) return clients.status();

  if (config.has_trace) {
    auto records = ReadTrace(config.trace.path, config.trace.format);
    if (!records.ok()) return records.status();
    SERVELAB_RETURN_IF_ERROR(ScaleTraceTimes(config.trace, *records));
    return std::unique_ptr<Workload>(
        new TraceWorkload(std::move(*records), TraceBlockTokens(config.trace.format), seed,
                          std::move(*clients), stop));
  }

  if (config.num_requests == 0 && config.duration_s == 0) {
    return InvalidArgument("workload: set num_requests or duration_s");
  }
  // Requests in flight are held in memory: a run's expected count stays bounded.
  constexpr double kMaxExpectedRequests = 1e9;
  if (config.num_requests == 0 && config.arrival.process != ArrivalProcess::kBurst &&
      config.duration_s * config.arrival.rate > kMaxExpectedRequests) {
    return InvalidArgument("workload: duration_s x arrival.rate = " +
                           FormatDouble(config.duration_s * config.arrival.rate) +
                           " requests, more than 1e9; set num_requests to bound the run");
  }
  if (config.arrival.process == ArrivalProcess::kBurst && config.num_requests == 0) {
    return InvalidArgument(
        "workload.num_requests: a burst arrives entirely at t=0, so duration_s cannot end "
        "it; set num_requests");
  }
  auto arrivals = ArrivalGenerator::Make(config.arrival, "workload.arrival");
  if (!arrivals.ok()) return arrivals.status();
  auto input = LengthDistribution::Make(config.input_tokens, "workload.input_tokens");
  if (!input.ok()) return input.status();
  auto output = LengthDistribution::Make(config.output_tokens, "workload.output_tokens");
  if (!output.ok()) return output.status();
  std::optional<SharedPrefixes> prefixes;
  if (config.has_prefix) {
    auto made = SharedPrefixes::Make(config.prefix, seed);
    if (!made.ok()) return made.status();
    prefixes = std::move(made).value();
  }
  std::optional<LengthDistribution> turns;
  if (config.has_sessions) {
    auto made = Sessions::MakeTurns(config.sessions);
    if (!made.ok()) return made.status();
    turns = std::move(made).value();
  }
  return std::unique_ptr<Workload>(
      new SyntheticWorkload(config, seed, std::move(*arrivals), std::move(*input),
                            std::move(*output), std::move(*clients), stop,
                            std::move(prefixes), std::move(turns)));
}

}  // namespace servelab
