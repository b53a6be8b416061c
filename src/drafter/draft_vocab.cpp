#include "drafter/draft_vocab.h"

#include <torch/torch.h>

#include <algorithm>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <numeric>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace dspark {

at::Tensor most_frequent_tokens(const std::vector<int64_t>& counts, int64_t n) {
  const int64_t V = int64_t(counts.size());
  if (n < 1 || n > V) fail("a draft vocabulary of {} tokens must hold 1..{} (the target's vocabulary)", n, V);
  std::vector<int64_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), int64_t(0));
  // Count descending, then id ascending: a total order, so the choice never depends on the sort.
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int64_t a, int64_t b) {
    return counts[size_t(a)] != counts[size_t(b)] ? counts[size_t(a)] > counts[size_t(b)] : a < b;
  });
  ids.resize(size_t(n));
  std::sort(ids.begin(), ids.end());
  return torch::tensor(ids, torch::kInt64);
}

void check_d2t(const at::Tensor& d2t, int64_t n, int64_t vocab, const std::string& where) {
  if (d2t.scalar_type() != torch::kInt64)
    fail("{}: tensor {} must be int64 (I64), not {}", where, kD2tTensor, c10::toString(d2t.scalar_type()));
  if (d2t.dim() != 1 || d2t.size(0) != n)
    fail("{}: tensor {} has shape [{}], expected [{}] (draft_vocab_size)", where, kD2tTensor,
         fmt::join(d2t.sizes(), ", "), n);
  const at::Tensor ids = d2t.to(torch::kCPU).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    if (id[j] < 0 || id[j] >= vocab)
      fail("{}: tensor {} maps draft id {} to {}, outside the target's vocabulary of {}", where, kD2tTensor, j, id[j],
           vocab);
    if (j > 0 && id[j] == id[j - 1]) fail("{}: tensor {} holds target id {} twice", where, kD2tTensor, id[j]);
    if (j > 0 && id[j] < id[j - 1])
      fail("{}: tensor {} is not sorted ascending ({} after {} at draft id {})", where, kD2tTensor, id[j], id[j - 1], j);
  }
}

at::Tensor read_d2t(const io::TensorStore& store, int64_t n, int64_t vocab) {
  if (!store.contains(kD2tTensor))
    fail("{}: missing tensor {} (the drafter has a draft vocabulary of {} tokens)", store.location(), kD2tTensor, n);
  const io::TensorView& view = store.get(kD2tTensor);
  if (view.dtype != io::DType::I64)
    fail("{}: tensor {} must be I64, not {}", view.file, kD2tTensor, io::dtype_name(view.dtype));
  at::Tensor d2t = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kInt64).clone();
  check_d2t(d2t, n, vocab, view.file);
  return d2t;
}

std::vector<int64_t> read_token_counts(const std::string& path, int64_t vocab) {
  using nlohmann::json;
  const json j = json::parse(io::read_text_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("counts") || !j["counts"].is_array())
    fail("{}: not a token counts file (a JSON object with a \"counts\" array)", path);
  if (int64_t(j["counts"].size()) != vocab)
    fail("{}: {} counts, but the target's vocabulary has {} tokens", path, j["counts"].size(), vocab);
  std::vector<int64_t> counts;
  counts.reserve(size_t(vocab));
  for (const json& c : j["counts"]) {
    if (!c.is_number_integer() || c.get<int64_t>() < 0) fail("{}: counts must be integers >= 0", path);
    counts.push_back(c.get<int64_t>());
  }
  return counts;
}

void write_token_counts(const std::string& path, const std::vector<int64_t>& counts) {
  io::write_text_atomic(path, nlohmann::json{{"counts", counts}}.dump() + "\n");
}

double draft_vocab_coverage(const std::vector<int64_t>& counts, const at::Tensor& d2t) {
  int64_t total = 0, kept = 0;
  for (int64_t c : counts) total += c;
  const at::Tensor ids = d2t.to(torch::kCPU).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  for (int64_t j = 0; j < ids.numel(); ++j) kept += counts.at(size_t(id[j]));
  return total > 0 ? double(kept) / double(total) : 0.0;
}

at::Tensor target_to_draft(const at::Tensor& d2t, int64_t vocab) {
  at::Tensor t2d = torch::full({vocab}, int64_t(-1), d2t.options());
  return t2d.index_copy_(0, d2t, torch::arange(d2t.size(0), d2t.options()));
}

}  // namespace dspark
