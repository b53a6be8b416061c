#include "support/self_distilled_data.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "spec/speculative.h"
#include "support/tiny_models.h"

namespace dspark::testing {

std::string self_distilled_data(Transformer& target, const std::string& tag) {
  const std::string dir = temp_dir(tag);
  const int64_t V = target.config().vocab_size;
  std::string lines;
  torch::manual_seed(11);
  for (int i = 0; i < 24; ++i) {
    at::Tensor p = torch::randint(2, V, {6}, torch::kInt64);
    std::vector<int64_t> all(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + 6);
    SpecOptions o;
    o.max_new_tokens = 30;
    o.sampling.temperature = 1.0;
    o.sampling.seed = uint64_t(i);
    auto r = generate_speculative(target, nullptr, all, o);
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    lines += nlohmann::json{{"id", i}, {"n_prompt", 6}, {"tokens", all}}.dump() + "\n";
  }
  io::write_text_atomic(dir + "/samples.jsonl", lines);
  return dir;
}

}  // namespace dspark::testing
