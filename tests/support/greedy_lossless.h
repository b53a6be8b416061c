// The check that greedy speculative decoding is exact, for any drafter on a tiny target.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/transformer.h"
#include "spec/drafter.h"

namespace dspark::testing {

struct GreedyLossless {
  int64_t checked = 0;   // speculative runs compared with plain decoding
  int64_t accepted = 0;  // drafts accepted over all of them
};

// Speculative decoding of `max_new` tokens after `prompt` (a fresh drafter from `make_drafter`
// per run) must equal plain greedy decoding token for token: without an EOS and with an early
// one (the plain output's 4th token), in fixed and threshold verify modes, for every gamma.
// Adds a failure per mismatch; returns the counts so the caller can check drafts were accepted.
GreedyLossless expect_greedy_equals_plain(Transformer& target, const std::function<std::unique_ptr<Drafter>()>& make_drafter,
                                          const std::vector<int64_t>& prompt, int64_t max_new,
                                          const std::vector<int64_t>& gammas);

}  // namespace dspark::testing
