// Safetensors reader/writer and atomic writes: round trips, sharding, and every malformed-file case
// the reader promises to reject with a one-line dspark::Error naming the file.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "util/error.h"

namespace dspark::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh directory per test, removed afterwards, unique across processes and tests.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dspark_io_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter++) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file from a raw header string (not necessarily valid JSON) and data buffer.
std::string craft(const std::string& header, const std::string& data, uint64_t header_len) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header_len >> (8 * i));
  return bytes + header + data;
}
std::string craft(const std::string& header, const std::string& data) {
  return craft(header, data, header.size());
}

// Runs `action`, expects dspark::Error whose one-line message contains every one of `parts`.
void expect_error(const std::function<void()>& action, std::initializer_list<std::string> parts) {
  try {
    action();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "multi-line message: " << message;
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos)
        << "message '" << message << "' lacks '" << part << "'";
    return;
  }
  ADD_FAILURE() << "expected dspark::Error";
}

std::string view_bytes(const TensorView& view) {
  return std::string(static_cast<const char*>(view.data), view.nbytes);
}

template <typename T>
TensorToWrite to_write(const std::string& name, DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  return TensorToWrite{name, dtype, std::move(shape), values.data(), values.size() * sizeof(T)};
}

// ---- round trips --------------------------------------------------------------------------------

class SafetensorsTest : public TempDirTest {};

TEST_F(SafetensorsTest, RoundTripF32BF16F16BytesEqual) {
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-8f, -7.0f};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xbf80, 0x7f80, 0x0001, 0xffff, 0x4049, 0x0000, 0x8000};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff};
  const std::string file = path("model.safetensors");
  write_safetensors(file, {to_write("w.f32", DType::F32, {2, 3}, f32),
                           to_write("w.bf16", DType::BF16, {2, 2, 2}, bf16),
                           to_write("w.f16", DType::F16, {3}, f16)});

  SafetensorsFile st = SafetensorsFile::open(file);
  ASSERT_EQ(st.tensors().size(), 3u);
  const TensorView& a = st.tensors().at("w.f32");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.numel(), 6);
  EXPECT_EQ(a.file, file);
  EXPECT_EQ(0, std::memcmp(a.data, f32.data(), f32.size() * 4));
  const TensorView& b = st.tensors().at("w.bf16");
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(view_bytes(b), std::string(reinterpret_cast<const char*>(bf16.data()), bf16.size() * 2));
  const TensorView& c = st.tensors().at("w.f16");
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_EQ(view_bytes(c), std::string(reinterpret_cast<const char*>(f16.data()), f16.size() * 2));
  EXPECT_TRUE(st.metadata().empty());
}

TEST_F(SafetensorsTest, AllDtypesRoundTrip) {
  const std::vector<uint8_t> bytes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::vector<TensorToWrite> tensors;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16,
                      DType::I8, DType::U8, DType::BOOL}) {
    const int64_t n = static_cast<int64_t>(bytes.size() / dtype_size(dtype));
    tensors.push_back({std::string("t_") + dtype_name(dtype), dtype, {n}, bytes.data(), bytes.size()});
    EXPECT_EQ(dtype_from_name(dtype_name(dtype), "test"), dtype);
  }
  write_safetensors(path("all.safetensors"), tensors);
  SafetensorsFile st = SafetensorsFile::open(path("all.safetensors"));
  for (const TensorToWrite& t : tensors) {
    const TensorView& v = st.tensors().at(t.name);
    EXPECT_EQ(v.dtype, t.dtype) << t.name;
    EXPECT_EQ(v.shape, t.shape) << t.name;
    EXPECT_EQ(view_bytes(v), std::string(bytes.begin(), bytes.end())) << t.name;
  }
}

TEST_F(SafetensorsTest, FileLayoutIsPaddedSortedAndContiguous) {
  const std::vector<uint8_t> b3 = {1, 2, 3}, b5 = {4, 5, 6, 7, 8};
  write_safetensors(path("x.safetensors"), {to_write("zeta", DType::U8, {5}, b5), to_write("alpha", DType::U8, {3}, b3)});
  const std::string bytes = read_bytes(path("x.safetensors"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header_len % 8, 0u);
  const std::string header = bytes.substr(8, header_len);
  const json parsed = json::parse(header);
  EXPECT_EQ(parsed["alpha"]["data_offsets"], json::array({0, 3}));
  EXPECT_EQ(parsed["zeta"]["data_offsets"], json::array({3, 8}));
  EXPECT_EQ(bytes.size(), 8 + header_len + 8);
  EXPECT_EQ(bytes.substr(8 + header_len), std::string("\1\2\3\4\5\6\7\10"));
  // Padding is spaces after the JSON.
  EXPECT_EQ(header.find_last_not_of(' '), parsed.dump().size() - 1);
}

TEST_F(SafetensorsTest, ZeroSizeAndScalarTensors) {
  const std::vector<float> scalar = {42.0f};
  write_safetensors(path("z.safetensors"),
                    {TensorToWrite{"empty", DType::F32, {0, 4}, nullptr, 0}, to_write("scalar", DType::F32, {}, scalar),
                     TensorToWrite{"empty2", DType::BF16, {3, 0}, nullptr, 0}});
  SafetensorsFile st = SafetensorsFile::open(path("z.safetensors"));
  EXPECT_EQ(st.tensors().at("empty").nbytes, 0u);
  EXPECT_EQ(st.tensors().at("empty").numel(), 0);
  EXPECT_EQ(st.tensors().at("empty2").shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(st.tensors().at("scalar").numel(), 1);
  EXPECT_TRUE(st.tensors().at("scalar").shape.empty());
  EXPECT_EQ(*static_cast<const float*>(st.tensors().at("scalar").data), 42.0f);
}

TEST_F(SafetensorsTest, EmptyFileWithNoTensors) {
  write_safetensors(path("none.safetensors"), {});
  EXPECT_TRUE(SafetensorsFile::open(path("none.safetensors")).tensors().empty());
}

TEST_F(SafetensorsTest, MetadataRoundTrip) {
  const std::vector<float> v = {1.0f};
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "hello \"world\"\n"}};
  write_safetensors(path("m.safetensors"), {to_write("v", DType::F32, {1}, v)}, metadata);
  SafetensorsFile st = SafetensorsFile::open(path("m.safetensors"));
  EXPECT_EQ(st.metadata(), metadata);
  EXPECT_EQ(st.tensors().size(), 1u);  // __metadata__ is not a tensor
  EXPECT_EQ(TensorStore::open(path("m.safetensors")).metadata(), metadata);
}

TEST_F(SafetensorsTest, ViewOutlivesFileObject) {
  const std::vector<float> v = {3.0f, 4.0f};
  write_safetensors(path("v.safetensors"), {to_write("v", DType::F32, {2}, v)});
  TensorView view;
  { view = SafetensorsFile::open(path("v.safetensors")).tensors().at("v"); }
  fs::remove(path("v.safetensors"));  // the mapping keeps the data alive
  EXPECT_EQ(static_cast<const float*>(view.data)[1], 4.0f);
}

TEST_F(SafetensorsTest, WriterRejectsShapeSizeMismatch) {
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  const std::string file = path("bad.safetensors");
  expect_error([&] { write_safetensors(file, {to_write("v", DType::F32, {2, 2}, v)}); }, {file, "mismatch", "'v'"});
  expect_error([&] { write_safetensors(file, {to_write("v", DType::F32, {3}, v), to_write("v", DType::F32, {3}, v)}); },
               {file, "duplicate"});
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(SafetensorsTest, DirSingleFileWhenItFits) {
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  write_safetensors_dir(dir_.string(), {to_write("a", DType::F32, {4}, a), to_write("b", DType::F32, {2}, b)},
                        {{"k", "v"}}, 1024);
  EXPECT_TRUE(fs::exists(path("model.safetensors")));
  EXPECT_FALSE(fs::exists(path("model.safetensors.index.json")));
  TensorStore store = TensorStore::open(dir_.string());
  EXPECT_EQ(store.location(), dir_.string());
  EXPECT_EQ(store.tensors().size(), 2u);
  EXPECT_EQ(view_bytes(store.get("b")), std::string(reinterpret_cast<const char*>(b.data()), 8));
  EXPECT_EQ(store.metadata().at("k"), "v");
}

TEST_F(SafetensorsTest, ShardedRoundTripWithIndex) {
  // 5 tensors of 16 bytes, limit 40 bytes -> 2 per shard -> 3 shards in name order.
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 5; ++i) values.push_back({float(i), float(i) + 0.5f, -float(i), 1.0f / (i + 1)});
  for (int i = 0; i < 5; ++i) tensors.push_back(to_write("layer." + std::to_string(i), DType::F32, {2, 2}, values[i]));
  write_safetensors_dir(dir_.string(), tensors, {{"format", "pt"}}, 40);

  EXPECT_FALSE(fs::exists(path("model.safetensors")));
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(fs::exists(path(shard))) << shard;
  const json index = json::parse(read_bytes(path("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], 80);
  EXPECT_EQ(index["weight_map"]["layer.0"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.1"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.2"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.4"], "model-00003-of-00003.safetensors");

  for (const std::string& where : {dir_.string(), path("model.safetensors.index.json")}) {
    TensorStore store = TensorStore::open(where);
    ASSERT_EQ(store.tensors().size(), 5u) << where;
    for (int i = 0; i < 5; ++i) {
      const TensorView& v = store.get("layer." + std::to_string(i));
      EXPECT_EQ(0, std::memcmp(v.data, values[i].data(), 16)) << where << " " << i;
    }
    EXPECT_EQ(store.get("layer.3").file, path("model-00002-of-00003.safetensors"));
    EXPECT_EQ(store.metadata().at("format"), "pt");
  }
}

TEST_F(SafetensorsTest, OversizedTensorGetsItsOwnShard) {
  const std::vector<uint8_t> big(100, 7), small(10, 1);
  write_safetensors_dir(dir_.string(), {to_write("a", DType::U8, {10}, small), to_write("b", DType::U8, {100}, big),
                                        to_write("c", DType::U8, {10}, small)}, {}, 50);
  const json index = json::parse(read_bytes(path("model.safetensors.index.json")));
  EXPECT_EQ(index["weight_map"]["a"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["b"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["c"], "model-00003-of-00003.safetensors");
  EXPECT_EQ(TensorStore::open(dir_.string()).get("b").nbytes, 100u);
}

TEST_F(SafetensorsTest, RewriteReplacesStaleFiles) {
  const std::vector<uint8_t> bytes(16, 3);
  std::vector<TensorToWrite> tensors;
  for (const char* name : {"a", "b", "c", "d"}) tensors.push_back(to_write(name, DType::U8, {16}, bytes));
  write_safetensors_dir(dir_.string(), tensors, {}, 16);  // 4 shards
  EXPECT_TRUE(fs::exists(path("model-00004-of-00004.safetensors")));

  write_safetensors_dir(dir_.string(), tensors, {}, 32);  // 2 shards: the 4-shard set is stale
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                          "model.safetensors.index.json"}));

  write_safetensors_dir(dir_.string(), tensors);  // single file: index and shards are stale
  files.clear();
  for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"model.safetensors"}));

  write_safetensors_dir(dir_.string(), tensors, {}, 32);  // back to sharded: the single file goes
  EXPECT_FALSE(fs::exists(path("model.safetensors")));
  EXPECT_EQ(TensorStore::open(dir_.string()).tensors().size(), 4u);
}

TEST_F(SafetensorsTest, CustomBasename) {
  const std::vector<uint8_t> bytes(8, 1);
  write_safetensors_dir(path("out"), {to_write("a", DType::U8, {8}, bytes), to_write("b", DType::U8, {8}, bytes)},
                        {}, 8, "draft");
  EXPECT_TRUE(fs::exists(path("out/draft-00001-of-00002.safetensors")));
  EXPECT_TRUE(fs::exists(path("out/draft.safetensors.index.json")));
  EXPECT_EQ(TensorStore::open(path("out"), "draft").tensors().size(), 2u);
  EXPECT_EQ(TensorStore::open(path("out/draft.safetensors.index.json")).tensors().size(), 2u);
  expect_error([&] { TensorStore::open(path("out")); }, {path("out"), "model.safetensors"});
}

// ---- store errors -------------------------------------------------------------------------------

class SafetensorsStoreTest : public TempDirTest {};

TEST_F(SafetensorsStoreTest, EmptyDirectory) {
  expect_error([&] { TensorStore::open(dir_.string()); }, {dir_.string(), "no model.safetensors"});
}

TEST_F(SafetensorsStoreTest, MissingPath) {
  expect_error([&] { TensorStore::open(path("nope")); }, {path("nope"), "no such file"});
}

TEST_F(SafetensorsStoreTest, MissingTensor) {
  const std::vector<float> v = {1.0f};
  write_safetensors(path("model.safetensors"), {to_write("v", DType::F32, {1}, v)});
  TensorStore store = TensorStore::open(dir_.string());
  EXPECT_TRUE(store.contains("v"));
  EXPECT_FALSE(store.contains("w"));
  expect_error([&] { store.get("w"); }, {"missing tensor w", dir_.string()});
}

TEST_F(SafetensorsStoreTest, MissingShard) {
  const std::vector<float> v = {1.0f};
  write_safetensors(path("model-00001-of-00002.safetensors"), {to_write("a", DType::F32, {1}, v)});
  write_bytes(path("model.safetensors.index.json"),
              R"({"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                  "b": "model-00002-of-00002.safetensors"}})");
  expect_error([&] { TensorStore::open(dir_.string()); },
               {"missing shard", "model-00002-of-00002.safetensors", "model.safetensors.index.json"});
}

TEST_F(SafetensorsStoreTest, TensorNotInItsShard) {
  const std::vector<float> v = {1.0f};
  write_safetensors(path("model-00001-of-00001.safetensors"), {to_write("a", DType::F32, {1}, v)});
  write_bytes(path("model.safetensors.index.json"),
              R"({"weight_map": {"a": "model-00001-of-00001.safetensors", "ghost": "model-00001-of-00001.safetensors"}})");
  expect_error([&] { TensorStore::open(dir_.string()); },
               {"'ghost'", "model.safetensors.index.json", "model-00001-of-00001.safetensors", "not in shard"});
}

TEST_F(SafetensorsStoreTest, BadIndex) {
  const std::string index = path("model.safetensors.index.json");
  write_bytes(index, "{not json");
  expect_error([&] { TensorStore::open(dir_.string()); }, {index, "bad JSON"});
  write_bytes(index, R"({"metadata": {}})");
  expect_error([&] { TensorStore::open(index); }, {index, "weight_map"});
  write_bytes(index, R"({"weight_map": {"a": 3}})");
  expect_error([&] { TensorStore::open(index); }, {index, "'a'", "not a string"});
}

// ---- malformed files ----------------------------------------------------------------------------

class SafetensorsMalformedTest : public TempDirTest {
 protected:
  // Writes `bytes` to a file and expects opening it (directly and through TensorStore) to fail
  // with a message naming the file and containing `keyword`.
  void expect_rejected(const std::string& bytes, const std::string& keyword) {
    const std::string file = path("bad.safetensors");
    write_bytes(file, bytes);
    expect_error([&] { SafetensorsFile::open(file); }, {file, keyword});
    expect_error([&] { TensorStore::open(file); }, {file, keyword});
  }
};

TEST_F(SafetensorsMalformedTest, EmptyFile) { expect_rejected("", "truncated"); }

TEST_F(SafetensorsMalformedTest, ShorterThanHeaderLength) { expect_rejected(std::string("\x10\0\0", 3), "truncated"); }

TEST_F(SafetensorsMalformedTest, HeaderLengthPastEndOfFile) {
  expect_rejected(craft("{}", "", 3), "past end of file");
  expect_rejected(craft("{}", "", ~uint64_t{0}), "past end of file");
}

TEST_F(SafetensorsMalformedTest, BadJson) {
  expect_rejected(craft("{\"a\": ", ""), "bad JSON");
  expect_rejected(craft("\n{\n", ""), "bad JSON");  // and the message is still one line
}

TEST_F(SafetensorsMalformedTest, HeaderNotAnObject) {
  expect_rejected(craft("[1, 2]", ""), "not a JSON object");
  expect_rejected(craft("\"x\"     ", ""), "not a JSON object");
}

TEST_F(SafetensorsMalformedTest, TensorEntryNotAnObject) {
  expect_rejected(craft(R"({"t": 5})", ""), "not a JSON object");
}

TEST_F(SafetensorsMalformedTest, UnknownDtype) {
  expect_rejected(craft(R"({"t": {"dtype": "F8_E9", "shape": [1], "data_offsets": [0, 1]}})", "x"), "unknown dtype");
  expect_rejected(craft(R"({"t": {"dtype": 4, "shape": [1], "data_offsets": [0, 1]}})", "x"), "dtype");
  expect_rejected(craft(R"({"t": {"shape": [1], "data_offsets": [0, 1]}})", "x"), "dtype");
}

TEST_F(SafetensorsMalformedTest, NegativeShape) {
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})", ""), "shape");
}

TEST_F(SafetensorsMalformedTest, ShapeNotInts) {
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]}})", "x"), "shape");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]}})", "xx"), "shape");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": 2, "data_offsets": [0, 2]}})", "xx"), "shape");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "data_offsets": [0, 2]}})", "xx"), "shape");
}

TEST_F(SafetensorsMalformedTest, BadDataOffsets) {
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", "x"), "data_offsets");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}})", "xx"), "data_offsets");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [2, 1]}})", "xx"), "begin <= end");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", "x"), "data_offsets");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": ["0", 1]}})", "x"), "data_offsets");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [1]}})", "x"), "data_offsets");
}

TEST_F(SafetensorsMalformedTest, OffsetsOutOfRange) {
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", "xyz"), "out of range");
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [0], "data_offsets": [9, 9]}})", "xyz"), "out of range");
}

TEST_F(SafetensorsMalformedTest, OverlappingTensors) {
  expect_rejected(craft(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                            "b": {"dtype": "U8", "shape": [4], "data_offsets": [3, 7]}})", "12345678"), "overlap");
  // Containment: b sits inside a, and c after both must still be compared with a's end.
  expect_rejected(craft(R"({"a": {"dtype": "U8", "shape": [6], "data_offsets": [0, 6]},
                            "b": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]},
                            "c": {"dtype": "U8", "shape": [2], "data_offsets": [5, 7]}})", "12345678"), "overlap");
}

TEST_F(SafetensorsMalformedTest, EmptyTensorsDoNotOverlap) {
  const std::string file = path("ok.safetensors");
  write_bytes(file, craft(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                              "e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},
                              "f": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]}})", "1234"));
  EXPECT_EQ(SafetensorsFile::open(file).tensors().size(), 3u);
}

TEST_F(SafetensorsMalformedTest, ShapeSizeMismatch) {
  expect_rejected(craft(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", "1234"), "mismatch");
  expect_rejected(craft(R"({"t": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", "12345678"), "mismatch");
  // A product that wraps around 64 bits must not pass as small.
  expect_rejected(craft(R"({"t": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", ""),
                  "mismatch");
}

TEST_F(SafetensorsMalformedTest, BadMetadata) {
  expect_rejected(craft(R"({"__metadata__": {"n": 1}})", ""), "__metadata__");
  expect_rejected(craft(R"({"__metadata__": ["a"]})", ""), "__metadata__");
}

TEST_F(SafetensorsMalformedTest, NotARegularFile) {
  expect_error([&] { SafetensorsFile::open(dir_.string()); }, {dir_.string(), "not a regular file"});
  expect_error([&] { SafetensorsFile::open(path("absent.safetensors")); }, {path("absent.safetensors"), "cannot open"});
}

// ---- atomic writes ------------------------------------------------------------------------------

class AtomicFileTest : public TempDirTest {
 protected:
  std::set<std::string> listing() const {
    std::set<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename().string());
    return files;
  }
};

TEST_F(AtomicFileTest, CreatesAndReplaces) {
  const std::string file = path("out.txt");
  write_text_atomic(file, "first");
  EXPECT_EQ(read_text_file(file), "first");
  write_text_atomic(file, "second, longer");
  EXPECT_EQ(read_text_file(file), "second, longer");
  write_text_atomic(file, "");
  EXPECT_EQ(read_text_file(file), "");
  EXPECT_EQ(listing(), (std::set<std::string>{"out.txt"}));
}

TEST_F(AtomicFileTest, ThrowingWriterKeepsOldFileAndLeavesNoTemp) {
  const std::string file = path("out.txt");
  write_text_atomic(file, "old contents");
  EXPECT_THROW(write_file_atomic(file,
                                 [&](int fd) {
                                   write_all(fd, "partial", 7, file);
                                   fail("writer gave up on {}", file);
                                 }),
               Error);
  EXPECT_EQ(read_text_file(file), "old contents");
  EXPECT_EQ(listing(), (std::set<std::string>{"out.txt"}));

  // Same for a file that did not exist before: nothing at all is left behind.
  EXPECT_THROW(write_file_atomic(path("new.txt"), [](int) { throw std::runtime_error("boom"); }), std::runtime_error);
  EXPECT_EQ(listing(), (std::set<std::string>{"out.txt"}));
}

TEST_F(AtomicFileTest, SafetensorsOverwriteIsAtomic) {
  const std::vector<float> old_values = {1.0f}, new_values = {2.0f, 3.0f};
  const std::string file = path("model.safetensors");
  write_safetensors(file, {to_write("v", DType::F32, {1}, old_values)});
  // A mapping of the old file stays valid and unchanged after the new file replaces it.
  SafetensorsFile old_file = SafetensorsFile::open(file);
  write_safetensors(file, {to_write("v", DType::F32, {2}, new_values)});
  EXPECT_EQ(*static_cast<const float*>(old_file.tensors().at("v").data), 1.0f);
  EXPECT_EQ(SafetensorsFile::open(file).tensors().at("v").numel(), 2);
  EXPECT_EQ(listing(), (std::set<std::string>{"model.safetensors"}));
}

TEST_F(AtomicFileTest, ReadMissingFile) {
  expect_error([&] { read_text_file(path("absent.txt")); }, {"cannot read", path("absent.txt")});
}

TEST_F(AtomicFileTest, UnwritableDirectory) {
  expect_error([&] { write_text_atomic(path("no/such/dir/out.txt"), "x"); }, {path("no/such/dir/out.txt")});
}

}  // namespace
}  // namespace dspark::io
