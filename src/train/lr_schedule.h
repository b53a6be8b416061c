// Learning-rate schedule: linear warmup from 0 to `peak`, then cosine decay to `peak * min_ratio`
// at `total` steps (and flat after). `step` counts optimizer steps already taken (0-based).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dspark {

inline double warmup_cosine_lr(int64_t step, int64_t total, int64_t warmup, double peak, double min_ratio) {
  if (warmup > 0 && step < warmup) return peak * double(step + 1) / double(warmup);
  const double span = std::max<int64_t>(1, total - warmup);
  const double progress = std::clamp(double(step - warmup) / span, 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return peak * (min_ratio + (1.0 - min_ratio) * cosine);
}

}  // namespace dspark
