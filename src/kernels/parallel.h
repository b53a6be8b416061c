// Work splitting for the hand-written CPU kernels, on LibTorch's own OpenMP team.
#pragma once

#include <cstdint>

namespace dspark::kernels {

// Runs fn(context, begin, end) over [0, count) split into one contiguous range per thread, with
// at most ceil(count / grain) threads of the at::get_num_threads() team. fn must not throw.
void parallel_ranges_raw(int64_t count, int64_t grain, void (*fn)(void* context, int64_t begin, int64_t end),
                         void* context);

// f(begin, end) for each thread's range.
template <class F>
void parallel_ranges(int64_t count, int64_t grain, const F& f) {
  parallel_ranges_raw(
      count, grain, [](void* c, int64_t begin, int64_t end) { (*static_cast<const F*>(c))(begin, end); },
      const_cast<F*>(&f));
}

}  // namespace dspark::kernels
