// Internal to kernels/matmul_packed*.cpp: how a packed product is split into work and passes,
// shared by the AVX512-BF16 and the AVX2 kernels (each brings its own blocks and x format).
//
// Work: a thread takes a contiguous run of groups of kPackedGroupPanels panels (one linear stream
// of weights). For each group, every pass of up to MaxRows x rows reads the group's weights from
// memory once (the first pass) and from cache after (the later ones).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/matmul_packed.h"
#include "kernels/parallel.h"

namespace dspark::kernels::detail {

constexpr int64_t kPackedPanel = 16;       // output rows per panel
constexpr int64_t kPackedGroupPanels = 4;  // panels per work unit

// One block: rows [0, rows) of x (row stride ldx in X units; k-pair q of row i at x + i * ldx + q
// pairs) against consecutive panels from `panel` on; writes the first `cols` output columns.
template <typename X>
using PackedBlockFn = void (*)(const X* x, int64_t ldx, int64_t pairs, const uint16_t* panel, int64_t panel_stride,
                               float* y, int64_t ldy, int64_t cols);

// [rows - 1]: the block for a full group and how many panels it covers per call, and the block
// for single panels (a group's leftover at the end of the matrix).
template <typename X, int MaxRows>
struct PackedBlocks {
  PackedBlockFn<X> group[MaxRows];
  int group_panels[MaxRows];
  PackedBlockFn<X> single[MaxRows];
};

// The block table of a kernel with passes of up to 8 rows whose full group is one block of 4
// panels for 1-4 rows and two blocks of 2 panels for 5-8 (16 accumulators at most), with single
// panels for a group's leftover. block_of(rows, panels) returns the kernel's block for that shape,
// both given as std::integral_constant<int, N>.
template <typename X, typename BlockOf>
PackedBlocks<X, 8> blocks_of_up_to_8_rows(BlockOf block_of) {
  PackedBlocks<X, 8> table{};
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((table.group[I] = block_of(std::integral_constant<int, I + 1>{}, std::integral_constant<int, I < 4 ? 4 : 2>{}),
      table.group_panels[I] = I < 4 ? 4 : 2,
      table.single[I] = block_of(std::integral_constant<int, I + 1>{}, std::integral_constant<int, 1>{})),
     ...);
  }(std::make_integer_sequence<int, 8>{});
  return table;
}

// x [m, k] float32 as the widening kernels read it: k-pair q of row i at x + i * ldx + 2q. An odd k
// would read one column past the end of each row (times a zero weight), so then x is copied into
// rows of kp floats, in a buffer reused per calling thread. Returns the rows and their stride.
inline std::pair<const float*, int64_t> float_rows_of_even_length(const float* x, int64_t ldx, int64_t m,
                                                                  const PackedBf16& w) {
  const int64_t kp = w.kp();
  if (kp == w.k) return {x, ldx};
  thread_local std::vector<float> padded;
  padded.assign(size_t(m * kp), 0.0f);
  for (int64_t i = 0; i < m; ++i) std::copy(x + i * ldx, x + i * ldx + w.k, padded.data() + i * kp);
  return {padded.data(), kp};
}

// y [m, w.n] = x [m, k] * w^T through the blocks: `first` for a group's first pass, `again` for
// the passes after it (the group is in cache by then).
template <typename X, int MaxRows>
void walk_packed_groups(const X* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy,
                        const PackedBlocks<X, MaxRows>& first, const PackedBlocks<X, MaxRows>& again) {
  const int64_t kp = w.kp(), pairs = kp / 2, panel_stride = kp * kPackedPanel;
  const int64_t panels = (w.n + kPackedPanel - 1) / kPackedPanel;
  const int64_t groups = (panels + kPackedGroupPanels - 1) / kPackedGroupPanels;
  // As kernels/matmul.cpp: >= 128 KiB of weight traffic per thread before splitting pays off.
  const int64_t passes = (m + MaxRows - 1) / MaxRows;
  const int64_t group_bytes = kPackedGroupPanels * panel_stride * 2 * passes;
  const int64_t grain = std::max<int64_t>(1, (int64_t(128) << 10) / std::max<int64_t>(1, group_bytes));
  parallel_ranges(groups, grain, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t p0 = g * kPackedGroupPanels, np = std::min(kPackedGroupPanels, panels - p0);
      for (int64_t i0 = 0; i0 < m; i0 += MaxRows) {
        const PackedBlocks<X, MaxRows>& table = i0 == 0 ? first : again;
        const int64_t rows = std::min<int64_t>(MaxRows, m - i0);
        const X* xi = x + i0 * ldx;
        float* yi = y + i0 * ldy;
        int64_t p = p0;
        if (np == kPackedGroupPanels) {
          const int64_t step = table.group_panels[rows - 1];
          for (; p < p0 + np; p += step) {
            const int64_t cols = std::min(step * kPackedPanel, w.n - p * kPackedPanel);
            table.group[rows - 1](xi, ldx, pairs, w.data.data() + p * panel_stride, panel_stride, yi + p * kPackedPanel,
                                  ldy, cols);
          }
        }
        for (; p < p0 + np; ++p) {
          const int64_t cols = std::min(kPackedPanel, w.n - p * kPackedPanel);
          table.single[rows - 1](xi, ldx, pairs, w.data.data() + p * panel_stride, panel_stride, yi + p * kPackedPanel,
                                 ldy, cols);
        }
      }
    }
  });
}

}  // namespace dspark::kernels::detail
