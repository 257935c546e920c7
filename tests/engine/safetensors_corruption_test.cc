// Every way a safetensors file or index can be broken is a clear error naming the file
// and, where there is one, the tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/safetensors.h"
#include "engine/safetensors_writer.h"
#include "tests/engine/test_files.h"

namespace servelab {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::SafetensorsBytes;
using testing::TempDir;
using testing::WriteBytes;

// Opens `bytes` written as bad.safetensors; returns the error message ("" if it opened).
std::string OpenError(const TempDir& dir, const std::string& bytes) {
  WriteBytes(dir / "bad.safetensors", bytes);
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir / "bad.safetensors");
  if (file.ok()) return "";
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
  return file.status().message();
}

std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(SafetensorsCorruptionTest, HandMadeValidFileOpens) {
  TempDir dir;
  const std::string header = std::string("{") + Entry("a", "F32", "[2]", "[0,8]") + "," +
                             Entry("b", "F16", "[2,1]", "[8,12]") + "}   ";
  EXPECT_EQ(OpenError(dir, SafetensorsBytes(header, std::string(12, '\0'))), "");
}

TEST(SafetensorsCorruptionTest, TruncatedFileNamesTheTensorCut) {
  TempDir dir;
  const std::vector<TensorSpec> specs = {{"first", DType::kFp32, {4}},
                                         {"last", DType::kFp32, {4}}};
  const std::vector<std::vector<float>> values = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  ASSERT_TRUE(WriteSafetensors(dir / "w.safetensors", specs, values).ok());
  const std::string whole = testing::ReadBytes(dir / "w.safetensors");
  EXPECT_THAT(OpenError(dir, whole.substr(0, whole.size() - 3)),
              AllOf(HasSubstr("bad.safetensors: tensor 'last'"), HasSubstr("truncated")));
  // Cut inside the header: the header length now runs past the end.
  EXPECT_THAT(OpenError(dir, whole.substr(0, 20)),
              AllOf(HasSubstr("bad.safetensors: header length"), HasSubstr("past the end")));
  EXPECT_THAT(OpenError(dir, whole.substr(0, 5)),
              HasSubstr("bad.safetensors: file is 5 bytes, too short"));
  EXPECT_THAT(OpenError(dir, ""), HasSubstr("bad.safetensors: file is 0 bytes"));
}

TEST(SafetensorsCorruptionTest, HeaderLengthPastEndOfFile) {
  TempDir dir;
  std::string bytes = SafetensorsBytes("{}", "");
  bytes[0] = static_cast<char>(0xff);
  bytes[7] = static_cast<char>(0x7f);  // ~9.2e18
  EXPECT_THAT(OpenError(dir, bytes), HasSubstr("bad.safetensors: header length"));
}

TEST(SafetensorsCorruptionTest, HeaderNotJsonOrNotObject) {
  TempDir dir;
  EXPECT_THAT(OpenError(dir, SafetensorsBytes("{\"a\": {\"dtype\": ", "")),
              HasSubstr("bad.safetensors: header is not valid JSON"));
  EXPECT_THAT(OpenError(dir, SafetensorsBytes("[1,2]", "")),
              HasSubstr("bad.safetensors: header must be a JSON object"));
}

TEST(SafetensorsCorruptionTest, EachBadEntryNamesItsTensor) {
  TempDir dir;
  const struct {
    std::string entry;
    std::string expected;
  } cases[] = {
      {Entry("w.q", "I64", "[1]", "[0,8]"),
       "tensor 'w.q': unsupported dtype 'I64' (supported: F32, F16, BF16)"},
      {Entry("w.q", "F8_E4M3", "[8]", "[0,8]"), "tensor 'w.q': unsupported dtype 'F8_E4M3'"},
      {Entry("w.q", "Q4", "[1]", "[0,8]"), "tensor 'w.q': unsupported dtype 'Q4'"},
      {Entry("w.q", "F32", "[3]", "[0,8]"),
       "tensor 'w.q': data_offsets [0, 8) hold 8 bytes but shape [3] of F32 needs 12"},
      {Entry("w.q", "BF16", "[2,3]", "[0,16]"), "tensor 'w.q': data_offsets [0, 16) hold 16 bytes"},
      {Entry("w.q", "F32", "[-2]", "[0,8]"),
       "tensor 'w.q': 'shape' must be a list of non-negative integers, got [-2]"},
      {Entry("w.q", "F32", "[1.5]", "[0,8]"), "tensor 'w.q': 'shape' must be a list"},
      {Entry("w.q", "F32", "2", "[0,8]"), "tensor 'w.q': 'shape' must be a list"},
      {Entry("w.q", "F32", "[2]", "[8,0]"), "tensor 'w.q': 'data_offsets' must be [begin, end]"},
      {Entry("w.q", "F32", "[2]", "[0]"), "tensor 'w.q': 'data_offsets' must be [begin, end]"},
      {Entry("w.q", "F32", "[4]", "[0,16]"),
       "tensor 'w.q': data_offsets end 16 is past the end of the data section (8 bytes"},
      {Entry("w.q", "F32", "[2]", "[8,16]"), "tensor 'w.q': data_offsets end 16 is past the end"},
      {Entry("w.q", "F32", "[4294967296,4294967296,4294967296]", "[0,8]"),
       "tensor 'w.q': shape [4294967296,4294967296,4294967296] is implausibly large"},
      {"\"w.q\":{\"shape\":[2],\"data_offsets\":[0,8]}", "tensor 'w.q': missing 'dtype'"},
      {"\"w.q\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}", "tensor 'w.q': missing 'shape'"},
      {"\"w.q\":{\"dtype\":\"F32\",\"shape\":[2]}", "tensor 'w.q': missing 'data_offsets'"},
      {"\"w.q\":[1,2]", "tensor 'w.q': expected a mapping"},
      {"\"__metadata__\":{\"format\":1}", "'__metadata__' key 'format' must be a string"},
  };
  for (const auto& c : cases) {
    const std::string message = OpenError(dir, SafetensorsBytes(std::string("{") + c.entry + "}", std::string(8, '\0')));
    EXPECT_THAT(message, HasSubstr("bad.safetensors: " + c.expected)) << c.entry;
  }
}

TEST(SafetensorsCorruptionTest, OverlappingTensorsAreNamed) {
  TempDir dir;
  const std::string header = std::string("{") + Entry("a", "F32", "[3]", "[0,12]") + "," +
                             Entry("b", "F32", "[2]", "[8,16]") + "," +
                             Entry("empty", "F32", "[0]", "[4,4]") + "}";
  EXPECT_THAT(OpenError(dir, SafetensorsBytes(header, std::string(16, '\0'))),
              HasSubstr("bad.safetensors: tensors 'a' [0, 12) and 'b' [8, 16) overlap"));
}

class ShardedCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<TensorSpec> specs = {{"x", DType::kFp32, {2}}};
    const std::vector<std::vector<float>> values = {{1, 2}};
    ASSERT_TRUE(WriteSafetensors(dir_ / "s-1.safetensors", specs, values).ok());
  }
  Status OpenIndex(const std::string& index) {
    WriteBytes(dir_ / "model.safetensors.index.json", index);
    return SafetensorsFile::Open(dir_.path()).status();
  }
  TempDir dir_;
};

TEST_F(ShardedCorruptionTest, MissingShardNamesFileAndTensor) {
  const Status s = OpenIndex(R"({"weight_map": {"x": "s-1.safetensors", "y": "s-2.safetensors"}})");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("model.safetensors.index.json: weight_map: tensor 'y'"),
                                 HasSubstr("shard 's-2.safetensors'"),
                                 HasSubstr("cannot be opened")));
}

TEST_F(ShardedCorruptionTest, TensorAbsentFromItsShard) {
  EXPECT_THAT(OpenIndex(R"({"weight_map": {"x": "s-1.safetensors", "z": "s-1.safetensors"}})").message(),
              AllOf(HasSubstr("tensor 'z' is not in shard"), HasSubstr("s-1.safetensors")));
}

TEST_F(ShardedCorruptionTest, CorruptShardNamesIndexShardAndTensor) {
  WriteBytes(dir_ / "s-2.safetensors",
             SafetensorsBytes(std::string("{") + Entry("y", "F32", "[4]", "[0,16]") + "}", std::string(4, '\0')));
  const Status s = OpenIndex(R"({"weight_map": {"x": "s-1.safetensors", "y": "s-2.safetensors"}})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("tensor 'y' is in shard 's-2.safetensors', which is invalid"),
                                 HasSubstr("s-2.safetensors: tensor 'y': data_offsets end 16")));
}

TEST_F(ShardedCorruptionTest, MalformedIndex) {
  EXPECT_THAT(OpenIndex("{\"weight_map\": ").message(),
              HasSubstr("model.safetensors.index.json: not valid JSON"));
  EXPECT_THAT(OpenIndex(R"({"metadata": {}})").message(),
              HasSubstr("model.safetensors.index.json: key 'weight_map'"));
  EXPECT_THAT(OpenIndex(R"({"weight_map": {"x": 3}})").message(),
              HasSubstr("weight_map: tensor 'x': expected a shard file name"));
  EXPECT_THAT(OpenIndex(R"({"weight_map": {"x": "../s-1.safetensors"}})").message(),
              HasSubstr("tensor 'x': shard '../s-1.safetensors' must be a file name"));
  EXPECT_THAT(OpenIndex(R"({"weight_map": {}})").message(), HasSubstr("names no tensors"));
}

}  // namespace
}  // namespace servelab
