// Training data a tiny target regenerated itself, as `dspark regen` writes it, for drafter tests.
#pragma once
#include <string>

#include "model/transformer.h"

namespace dspark::testing {

// 24 samples: random 6-token prompts (ids 2..V-1, seed 11) and 30 tokens sampled after each at
// temperature 1 (seed = the sample's index). Returns the directory holding samples.jsonl.
std::string self_distilled_data(Transformer& target, const std::string& tag);

}  // namespace dspark::testing
