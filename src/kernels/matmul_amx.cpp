// AMX path of y[m, n] = x[m, k] * w[n, k]^T (see matmul_amx.h).
//
// Tiles (8 registers of 16 rows x 64 bytes, one fixed configuration):
//   w tile  [16 weight rows, 32 k] bf16      loaded from w with row stride ldw
//   x tile  [16 k pairs, 16 x rows x 2] bf16 from the packed copy of x (VNNI layout)
//   y tile  [16 weight rows, 16 x rows] f32   accumulators, written transposed into y
// Work: the weight rows are cut into units (64 rows when m <= 16, else 32), contiguous runs of
// units per thread; a unit's weights (units x k x 2 bytes, <= 384 KiB for k <= 3072) stay in L2
// while every 16-row block of x passes over them, so w is read from memory once.
#include "kernels/matmul_amx.h"

#include "kernels/parallel.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace dspark::kernels {
namespace {

#define DSPARK_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr int64_t kTileRows = 16;   // weight rows / k pairs / x rows per tile
constexpr int64_t kTileK = 32;      // k per tile
constexpr int64_t kXTileElems = 512;  // bf16 per packed x tile: 16 k pairs x 16 x rows x 2

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

DSPARK_AMX void configure_tiles() {
  TileConfig config;
  std::memset(&config, 0, sizeof config);
  config.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// x [m, k] f32 -> packed bf16 (round to nearest even) [ceil(m / 16)][k / 32][16 k pairs][16 rows][2]:
// the right operand of TDPBF16PS for each (16-row block of x, 32-wide step of k). Rows past m are 0.
// Blocks [b0, b1) only (threads split the blocks: for training-sized x the packing is as much
// memory traffic as the product itself).
DSPARK_AMX void pack_x_blocks(const float* x, int64_t ldx, int64_t m, int64_t k, uint16_t* xp, int64_t b0, int64_t b1) {
  const int64_t k_tiles = k / kTileK;
  for (int64_t b = b0; b < b1; ++b) {
    auto* block = reinterpret_cast<uint32_t*>(xp + b * k_tiles * kXTileElems);
    const int64_t rows = std::min(kTileRows, m - b * kTileRows);
    if (rows < kTileRows) std::fill(block, block + k_tiles * kXTileElems / 2, 0u);  // padding columns
    for (int64_t column = 0; column < rows; ++column) {
      const float* row = x + (b * kTileRows + column) * ldx;
      for (int64_t t = 0; t < k_tiles; ++t) {
        alignas(64) uint32_t pairs[16];  // bf16 pairs (k = 2q, 2q + 1) of this row, q < 16
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + t * kTileK + 16), _mm512_loadu_ps(row + t * kTileK));
        _mm512_store_si512(pairs, (__m512i)v);
        uint32_t* tile = block + t * (kXTileElems / 2);
        for (int q = 0; q < 16; ++q) tile[q * kTileRows + column] = pairs[q];
      }
    }
  }
}

// The same from xt = x^T [k, m] (row stride ldxt), m % 16 == 0: tile row q holds the bf16 pairs
// (xt[2q][i], xt[2q + 1][i]) for the 16 columns i of the block, i.e. two 16-float rows of xt
// converted together and interleaved.
DSPARK_AMX void pack_xt_blocks(const float* xt, int64_t ldxt, int64_t k, uint16_t* xp, int64_t b0, int64_t b1) {
  const int64_t k_tiles = k / kTileK;
  // Word indices taking (even row, odd row) words alternately: 0, 16, 1, 17, ..., 15, 31.
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int64_t b = b0; b < b1; ++b) {
    uint16_t* block = xp + b * k_tiles * kXTileElems;
    for (int64_t t = 0; t < k_tiles; ++t) {
      const float* rows = xt + t * kTileK * ldxt + b * kTileRows;
      uint16_t* tile = block + t * kXTileElems;
      for (int64_t q = 0; q < 16; ++q) {
        const __m512 even = _mm512_loadu_ps(rows + (2 * q) * ldxt), odd = _mm512_loadu_ps(rows + (2 * q + 1) * ldxt);
        const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);  // [even 0..15 | odd 0..15] bf16
        _mm512_storeu_si512(tile + q * 32, _mm512_permutexvar_epi16(interleave, both));
      }
    }
  }
}

// NT consecutive w tiles (16 * NT weight rows) against one block of x: c [NT][16][16].
template <int NT>
DSPARK_AMX void tiles_n_by_1(const uint16_t* xp, int64_t k_tiles, const uint16_t* w, int64_t ldw, float* c) {
  const int64_t stride = ldw * int64_t(sizeof(uint16_t));
  _tile_zero(0);
  if constexpr (NT > 1) _tile_zero(1);
  if constexpr (NT > 2) _tile_zero(2);
  if constexpr (NT > 3) _tile_zero(3);
  for (int64_t t = 0; t < k_tiles; ++t) {
    const uint16_t* wt = w + t * kTileK;
    _tile_loadd(4, xp + t * kXTileElems, 64);
    _tile_loadd(5, wt, stride);
    _tile_dpbf16ps(0, 5, 4);
    if constexpr (NT > 1) {
      _tile_loadd(6, wt + 16 * ldw, stride);
      _tile_dpbf16ps(1, 6, 4);
    }
    if constexpr (NT > 2) {
      _tile_loadd(7, wt + 32 * ldw, stride);
      _tile_dpbf16ps(2, 7, 4);
    }
    if constexpr (NT > 3) {
      _tile_loadd(5, wt + 48 * ldw, stride);
      _tile_dpbf16ps(3, 5, 4);
    }
  }
  _tile_stored(0, c, 64);
  if constexpr (NT > 1) _tile_stored(1, c + 256, 64);
  if constexpr (NT > 2) _tile_stored(2, c + 512, 64);
  if constexpr (NT > 3) _tile_stored(3, c + 768, 64);
}

// 2 w tiles against 2 blocks of x (each w tile loaded once for both): c [w tile][x block][16][16].
DSPARK_AMX void tiles_2_by_2(const uint16_t* xp0, const uint16_t* xp1, int64_t k_tiles, const uint16_t* w,
                             int64_t ldw, float* c) {
  const int64_t stride = ldw * int64_t(sizeof(uint16_t));
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t t = 0; t < k_tiles; ++t) {
    _tile_loadd(4, xp0 + t * kXTileElems, 64);
    _tile_loadd(5, xp1 + t * kXTileElems, 64);
    _tile_loadd(6, w + t * kTileK, stride);
    _tile_loadd(7, w + 16 * ldw + t * kTileK, stride);
    _tile_dpbf16ps(0, 6, 4);
    _tile_dpbf16ps(1, 6, 5);
    _tile_dpbf16ps(2, 7, 4);
    _tile_dpbf16ps(3, 7, 5);
  }
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
  _tile_stored(2, c + 512, 64);
  _tile_stored(3, c + 768, 64);
}

// c [16 weight rows][16 x rows] -> y[i0 + i, j0 + r] for i < rows_of_x.
inline void scatter_tile(const float* c, float* y, int64_t ldy, int64_t i0, int64_t rows_of_x, int64_t j0) {
  for (int64_t i = 0; i < rows_of_x; ++i) {
    float* yi = y + (i0 + i) * ldy + j0;
    for (int64_t r = 0; r < kTileRows; ++r) yi[r] = c[r * kTileRows + i];
  }
}

DSPARK_AMX void tiles_n_by_1_any(int tiles, const uint16_t* xp, int64_t k_tiles, const uint16_t* w, int64_t ldw,
                                 float* c) {
  switch (tiles) {
    case 1: return tiles_n_by_1<1>(xp, k_tiles, w, ldw, c);
    case 2: return tiles_n_by_1<2>(xp, k_tiles, w, ldw, c);
    case 3: return tiles_n_by_1<3>(xp, k_tiles, w, ldw, c);
    default: return tiles_n_by_1<4>(xp, k_tiles, w, ldw, c);
  }
}

struct Work {
  const uint16_t* xp;
  int64_t m, k_tiles, x_blocks;
  const uint16_t* w;
  int64_t ldw, rows;  // rows: weight rows taken here (a multiple of 16)
  float* y;
  int64_t ldy, unit_rows;
};

DSPARK_AMX void run_units(const Work& work, int64_t u0, int64_t u1) {
  configure_tiles();
  alignas(64) float c[4 * 256];
  const int64_t block_elems = work.k_tiles * kXTileElems;
  auto rows_in_block = [&](int64_t b) { return std::min(kTileRows, work.m - b * kTileRows); };
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t j0 = u * work.unit_rows;
    const int tiles = int(std::min(work.unit_rows, work.rows - j0) / kTileRows);
    const uint16_t* wu = work.w + j0 * work.ldw;
    for (int64_t b = 0; b < work.x_blocks;) {
      if (tiles == 2 && b + 1 < work.x_blocks) {
        tiles_2_by_2(work.xp + b * block_elems, work.xp + (b + 1) * block_elems, work.k_tiles, wu, work.ldw, c);
        for (int t = 0; t < 2; ++t)
          for (int64_t q = 0; q < 2; ++q)
            scatter_tile(c + (t * 2 + q) * 256, work.y, work.ldy, (b + q) * kTileRows, rows_in_block(b + q),
                         j0 + t * kTileRows);
        b += 2;
      } else {
        tiles_n_by_1_any(tiles, work.xp + b * block_elems, work.k_tiles, wu, work.ldw, c);
        for (int t = 0; t < tiles; ++t)
          scatter_tile(c + t * 256, work.y, work.ldy, b * kTileRows, rows_in_block(b), j0 + t * kTileRows);
        b += 1;
      }
    }
  }
  _tile_release();  // back to the init state: keeps context switches of this thread cheap
}

}  // namespace

bool amx_usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!amx_bf16 || !amx_tile || !__builtin_cpu_supports("avx512bf16")) return false;
    // Linux hands out the 8 KiB tile state only to processes that ask for it.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return usable;
}

namespace {

// Packs x with `pack(xp, b0, b1)` (threads split the blocks), then runs the tiles over w.
template <class Pack>
void run_amx(int64_t m, int64_t k, const Pack& pack, const uint16_t* w, int64_t ldw, int64_t n, float* y,
             int64_t ldy) {
  if (m <= 0) return;
  Work work;
  work.m = m;
  work.k_tiles = k / kTileK;
  work.x_blocks = (m + kTileRows - 1) / kTileRows;
  // Reused per calling thread: ceil(m / 16) * 16 * k bf16.
  thread_local std::vector<uint16_t> packed;
  const size_t packed_size = size_t(work.x_blocks * work.k_tiles * kXTileElems);
  if (packed.size() < packed_size) packed.resize(packed_size);
  uint16_t* xp = packed.data();
  const int64_t pack_grain = std::max<int64_t>(1, (int64_t(64) << 10) / (kTileRows * k * int64_t(sizeof(float))));
  parallel_ranges(work.x_blocks, pack_grain, [&](int64_t b0, int64_t b1) { pack(xp, b0, b1); });
  work.xp = xp;
  work.w = w;
  work.ldw = ldw;
  work.rows = amx_rows(n);
  work.y = y;
  work.ldy = ldy;
  work.unit_rows = work.x_blocks == 1 ? 64 : 32;
  const int64_t units = (work.rows + work.unit_rows - 1) / work.unit_rows;
  // >= 256 KiB of weights per thread and pass over x before another thread is worth waking.
  const int64_t unit_bytes = work.unit_rows * k * int64_t(sizeof(uint16_t)) * work.x_blocks;
  const int64_t grain = std::max<int64_t>(1, (int64_t(256) << 10) / std::max<int64_t>(1, unit_bytes));
  parallel_ranges(units, grain, [&](int64_t u0, int64_t u1) { run_units(work, u0, u1); });
}

}  // namespace

void matmul_bf16_amx(const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w, int64_t ldw, int64_t n,
                     float* y, int64_t ldy) {
  run_amx(
      m, k, [&](uint16_t* xp, int64_t b0, int64_t b1) { pack_x_blocks(x, ldx, m, k, xp, b0, b1); }, w, ldw, n, y,
      ldy);
}

void matmul_bf16_amx_xt(const float* xt, int64_t ldxt, int64_t m, int64_t k, const uint16_t* w, int64_t ldw,
                        int64_t n, float* y, int64_t ldy) {
  run_amx(
      m, k, [&](uint16_t* xp, int64_t b0, int64_t b1) { pack_xt_blocks(xt, ldxt, k, xp, b0, b1); }, w, ldw, n, y,
      ldy);
}

}  // namespace dspark::kernels
