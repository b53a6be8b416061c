// Safetensors: read (mmap, zero-copy) and write (single file or sharded with an index, atomic).
// Format: 8-byte little-endian header length N, N bytes of JSON header
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// then the data buffer; offsets are relative to the start of the data buffer.
// This layer knows nothing of LibTorch: tensors are pointers + shapes; model/ wraps them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dspark::io {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "F32", "BF16", ... as safetensors spells them
DType dtype_from_name(const std::string& name, const std::string& context);  // throws on unknown

class MappedFile;  // read-only mmap of a whole file; unmapped when the last user lets go

// One tensor inside a mapped file. `data` stays valid while `owner` is alive.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  std::string file;                     // which file it lives in (for error messages)
  std::shared_ptr<const MappedFile> owner;
  int64_t numel() const;
};

// A single .safetensors file, validated on open: every malformed case throws dspark::Error naming
// the file and the problem (truncated file, header length past end of file, bad JSON, unknown
// dtype, offsets out of range or overlapping, shape/size mismatch).
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory or file: `model.safetensors`, or the shards listed in
// `model.safetensors.index.json` (weight_map), or a single given .safetensors path, or a given
// index .json path. In a directory the single file wins over the index (as in transformers), which
// is also what makes write_safetensors_dir's replace order safe. `basename` replaces "model" for
// directories written with another stem (drafters).
class TensorStore {
 public:
  static TensorStore open(const std::string& dir_or_file, const std::string& basename = "model");
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws "missing tensor NAME in DIR" when absent.
  const TensorView& get(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& location() const { return location_; }

 private:
  std::string location_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: raw little-endian bytes in `dtype` with `shape`.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes one file atomically (temp file in the same directory + rename). Throws on size mismatch.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes `dir/model.safetensors` when everything fits in `max_shard_bytes` (0 = no limit),
// otherwise `dir/model-0000i-of-0000n.safetensors` + `model.safetensors.index.json`, each atomic.
// `basename` lets drafters use another stem than "model".
void write_safetensors_dir(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                           const std::map<std::string, std::string>& metadata = {},
                           size_t max_shard_bytes = 0, const std::string& basename = "model");

}  // namespace dspark::io
