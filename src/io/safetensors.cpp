#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "util/error.h"

namespace dspark::io {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- dtypes -------------------------------------------------------------------------------------

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::F64, "F64", 8}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
    {DType::I16, "I16", 2}, {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
};

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info;
  fail("invalid DType value {}", static_cast<int>(dtype));
}

}  // namespace

size_t dtype_size(DType dtype) { return dtype_info(dtype).size; }

const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }

DType dtype_from_name(const std::string& name, const std::string& context) {
  for (const auto& info : kDTypes)
    if (name == info.name) return info.dtype;
  fail("{}: unknown dtype '{}'", context, name);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- shared helpers -----------------------------------------------------------------------------

namespace {

std::string format_shape(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Bytes a tensor of `shape` and `dtype` occupies; false on overflow (a hostile header can claim
// any shape, and a wrapped product could otherwise match a small byte count).
bool expected_nbytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

// Library messages (nlohmann's parse errors) must not break the one-line error rule.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

// A JSON integer in [0, INT64_MAX]; nlohmann stores non-negative literals as unsigned.
bool as_non_negative_int(const json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

uint64_t read_le_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

// ---- reader -------------------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  std::shared_ptr<const MappedFile> mapped = MappedFile::open(path);
  const std::string bad = fmt::format("bad safetensors file {}", path);
  const size_t size = mapped->size();

  if (size < 8) fail("{}: truncated ({} bytes, need at least 8 for the header length)", bad, size);
  const uint64_t header_len = read_le_u64(mapped->data());
  if (header_len > size - 8)
    fail("{}: header length {} past end of file ({} bytes)", bad, header_len, size);

  const char* header_begin = reinterpret_cast<const char*>(mapped->data()) + 8;
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len);
  } catch (const json::exception& e) {
    fail("{}: bad JSON header: {}", bad, one_line(e.what()));
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", bad);

  const uint8_t* buffer = mapped->data() + 8 + header_len;
  const uint64_t buffer_size = size - 8 - header_len;

  // (begin, end, name) of every tensor, for the overlap check once all are parsed.
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> ranges;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: __metadata__ is not a JSON object", bad);
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("{}: __metadata__ value of '{}' is not a string", bad, key);
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("{}: tensor '{}'", bad, one_line(name));
    if (!entry.is_object()) fail("{} is not a JSON object", where);

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) fail("{}: dtype missing or not a string", where);
    DType dtype = dtype_from_name(dtype_it->get<std::string>(), where);

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array())
      fail("{}: shape missing or not a list", where);
    std::vector<int64_t> shape;
    for (const json& dim : *shape_it) {
      int64_t d = 0;
      if (!as_non_negative_int(dim, &d))
        fail("{}: shape {} has an entry that is not a non-negative integer", where, shape_it->dump());
      shape.push_back(d);
    }

    auto offsets_it = entry.find("data_offsets");
    int64_t begin = 0, end = 0;
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !as_non_negative_int((*offsets_it)[0], &begin) || !as_non_negative_int((*offsets_it)[1], &end) ||
        begin > end) {
      fail("{}: data_offsets must be [begin, end] with 0 <= begin <= end, got {}", where,
           offsets_it == entry.end() ? std::string("nothing") : offsets_it->dump());
    }
    if (static_cast<uint64_t>(end) > buffer_size)
      fail("{}: data_offsets [{}, {}] out of range of the data buffer ({} bytes)", where, begin, end,
           buffer_size);

    const uint64_t nbytes = static_cast<uint64_t>(end - begin);
    uint64_t expected = 0;
    if (!expected_nbytes(shape, dtype, &expected))
      fail("{}: shape/size mismatch: shape {} of {} overflows 64-bit byte counts", where,
           format_shape(shape), dtype_name(dtype));
    if (expected != nbytes)
      fail("{}: shape/size mismatch: shape {} of {} needs {} bytes but data_offsets span {}", where,
           format_shape(shape), dtype_name(dtype), expected, nbytes);

    TensorView view;
    view.name = name;
    view.dtype = dtype;
    view.shape = std::move(shape);
    view.data = buffer + begin;
    view.nbytes = static_cast<size_t>(nbytes);
    view.file = path;
    view.owner = mapped;
    file.tensors_.emplace(name, std::move(view));
    ranges.emplace_back(begin, end, name);
  }

  // Overlap check: sorted by begin, a non-empty tensor overlaps an earlier one iff it starts before
  // the furthest end seen so far. Empty tensors occupy no bytes and may sit anywhere.
  std::sort(ranges.begin(), ranges.end());
  uint64_t furthest_end = 0;
  const std::string* furthest_name = nullptr;
  for (const auto& [begin, end, name] : ranges) {
    if (begin == end) continue;
    if (furthest_name != nullptr && begin < furthest_end)
      fail("{}: tensors '{}' and '{}' overlap in the data buffer", bad, *furthest_name, name);
    if (end > furthest_end) {
      furthest_end = end;
      furthest_name = &name;
    }
  }
  return file;
}

// ---- store --------------------------------------------------------------------------------------

namespace {

// weight_map of an index file: tensor name -> shard file name (relative to the index).
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const std::string text = read_text_file(index_path);
  const std::string bad = fmt::format("bad index file {}", index_path);
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: bad JSON: {}", bad, one_line(e.what()));
  }
  if (!index.is_object()) fail("{}: not a JSON object", bad);
  auto it = index.find("weight_map");
  if (it == index.end() || !it->is_object()) fail("{}: weight_map missing or not a JSON object", bad);
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : it->items()) {
    if (!shard.is_string()) fail("{}: weight_map entry '{}' is not a string", bad, name);
    weight_map[name] = shard.get<std::string>();
  }
  return weight_map;
}

}  // namespace

TensorStore TensorStore::open(const std::string& dir_or_file, const std::string& basename) {
  TensorStore store;
  store.location_ = dir_or_file;

  fs::path path(dir_or_file);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path single = path / (basename + ".safetensors");
    fs::path index = path / (basename + ".safetensors.index.json");
    if (fs::exists(single, ec)) {
      path = single;
    } else if (fs::exists(index, ec)) {
      path = index;
    } else {
      fail("no {}.safetensors or {}.safetensors.index.json in {}", basename, basename, dir_or_file);
    }
  } else if (!fs::exists(path, ec)) {
    fail("cannot open checkpoint {}: no such file or directory", dir_or_file);
  }

  if (path.extension() != ".json") {
    SafetensorsFile file = SafetensorsFile::open(path.string());
    store.tensors_ = file.tensors();
    store.metadata_ = file.metadata();
    return store;
  }

  // Sharded: open each shard once, then take exactly the tensors the index assigns to it (the
  // index is authoritative; a tensor it does not list is not part of the checkpoint).
  const std::string index_path = path.string();
  const fs::path dir = path.parent_path();
  std::map<std::string, std::vector<std::string>> names_by_shard;
  for (const auto& [name, shard] : read_weight_map(index_path)) names_by_shard[shard].push_back(name);

  for (const auto& [shard, names] : names_by_shard) {
    const fs::path shard_path = dir / shard;
    if (!fs::is_regular_file(shard_path, ec))
      fail("missing shard {} listed in {}", shard_path.string(), index_path);
    SafetensorsFile file = SafetensorsFile::open(shard_path.string());
    for (const std::string& name : names) {
      auto it = file.tensors().find(name);
      if (it == file.tensors().end())
        fail("tensor '{}' listed in {} is not in shard {}", name, index_path, shard_path.string());
      store.tensors_.emplace(name, it->second);
    }
    // Every shard we write carries the same metadata; keep the first value of any key.
    for (const auto& [key, value] : file.metadata()) store.metadata_.emplace(key, value);
  }
  return store;
}

const TensorView& TensorStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("missing tensor {} in {}", name, location_);
  return it->second;
}

// ---- writer -------------------------------------------------------------------------------------

namespace {

// Rejects what would produce an unreadable file: bad names, duplicates, byte counts that do not
// match the shape. `target` names the file or directory in the message.
void validate_for_write(const std::string& target, const std::vector<TensorToWrite>& tensors) {
  std::set<std::string> seen;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty()) fail("cannot write {}: a tensor has an empty name", target);
    if (t.name == "__metadata__") fail("cannot write {}: '__metadata__' is not a valid tensor name", target);
    if (!seen.insert(t.name).second) fail("cannot write {}: duplicate tensor '{}'", target, t.name);
    uint64_t expected = 0;
    if (!expected_nbytes(t.shape, t.dtype, &expected))
      fail("cannot write {}: tensor '{}' has an invalid shape {}", target, t.name, format_shape(t.shape));
    if (expected != t.nbytes)
      fail("cannot write {}: tensor '{}': shape/size mismatch: shape {} of {} needs {} bytes but {} given",
           target, t.name, format_shape(t.shape), dtype_name(t.dtype), expected, t.nbytes);
    if (t.nbytes > 0 && t.data == nullptr) fail("cannot write {}: tensor '{}' has no data", target, t.name);
  }
}

std::vector<const TensorToWrite*> sorted_by_name(const std::vector<TensorToWrite>& tensors) {
  std::vector<const TensorToWrite*> sorted;
  for (const TensorToWrite& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });
  return sorted;
}

void write_sorted(const std::string& path, const std::vector<const TensorToWrite*>& sorted,
                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite* t : sorted) {
    header[t->name] = {{"dtype", dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", json::array({offset, offset + t->nbytes})}};
    offset += t->nbytes;
  }
  // Spaces pad the header so the data buffer starts 8-byte aligned in the file (and the mapping).
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  write_file_atomic(path, [&](int fd) {
    write_all(fd, length, sizeof length, path);
    write_all(fd, text.data(), text.size(), path);
    for (const TensorToWrite* t : sorted)
      if (t->nbytes > 0) write_all(fd, t->data, t->nbytes, path);
  });
}

// True for "<basename>-NNNNN-of-NNNNN.safetensors" (any digit count >= 5, as the writer widens).
bool is_shard_name(const std::string& file, const std::string& basename) {
  const std::string prefix = basename + "-", suffix = ".safetensors";
  if (file.size() <= prefix.size() + suffix.size() || file.compare(0, prefix.size(), prefix) != 0 ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string middle = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
  const size_t of = middle.find("-of-");
  if (of == std::string::npos) return false;
  auto all_digits = [](const std::string& s) {
    return s.size() >= 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return all_digits(middle.substr(0, of)) && all_digits(middle.substr(of + 4));
}

void remove_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) fail("cannot remove stale {}: {}", path.string(), ec.message());
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  validate_for_write(path, tensors);
  write_sorted(path, sorted_by_name(tensors), metadata);
}

// Replace order, so that a crash at any point leaves a loadable checkpoint (TensorStore prefers the
// single file over the index): single -> write the file, then drop the old index and shards;
// sharded -> write shards, then the index, then drop the old single file and unused shards.
// Rewriting a sharded checkpoint over one with the same shard names is the one case that is not
// crash-consistent: shards are replaced one by one under the old index.
void write_safetensors_dir(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                           const std::map<std::string, std::string>& metadata, size_t max_shard_bytes,
                           const std::string& basename) {
  validate_for_write(dir, tensors);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create directory {}: {}", dir, ec.message());

  const std::vector<const TensorToWrite*> sorted = sorted_by_name(tensors);
  uint64_t total = 0;
  for (const TensorToWrite* t : sorted) total += t->nbytes;

  const fs::path root(dir);
  const fs::path single = root / (basename + ".safetensors");
  const fs::path index = root / (basename + ".safetensors.index.json");

  // Collected before writing so nothing we are about to write counts as stale.
  std::vector<fs::path> old_shards;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (is_shard_name(entry.path().filename().string(), basename)) old_shards.push_back(entry.path());

  if (max_shard_bytes == 0 || total <= max_shard_bytes) {
    write_sorted(single.string(), sorted, metadata);
    remove_file(index);
    for (const fs::path& p : old_shards) remove_file(p);
    return;
  }

  // Greedy split in name order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<const TensorToWrite*>> shards(1);
  uint64_t shard_bytes = 0;
  for (const TensorToWrite* t : sorted) {
    if (!shards.back().empty() && shard_bytes + t->nbytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += t->nbytes;
  }

  json weight_map = json::object();
  std::set<fs::path> written;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("{}-{:05d}-of-{:05d}.safetensors", basename, i + 1, shards.size());
    write_sorted((root / name).string(), shards[i], metadata);
    written.insert(root / name);
    for (const TensorToWrite* t : shards[i]) weight_map[t->name] = name;
  }
  json index_json = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text_atomic(index.string(), index_json.dump(2) + "\n");

  remove_file(single);
  for (const fs::path& p : old_shards)
    if (!written.count(p)) remove_file(p);
}

}  // namespace dspark::io
