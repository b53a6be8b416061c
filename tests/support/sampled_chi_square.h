// The check that sampled speculative decoding is exact, for any drafter on a tiny target.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/transformer.h"
#include "spec/drafter.h"

namespace dspark::testing {

struct ChiSquare {
  double chi2 = 0;
  double df = 0;        // degrees of freedom (cells kept - 1, with the pooled cell when it counts)
  double critical = 0;  // the 0.001 critical value for df (Wilson-Hilferty)
  int64_t accepted = 0; // drafts accepted over all draws
};

// The first two tokens after `prompt`, drawn `draws` times with speculative sampling at
// temperature 1 (seed = the draw's index, a fresh drafter from `make_drafter` each time, gamma
// drafts per step), against the target's exact joint distribution p(t1) p(t2 | t1): chi-square
// over the cells expected to hold >= 5 draws, the rest pooled into one cell.
ChiSquare first_two_tokens_chi_square(Transformer& target, const std::function<std::unique_ptr<Drafter>()>& make_drafter,
                                      const std::vector<int64_t>& prompt, int64_t draws, int64_t gamma = 3);

}  // namespace dspark::testing
