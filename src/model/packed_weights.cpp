#include "model/packed_weights.h"

#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include <unistd.h>

#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"

namespace dspark {
namespace {

struct Entry {
  at::Tensor tensor;  // keeps the storage (and so the address) alive
  int64_t version = 0;
  std::shared_ptr<const kernels::PackedBf16> packed;
  int64_t owners = 0;
};

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<const void*, Entry> entries;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: owners may outlive static destruction
  return *r;
}

bool qualifies(const at::Tensor& t) {
  return t.defined() && t.dim() == 2 && t.device().is_cpu() && t.scalar_type() == torch::kBFloat16 &&
         t.is_contiguous() && t.numel() > 0;
}

// The size of the last-level cache that cpu0 reports in sysfs (sysconf's figure can be the whole
// host's in a VM), else sysconf's, else 32 MiB.
int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    int64_t best_level = 0, best_bytes = 0;
    for (int index = 0; index < 8; ++index) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
      std::ifstream level_file(dir + "level"), size_file(dir + "size");
      int64_t level = 0, size = 0;
      std::string unit;
      if (!(level_file >> level) || !(size_file >> size)) continue;
      size_file >> unit;  // "32768K" reads as 32768 then "K"
      const int64_t scale = unit == "K" ? 1024 : unit == "M" ? 1 << 20 : 1;
      if (level > best_level) best_level = level, best_bytes = size * scale;
    }
    if (best_bytes > 0) return best_bytes;
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? int64_t(l3) : int64_t(32) << 20;
  }();
  return bytes;
}

}  // namespace

bool packed_weights_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("DSPARK_PACKED_WEIGHTS");
    if (v && *v && std::string(v) == "0") return false;
    const char* k = std::getenv("DSPARK_DISABLE_KERNELS");
    if (k && *k && std::string(k) != "0") return false;
    return kernels::packed_bf16_supported();
  }();
  return enabled;
}

PackedWeights::PackedWeights(const std::vector<at::Tensor>& matrices) {
  if (!packed_weights_enabled()) return;
  Registry& r = registry();
  // Matrices that together exceed the last-level cache are read from memory at every use.
  int64_t bytes = 0;
  for (const at::Tensor& t : matrices)
    if (qualifies(t)) bytes += int64_t(t.nbytes());
  streamed_ = bytes > last_level_cache_bytes();
  for (const at::Tensor& t : matrices) {
    if (!qualifies(t)) continue;
    const void* key = t.data_ptr();
    bool seen = false;
    for (const void* k : keys_) seen = seen || k == key;
    if (seen) continue;  // the same matrix twice (a tied head): one entry, one owner
    {
      std::unique_lock lock(r.mutex);
      auto it = r.entries.find(key);
      if (it != r.entries.end() && it->second.version == int64_t(t._version()) && it->second.tensor.sizes() == t.sizes()) {
        ++it->second.owners;
        keys_.push_back(key);
        continue;
      }
    }
    auto packed = std::make_shared<kernels::PackedBf16>(
        kernels::pack_bf16(reinterpret_cast<const uint16_t*>(t.data_ptr()), t.size(1), t.size(0), t.size(1)));
    packed->streamed = streamed_;
    std::unique_lock lock(r.mutex);
    Entry& e = r.entries[key];
    const int64_t owners = e.tensor.defined() ? e.owners : 0;  // a stale entry: repacked, owners kept
    e = Entry{t, int64_t(t._version()), std::move(packed), owners + 1};
    keys_.push_back(key);
  }
}

PackedWeights::~PackedWeights() { release(); }

PackedWeights::PackedWeights(PackedWeights&& other) noexcept : keys_(std::move(other.keys_)), streamed_(other.streamed_) {
  other.keys_.clear();
}

PackedWeights& PackedWeights::operator=(PackedWeights&& other) noexcept {
  if (this != &other) {
    release();
    keys_ = std::move(other.keys_);
    streamed_ = other.streamed_;
    other.keys_.clear();
  }
  return *this;
}

void PackedWeights::release() {
  if (keys_.empty()) return;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  for (const void* key : keys_) {
    auto it = r.entries.find(key);
    if (it != r.entries.end() && --it->second.owners <= 0) r.entries.erase(it);
  }
  keys_.clear();
}

const kernels::PackedBf16* find_packed(const at::Tensor& w) {
  if (!packed_weights_enabled() || !qualifies(w)) return nullptr;
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  if (r.entries.empty()) return nullptr;
  auto it = r.entries.find(w.data_ptr());
  if (it == r.entries.end()) return nullptr;
  const Entry& e = it->second;
  if (e.version != int64_t(w._version()) || e.tensor.sizes() != w.sizes()) return nullptr;
  return e.packed.get();
}

}  // namespace dspark
