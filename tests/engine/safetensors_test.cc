// Writer -> reader round trips: F32 / F16 / BF16 values and bit patterns, the layout the
// writer promises (sorted keys, 8-byte aligned data, no gaps), sharded checkpoints.
#include "engine/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/safetensors_writer.h"
#include "tests/engine/test_files.h"

namespace servelab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;

// Values exactly representable in F16 and BF16 (8 significant bits, small exponents).
const std::vector<float> kExact = {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 96.0f, -0.0078125f,
                                   std::numeric_limits<float>::infinity()};

TEST(SafetensorsTest, RoundTripsEachDtypeExactly) {
  TempDir dir;
  const std::vector<TensorSpec> specs = {{"w.f32", DType::kFp32, {2, 4}},
                                         {"w.f16", DType::kFp16, {4, 2}},
                                         {"w.bf16", DType::kBf16, {8}},
                                         {"scalar", DType::kFp32, {}},
                                         {"empty", DType::kBf16, {0, 3}}};
  std::vector<float> f32 = kExact;
  f32[1] = 1e-40f;  // a float32 subnormal survives F32 untouched
  const std::vector<std::vector<float>> values = {f32, kExact, kExact, {3.25f}, {}};
  ASSERT_TRUE(WriteSafetensors(dir / "m.safetensors", specs, values, {{"format", "pt"}}).ok());

  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir / "m.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->tensors().size(), 5u);
  EXPECT_EQ(file->tensors()[0].name, "empty");  // sorted by name
  EXPECT_EQ(file->metadata().at("format"), "pt");
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorView* t = file->Find(specs[i].name);
    ASSERT_NE(t, nullptr) << specs[i].name;
    EXPECT_EQ(t->dtype, specs[i].dtype);
    EXPECT_EQ(t->shape, specs[i].shape);
    EXPECT_EQ(t->bytes, specs[i].Bytes());
    const std::vector<float> back = ToFloat32(*t);
    ASSERT_EQ(back.size(), values[i].size());
    for (size_t k = 0; k < back.size(); ++k) {
      EXPECT_EQ(std::bit_cast<uint32_t>(back[k]), std::bit_cast<uint32_t>(values[i][k]))
          << specs[i].name << "[" << k << "]";
    }
  }
  EXPECT_EQ(file->FileOf(*file->Find("scalar")), dir / "m.safetensors");
}

TEST(SafetensorsTest, KnownBitPatternsDecode) {
  TempDir dir;
  const uint16_t half[] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x7e00};
  const uint16_t bf16[] = {0x3f80, 0x4049, 0xc2f7, 0x0001, 0xff80, 0x7fc0};
  const std::vector<TensorSpec> specs = {{"h", DType::kFp16, {6}}, {"b", DType::kBf16, {6}}};
  ASSERT_TRUE(WriteSafetensors(dir / "p.safetensors", specs, [&](size_t i, std::span<std::byte> out) {
                std::memcpy(out.data(), specs[i].name == "h" ? half : bf16, out.size());
              }).ok());
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir / "p.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().message();
  const std::vector<float> h = ToFloat32(*file->Find("h"));
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(h[3], 65504.0f);
  EXPECT_EQ(h[4], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(h[5]));
  const std::vector<float> b = ToFloat32(*file->Find("b"));
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], 3.140625f);
  EXPECT_EQ(b[2], -123.5f);
  EXPECT_EQ(b[3], std::ldexp(1.0f, -133));
  EXPECT_EQ(b[4], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(b[5]));
}

TEST(SafetensorsTest, WriterLayoutIsAlignedSortedAndDeterministic) {
  TempDir dir;
  // An odd-sized F16 tensor before an F32 one: the writer puts wide elements first.
  const std::vector<TensorSpec> specs = {{"z.half", DType::kFp16, {3}},
                                         {"a.float", DType::kFp32, {5}}};
  const std::vector<std::vector<float>> values = {{1, 2, 3}, {1, 2, 3, 4, 5}};
  ASSERT_TRUE(WriteSafetensors(dir / "a.safetensors", specs, values).ok());
  ASSERT_TRUE(WriteSafetensors(dir / "b.safetensors", specs, values).ok());
  const std::string bytes = ReadBytes(dir / "a.safetensors");
  EXPECT_EQ(bytes, ReadBytes(dir / "b.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "a.safetensors.tmp"));

  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 5 * 4 + 3 * 2);  // no gaps, nothing after
  const std::string header = bytes.substr(8, n);
  const std::string json =
      R"({"a.float":{"data_offsets":[0,20],"dtype":"F32","shape":[5]},)"
      R"("z.half":{"data_offsets":[20,26],"dtype":"F16","shape":[3]}})";
  ASSERT_GE(n, json.size());
  EXPECT_LT(n - json.size(), 8u);
  EXPECT_EQ(header, json + std::string(n - json.size(), ' '));  // padded with spaces
  EXPECT_EQ(SafetensorsHeader(specs), bytes.substr(0, 8 + n));
}

TEST(SafetensorsTest, GetChecksNameAndShape) {
  TempDir dir;
  const std::vector<TensorSpec> specs = {{"w", DType::kFp32, {2, 3}}};
  const std::vector<std::vector<float>> values = {{1, 2, 3, 4, 5, 6}};
  ASSERT_TRUE(WriteSafetensors(dir / "g.safetensors", specs, values).ok());
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir / "g.safetensors");
  ASSERT_TRUE(file.ok());
  const int64_t right[] = {2, 3}, wrong[] = {3, 2};
  EXPECT_TRUE(file->Get("w", right).ok());
  StatusOr<const TensorView*> bad = file->Get("w", wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("g.safetensors: tensor 'w' has shape [2, 3], expected [3, 2]"));
  StatusOr<const TensorView*> missing = file->Get("nope", right);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("g.safetensors: no tensor 'nope'"));
}

TEST(SafetensorsTest, ShardedIndexJoinsShards) {
  TempDir dir;
  const std::vector<TensorSpec> one = {{"a", DType::kBf16, {2}}, {"b", DType::kFp32, {1}}};
  const std::vector<TensorSpec> two = {{"c", DType::kFp16, {3}}, {"unlisted", DType::kFp32, {1}}};
  const std::vector<std::vector<float>> v1 = {{1, 2}, {3}}, v2 = {{4, 5, 6}, {7}};
  ASSERT_TRUE(WriteSafetensors(dir / "s-1.safetensors", one, v1).ok());
  ASSERT_TRUE(WriteSafetensors(dir / "s-2.safetensors", two, v2).ok());
  testing::WriteBytes(dir / "model.safetensors.index.json",
                      R"({"metadata": {"total_size": 20}, "weight_map": {"a": "s-1.safetensors",
                          "b": "s-1.safetensors", "c": "s-2.safetensors"}})");
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path());  // the folder
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<std::string> names;
  for (const TensorView& t : file->tensors()) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("a", "b", "c"));  // only what the index lists
  EXPECT_EQ(file->files().size(), 3u);
  EXPECT_EQ(file->FileOf(*file->Find("c")), dir / "s-2.safetensors");
  EXPECT_EQ(file->FileOf(*file->Find("a")), dir / "s-1.safetensors");
  EXPECT_THAT(ToFloat32(*file->Find("c")), ElementsAre(4.0f, 5.0f, 6.0f));
  EXPECT_THAT(ToFloat32(*file->Find("a")), ElementsAre(1.0f, 2.0f));
}

TEST(SafetensorsTest, FolderWithoutWeightsIsNotFound) {
  TempDir dir;
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("neither model.safetensors"));
  file = SafetensorsFile::Open(dir / "absent.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("absent.safetensors: cannot open"));
}

}  // namespace
}  // namespace servelab
