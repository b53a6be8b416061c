// A reduced draft vocabulary (as EAGLE-3 and DeepSpec's successors do it): the drafter's output
// side (the LM-head rows it multiplies, Markov W2) covers Vd < V target tokens, the Vd most
// frequent ones of its training data, so a draft block computes [.., Vd] logits instead of [.., V].
// d2t [Vd] int64 maps draft id j to target id d2t[j] and is strictly ascending. Verification stays
// exact: the draft distribution over the target vocabulary is q with zeros outside d2t.
//
// Unlike the EAGLE-3 / vLLM / speculators checkpoints, whose `d2t[j]` is an offset (target id =
// j + d2t[j]), the native tensor holds the target ids themselves.
#pragma once
#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dspark {

namespace io { class TensorStore; }

// The name of the tensor in drafter.safetensors.
inline constexpr const char* kD2tTensor = "d2t";

// The `n` ids with the largest counts (counts [V], one per target id; ties, and ids never seen, go
// to the lower id), sorted ascending: a d2t [n] int64. Deterministic.
at::Tensor most_frequent_tokens(const std::vector<int64_t>& counts, int64_t n);

// One-line dspark::Error, prefixed by `where` (the file), unless d2t is an int64 tensor of shape
// [n] with ids in [0, vocab), strictly ascending (sorted, no duplicates).
void check_d2t(const at::Tensor& d2t, int64_t n, int64_t vocab, const std::string& where);

// The d2t tensor of a drafter's tensor store, checked as above (the error names its file).
at::Tensor read_d2t(const io::TensorStore& store, int64_t n, int64_t vocab);

// Token counts kept beside a drafter (`dspark convert --draft-vocab`), so that the same cut can be
// made again, or at load time (`--draft-vocab N`), without the regenerated data:
// {"counts": [V integers >= 0]}, one per target id.
inline constexpr const char* kTokenCountsFile = "token_counts.json";
// One-line dspark::Error naming `path` unless it holds exactly `vocab` counts.
std::vector<int64_t> read_token_counts(const std::string& path, int64_t vocab);
void write_token_counts(const std::string& path, const std::vector<int64_t>& counts);
// The share of all counted tokens whose id is in d2t, in [0, 1] (0 when nothing was counted).
double draft_vocab_coverage(const std::vector<int64_t>& counts, const at::Tensor& d2t);

// The inverse map t2d [vocab] int64: the draft id of every target id, -1 outside the draft vocabulary.
at::Tensor target_to_draft(const at::Tensor& d2t, int64_t vocab);

}  // namespace dspark
