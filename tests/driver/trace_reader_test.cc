#include "driver/trace_reader.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace servelab {
namespace {

std::string WriteFixture(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "servelab_trace_reader_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::vector<TraceRecord> Read(const std::string& path, TraceFormat format) {
  auto records = ReadTrace(path, format);
  EXPECT_TRUE(records.ok()) << records.status().message();
  return records.ok() ? std::move(records).value() : std::vector<TraceRecord>{};
}

std::string SharedTrace(const std::string& name) {
  return std::string(SERVELAB_SHARED_DATA) + "/traces/" + name;
}

TimeNs Ts(std::string_view text) {
  auto t = ParseTimestamp(text);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : -1;
}

TEST(ParseTimestampTest, ExactToTheNanosecond) {
  EXPECT_EQ(Ts("1970-01-01 00:00:00"), 0);
  EXPECT_EQ(Ts("1970-01-01 00:00:00.0000001"), 100);
  EXPECT_EQ(Ts("1970-01-02T00:00:01.5"), (86'400 + 1) * kNsPerSec + 500'000'000);
  EXPECT_EQ(Ts("2023-11-16 18:15:46.6805900"), 1'700'158'546'680'590'000);
  EXPECT_EQ(Ts("1969-12-31 23:59:59.999999999"), -1);
}

TEST(ParseTimestampTest, DayMonthYearAndLeapBoundaries) {
  // 200 ns across midnight, a month end and a year end at once.
  EXPECT_EQ(Ts("2024-01-01 00:00:00.0000001") - Ts("2023-12-31 23:59:59.9999999"), 200);
  EXPECT_EQ(Ts("2023-11-17 00:00:00.0000003") - Ts("2023-11-16 23:59:59.9999998"), 500);
  // 2024 is a leap year, 2023 and 2100 are not, 2000 is.
  EXPECT_EQ(Ts("2024-03-01 00:00:00") - Ts("2024-02-28 00:00:00"), 2 * 86'400 * kNsPerSec);
  EXPECT_EQ(Ts("2023-03-01 00:00:00") - Ts("2023-02-28 00:00:00"), 86'400 * kNsPerSec);
  EXPECT_EQ(Ts("2100-03-01 00:00:00") - Ts("2100-02-28 00:00:00"), 86'400 * kNsPerSec);
  EXPECT_EQ(Ts("2000-03-01 00:00:00") - Ts("2000-02-28 00:00:00"), 2 * 86'400 * kNsPerSec);
}

TEST(ParseTimestampTest, RejectsMalformed) {
  for (const char* bad : {"2023-02-29 00:00:00", "2023-13-01 00:00:00", "2023-11-16 24:00:00",
                          "2023-11-16 18:60:00", "2023-11-16 18:15:46.", "2023-11-16",
                          "2023-11-16 18:15:46.1234567890", "2023/11/16 18:15:46",
                          "2023-11-16 18:15:46.68Z", ""}) {
    EXPECT_FALSE(ParseTimestamp(bad).ok()) << bad;
  }
}

TEST(AzureTraceTest, ReadsCrlfWithoutTrailingNewline) {
  const std::string path = WriteFixture(
      "azure.csv",
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 23:59:59.9999999,374,44\r\n"
      "2023-11-17 00:00:00.0000001,396,109\r\n"
      "2023-11-17 00:00:01.2224670,879,55");
  const auto records = Read(path, TraceFormat::kAzure);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].arrival, 0);
  EXPECT_EQ(records[1].arrival, 200);
  EXPECT_EQ(records[2].arrival, 1'222'467'100);
  EXPECT_EQ(records[2].prompt_len, 879);
  EXPECT_EQ(records[2].output_len, 55);
  EXPECT_TRUE(records[0].prefix_block_hashes.empty());
}

TEST(AzureTraceTest, SortsStablyAndClampsZeroLengths) {
  const std::string path = WriteFixture(
      "unsorted.csv",
      "GeneratedTokens,TIMESTAMP,ContextTokens\n"
      "1,2023-11-16 10:00:02,10\n"
      "2,2023-11-16 10:00:01,20\n"
      "3,2023-11-16 10:00:02,30\n"
      "0,2023-11-16 10:00:01,0\n");
  const auto records = Read(path, TraceFormat::kAzure);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].prompt_len, 20);
  EXPECT_EQ(records[1].prompt_len, 1);  // 0 input tokens => 1
  EXPECT_EQ(records[1].output_len, 1);  // 0 output tokens => 1
  EXPECT_EQ(records[2].prompt_len, 10);
  EXPECT_EQ(records[3].prompt_len, 30);
  EXPECT_EQ(records[1].arrival, 0);
  EXPECT_EQ(records[3].arrival, kNsPerSec);
}

TEST(SplitwiseTraceTest, FindsColumnsByNameInAnyOrder) {
  const std::string path = WriteFixture(
      "vidur.csv",
      "num_decode_tokens,extra,num_prefill_tokens,arrived_at\n"
      "44,x,374,10.5\n"
      "109,y,396,10.75\n"
      "\n"
      "55,z,879,12.0\n");
  const auto records = Read(path, TraceFormat::kSplitwise);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].arrival, 0);
  EXPECT_EQ(records[1].arrival, 250'000'000);
  EXPECT_EQ(records[2].arrival, 1'500'000'000);
  EXPECT_EQ(records[1].prompt_len, 396);
  EXPECT_EQ(records[1].output_len, 109);
}

TEST(MooncakeTraceTest, ReadsPrefixHashesAndMilliseconds) {
  const std::string path = WriteFixture(
      "mooncake.jsonl",
      "{\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 7]}\r\n"
      "\n"
      "{\"timestamp\": 6001, \"input_length\": 100, \"output_length\": 0, \"hash_ids\": [0]}");
  const auto records = Read(path, TraceFormat::kMooncake);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].arrival, 0);
  EXPECT_EQ(records[1].arrival, 3'001 * kNsPerMs);
  EXPECT_EQ(records[0].prefix_block_hashes, (std::vector<uint64_t>{0, 7}));
  EXPECT_EQ(records[1].output_len, 1);
  EXPECT_EQ(TraceBlockTokens(TraceFormat::kMooncake), 512);
  EXPECT_EQ(TraceBlockTokens(TraceFormat::kAzure), 0);
}

struct MalformedCase {
  const char* name;
  TraceFormat format;
  const char* text;
  const char* where;   // expected "file:LINE" suffix, e.g. ":3:"
  const char* column;  // expected column name, or "" for whole-line errors
};

class MalformedTraceTest : public testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedTraceTest, ErrorNamesFileLineAndColumn) {
  const MalformedCase& c = GetParam();
  const std::string path = WriteFixture(std::string(c.name) + ".trace", c.text);
  auto records = ReadTrace(path, c.format);
  ASSERT_FALSE(records.ok()) << c.name;
  const std::string& message = records.status().message();
  EXPECT_EQ(records.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(message.find(path + c.where), std::string::npos) << message;
  if (*c.column != '\0') {
    EXPECT_NE(message.find("column '" + std::string(c.column) + "'"), std::string::npos)
        << message;
  }
}

constexpr char kAzureHeader[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
#define AZURE_ROW1 "2023-11-16 18:15:46.6805900,374,44\n"

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedTraceTest,
    testing::Values(
        MalformedCase{"azure_missing", TraceFormat::kAzure,
                      "TIMESTAMP,ContextTokens,GeneratedTokens\n" AZURE_ROW1
                      "2023-11-16 18:15:47.0,374\n",
                      ":3:", "GeneratedTokens"},
        MalformedCase{"azure_year_9999", TraceFormat::kAzure,  // past int64 ns
                      "TIMESTAMP,ContextTokens,GeneratedTokens\n" AZURE_ROW1
                      "9999-11-16 18:15:47.0,3,5\n",
                      ":3:", "TIMESTAMP"},
        MalformedCase{"mooncake_far_future", TraceFormat::kMooncake,
                      "{\"timestamp\": 9223372036854, \"input_length\": 1, \"output_length\": 1}\n",
                      ":1:", "timestamp"},
        MalformedCase{"splitwise_far_future", TraceFormat::kSplitwise,
                      "arrived_at,num_prefill_tokens,num_decode_tokens\n1e10,5,5\n",
                      ":2:", "arrived_at"},
        MalformedCase{"azure_nan", TraceFormat::kAzure,
                      "TIMESTAMP,ContextTokens,GeneratedTokens\n" AZURE_ROW1
                      "2023-11-16 18:15:47.0,abc,5\n",
                      ":3:", "ContextTokens"},
        MalformedCase{"azure_negative", TraceFormat::kAzure,
                      "TIMESTAMP,ContextTokens,GeneratedTokens\n" AZURE_ROW1 AZURE_ROW1
                      "2023-11-16 18:15:47.0,3,-5",
                      ":4:", "GeneratedTokens"},
        MalformedCase{"azure_time", TraceFormat::kAzure,
                      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-31 18:15:47.0,3,5\n",
                      ":2:", "TIMESTAMP"},
        MalformedCase{"azure_header", TraceFormat::kAzure, "TIMESTAMP,Context,Generated\n",
                      ":1:", "ContextTokens"},
        MalformedCase{"splitwise_time", TraceFormat::kSplitwise,
                      "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,1,2\nsoon,1,2\n",
                      ":3:", "arrived_at"},
        MalformedCase{"splitwise_fraction", TraceFormat::kSplitwise,
                      "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,1.5,2\n",
                      ":2:", "num_prefill_tokens"},
        MalformedCase{"mooncake_json", TraceFormat::kMooncake,
                      "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
                      "{\"timestamp\": 1,\n",
                      ":2:", ""},
        MalformedCase{"mooncake_missing", TraceFormat::kMooncake,
                      "{\"timestamp\": 0, \"output_length\": 1}\n",
                      ":1:", "input_length"},
        MalformedCase{"mooncake_negative", TraceFormat::kMooncake,
                      "\n{\"timestamp\": 0, \"input_length\": 1, \"output_length\": -1}\n",
                      ":2:", "output_length"},
        MalformedCase{"mooncake_text", TraceFormat::kMooncake,
                      "{\"timestamp\": \"now\", \"input_length\": 1, \"output_length\": 1}\n",
                      ":1:", "timestamp"},
        MalformedCase{"mooncake_hash", TraceFormat::kMooncake,
                      "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
                      "\"hash_ids\": [1, -2]}\n",
                      ":1:", "hash_ids"},
        MalformedCase{"mooncake_hash_count", TraceFormat::kMooncake,
                      "{\"timestamp\": 0, \"input_length\": 513, \"output_length\": 1, "
                      "\"hash_ids\": [1]}\n",
                      ":1:", "hash_ids"},
        MalformedCase{"mooncake_hash_not_list", TraceFormat::kMooncake,
                      "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, "
                      "\"hash_ids\": 7}\n",
                      ":1:", "hash_ids"}),
    [](const testing::TestParamInfo<MalformedCase>& info) { return info.param.name; });

// A UTF-8 byte-order mark before the header (spreadsheet exports) is skipped.
TEST(TraceReaderTest, AByteOrderMarkBeforeTheHeaderIsSkipped) {
  const auto records = Read(WriteFixture("bom.csv", "\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\n"
                                                    "2023-11-16 18:15:46.6805900,374,44\n"),
                            TraceFormat::kAzure);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].prompt_len, 374);
}

TEST(TraceReaderTest, SplitCsvLineTrimsBlanksAndQuotes) {
  std::vector<std::string_view> fields;
  SplitCsvLine(" a ,\t\"b c\" ,, d", fields);
  EXPECT_EQ(fields, (std::vector<std::string_view>{"a", "b c", "", "d"}));
  SplitCsvLine("", fields);
  EXPECT_EQ(fields, (std::vector<std::string_view>{""}));
}

TEST(TraceReaderTest, MissingFileIsNotFoundAndEmptyTraceIsAnError) {
  auto missing = ReadTrace("/nonexistent/servelab/trace.csv", TraceFormat::kAzure);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/servelab/trace.csv"), std::string::npos);

  auto empty = ReadTrace(WriteFixture("header_only.csv", kAzureHeader), TraceFormat::kAzure);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no records"), std::string::npos);
}

TEST(SharedTraceTest, AzureConversation) {
  const std::string path = SharedTrace("azure2023_conv.csv");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  const auto records = Read(path, TraceFormat::kAzure);
  ASSERT_EQ(records.size(), 19'366u);
  double input = 0, output = 0;
  for (const TraceRecord& r : records) {
    input += r.prompt_len;
    output += r.output_len;
  }
  EXPECT_NEAR(input / records.size(), 1154.7, 0.05);
  EXPECT_NEAR(output / records.size(), 211.1, 0.05);
  EXPECT_EQ(records.front().arrival, 0);
  // 18:15:46.6805900 -> 19:14:08.4025270 (the README's ~3502 s).
  EXPECT_EQ(records.back().arrival, 3'501'721'937'000);
}

TEST(SharedTraceTest, MooncakeConversation) {
  const std::string path = SharedTrace("mooncake_conversation_trace.jsonl");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  const auto records = Read(path, TraceFormat::kMooncake);
  ASSERT_EQ(records.size(), 12'031u);
  for (const TraceRecord& r : records) {
    const int32_t blocks = (r.prompt_len + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens;
    ASSERT_EQ(r.prefix_block_hashes.size(), static_cast<size_t>(blocks));
    ASSERT_EQ(r.prefix_block_hashes.front(), 0u);  // README: every request starts with id 0
  }
}

}  // namespace
}  // namespace servelab
