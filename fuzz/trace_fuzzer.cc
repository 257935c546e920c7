// A trace file in each format (the first byte picks it): read whole, validated, or an
// error naming file and line.
#include <cstdint>
#include <string>

#include "driver/trace_reader.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  if (size == 0) return 0;
  const TraceFormat format =
      data[0] % 3 == 0 ? TraceFormat::kAzure : data[0] % 3 == 1 ? TraceFormat::kMooncake
                                                                : TraceFormat::kSplitwise;
  const std::string path = fuzz::WriteInput(".trace", data + 1, size - 1);
  auto records = ReadTrace(path, format);
  if (records.ok()) {
    TimeNs last = 0;
    for (const TraceRecord& r : *records) {
      if (r.arrival < last || r.arrival > kMaxTime || r.prompt_len < 1 || r.output_len < 1) {
        fuzz::Broken("a trace record out of range", std::to_string(r.arrival));
      }
      last = r.arrival;
    }
  } else if (!records.status().IsBadInput()) {
    fuzz::Broken("a trace error that is not bad input", records.status().message());
  }
  return 0;
}
