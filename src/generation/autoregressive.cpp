#include "generation/autoregressive.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace dspark {

GenerationResult generate_autoregressive(Transformer& model, const std::vector<int64_t>& prompt,
                                         int64_t max_new, const SamplingParams& params,
                                         const std::vector<int64_t>& eos_ids,
                                         const std::function<void(int64_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) fail("the prompt is empty");
  validate(params);
  const int64_t context = model.config().max_position_embeddings;
  if (int64_t(prompt.size()) >= context)
    fail("the prompt has {} tokens but the model's context is {} tokens", prompt.size(), context);
  max_new = std::min<int64_t>(max_new, context - int64_t(prompt.size()));

  GenerationResult result;
  result.n_prompt = int64_t(prompt.size());
  if (max_new <= 0) return result;
  Rng rng(params.seed);
  KVCache cache = model.new_cache();
  auto start = clock::now();
  at::Tensor logits = model.forward(cache, prompt).logits[0];
  auto after_prefill = clock::now();
  result.prefill_seconds = std::chrono::duration<double>(after_prefill - start).count();
  while (true) {
    const int64_t token = sample_token(logits, params, rng);
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    if (std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) {
      result.hit_eos = true;
      break;
    }
    if (int64_t(result.tokens.size()) >= max_new) break;
    logits = model.forward(cache, {token}).logits[0];
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - after_prefill).count();
  return result;
}

}  // namespace dspark
