// Self-distillation data: the target regenerates responses to a prompt set, so a drafter learns
// the target's own distribution. Stored as token ids with the prompt length (the response mask is
// positions >= n_prompt), one JSON line per prompt in prompt order, appended in groups and fsynced:
// an interrupted run resumes after the last complete line.
//
// DIR/samples.jsonl   {"id": i, "n_prompt": k, "tokens": [...]}
// DIR/regen.json      target identity, sampling settings, prompt-file fingerprint
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace dspark {

struct RegenOptions {
  std::string prompts_path;
  std::string out_dir;
  SamplingParams sampling{0.7, 20, 0.8, 0};
  int64_t max_new_tokens = 256;
  int64_t batch = 16;  // sequences decoded together (ragged batch)
  std::vector<int64_t> eos_ids;
  bool progress = true;
};

struct RegenSample {
  int64_t id = 0;
  int64_t n_prompt = 0;
  std::vector<int64_t> tokens;  // prompt + response
};

// Returns the number of samples in the directory when done.
int64_t regenerate(Transformer& target, const Tokenizer& tokenizer, const RegenOptions& options);

// Reads DIR/samples.jsonl (complete lines only); throws on a malformed line.
std::vector<RegenSample> read_regen_samples(const std::string& dir);

}  // namespace dspark
