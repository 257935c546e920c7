#include "driver/chrome_trace.h"

#include <nlohmann/json.hpp>

#include "driver/csv_writer.h"

namespace servelab {
namespace {

// Microseconds from ns, exact ("1000.5").
void AppendMicros(std::string& out, TimeNs ns) { AppendDecimal(out, ns, 3); }

void AppendField(std::string& out, const char* key, int64_t value) {
  out.push_back('"');
  out.append(key);
  out.append("\":");
  AppendInt(out, value);
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(std::ostream* os, int32_t num_replicas,
                                     int64_t max_steps, const std::string& run_name,
                                     int32_t stages)
    : os_(os), max_steps_(max_steps), run_name_(run_name) {
  if (os_ == nullptr) return;
  buf_.reserve(512);
  buf_.append("{\"traceEvents\":[");
  for (int32_t r = 0; r < num_replicas; ++r) {
    Metadata("process_name", r, 0, "replica ", r);
    for (int32_t stage = 0; stages > 1 && stage < stages; ++stage) {
      Metadata("thread_name", r, stage, "stage ", stage);
    }
  }
  Flush();
}

ChromeTraceWriter::~ChromeTraceWriter() { Close(last_end_); }

void ChromeTraceWriter::Metadata(const char* event, int32_t pid, int32_t tid, const char* label,
                                 int64_t number) {
  BeginEvent();
  buf_.append("{\"name\":\"");
  buf_.append(event);
  buf_.append("\",\"ph\":\"M\",");
  AppendField(buf_, "pid", pid);
  buf_.push_back(',');
  AppendField(buf_, "tid", tid);
  buf_.append(",\"args\":{\"name\":\"");
  buf_.append(label);
  AppendInt(buf_, number);
  buf_.append("\"}}");
}

void ChromeTraceWriter::BeginEvent() {
  if (any_event_) buf_.append(",\n");
  else buf_.push_back('\n');
  any_event_ = true;
}

void ChromeTraceWriter::Flush() {
  os_->write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

void ChromeTraceWriter::Step(int32_t replica, TimeNs start, TimeNs end,
                             const TraceStepArgs& args, int32_t stage) {
  if (os_ == nullptr || closed_) return;
  if (end > last_end_) last_end_ = end;
  if (written_steps_ >= max_steps_) {
    ++dropped_steps_;
    return;
  }
  ++written_steps_;
  BeginEvent();
  buf_.append("{\"name\":\"step\",\"ph\":\"X\",");
  AppendField(buf_, "pid", replica);
  buf_.push_back(',');
  AppendField(buf_, "tid", stage);
  buf_.append(",\"ts\":");
  AppendMicros(buf_, start);
  buf_.append(",\"dur\":");
  AppendMicros(buf_, end - start);
  buf_.append(",\"args\":{");
  AppendField(buf_, "batch_size", args.batch_size);
  buf_.push_back(',');
  AppendField(buf_, "prefill_tokens", args.prefill_tokens);
  buf_.push_back(',');
  AppendField(buf_, "decode_tokens", args.decode_tokens);
  buf_.push_back(',');
  AppendField(buf_, "kv_blocks_used", args.kv_blocks_used);
  buf_.push_back(',');
  AppendField(buf_, "waiting", args.waiting);
  if (args.cached_tokens >= 0) {
    // Prefill split into what was computed and what the prefix cache supplied.
    buf_.push_back(',');
    AppendField(buf_, "cached_tokens", args.cached_tokens);
  }
  buf_.append("}}");
  Flush();
}

void ChromeTraceWriter::Close(TimeNs end) {
  if (os_ == nullptr || closed_) return;
  closed_ = true;
  if (end < last_end_) end = last_end_;
  if (dropped_steps_ > 0) {
    BeginEvent();
    buf_.append("{\"name\":\"dropped_steps\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":");
    AppendMicros(buf_, end);
    buf_.append(",\"args\":{");
    AppendField(buf_, "dropped_steps", dropped_steps_);
    buf_.push_back(',');
    AppendField(buf_, "trace_max_steps", max_steps_);
    buf_.append("}}");
  }
  buf_.append("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"run_name\":");
  buf_.append(nlohmann::json(run_name_).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace));
  buf_.push_back(',');
  AppendField(buf_, "written_steps", written_steps_);
  buf_.push_back(',');
  AppendField(buf_, "dropped_steps", dropped_steps_);
  buf_.append("}}\n");
  Flush();
  os_->flush();
}

}  // namespace servelab
