// Plain autoregressive generation: prefill the prompt, then one target forward per token.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/transformer.h"
#include "sampling/sampler.h"

namespace dspark {

struct GenerationResult {
  std::vector<int64_t> tokens;  // generated tokens (incl. a final EOS if one was produced)
  int64_t n_prompt = 0;
  bool hit_eos = false;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // after the prompt, until the last token
};

// Generates up to `max_new` tokens after `prompt` (non-empty). Stops after an EOS token in
// `eos_ids`. `on_token` is called for every token as soon as it is chosen.
GenerationResult generate_autoregressive(Transformer& model, const std::vector<int64_t>& prompt,
                                         int64_t max_new, const SamplingParams& params,
                                         const std::vector<int64_t>& eos_ids,
                                         const std::function<void(int64_t)>& on_token = {});

}  // namespace dspark
