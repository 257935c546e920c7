#pragma once
// ChromeTraceWriter: streams iteration slices in the Chrome trace event format
// (chrome://tracing, ui.perfetto.dev):
//
//   {"traceEvents":[
//   {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"replica 0"}},
//   {"name":"step","ph":"X","pid":0,"tid":0,"ts":1000,"dur":500,"args":{...}},
//   ...
//   {"name":"dropped_steps","ph":"i","s":"g",...,"args":{"dropped_steps":3,...}}
//   ],"displayTimeUnit":"ms","otherData":{...}}
//
// One "X" slice per iteration: pid = replica, tid 0, ts/dur in microseconds (exact
// decimals of the ns times). With pipeline stages, one slice per batch and stage, tid =
// the stage, each stage a named track. Nothing is buffered beyond the current event. After
// `max_steps` slices the rest are counted, not written; Close() adds a global instant
// event saying how many were dropped. The file is valid JSON once Close() has run.
#include <cstdint>
#include <ostream>
#include <string>

#include "core/time.h"

namespace servelab {

struct TraceStepArgs {
  int64_t batch_size = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t kv_blocks_used = 0;
  int64_t waiting = 0;
  int64_t cached_tokens = -1;  // prefix caching: prompt tokens taken from the cache; -1 = off
};

class ChromeTraceWriter {
 public:
  // `os` may be null (every call is a no-op). Writes the opening and one process_name
  // event per replica.
  ChromeTraceWriter(std::ostream* os, int32_t num_replicas, int64_t max_steps,
                    const std::string& run_name, int32_t stages = 1);
  ~ChromeTraceWriter();  // closes the trace if Close() was not called

  // Each call is one slice (of max_steps).
  void Step(int32_t replica, TimeNs start, TimeNs end, const TraceStepArgs& args,
            int32_t stage = 0);
  // Writes the dropped-steps note (when any were dropped, at time `end`) and the closing.
  // Later calls do nothing.
  void Close(TimeNs end);

  int64_t written_steps() const { return written_steps_; }
  int64_t dropped_steps() const { return dropped_steps_; }

 private:
  void BeginEvent();  // the separator before every event but the first
  // A metadata event naming a process or a thread: "<label><number>".
  void Metadata(const char* event, int32_t pid, int32_t tid, const char* label, int64_t number);
  void Flush();

  std::ostream* os_;
  int64_t max_steps_;
  std::string run_name_;
  std::string buf_;
  bool any_event_ = false;
  bool closed_ = false;
  int64_t written_steps_ = 0;
  int64_t dropped_steps_ = 0;
  TimeNs last_end_ = 0;
};

}  // namespace servelab
