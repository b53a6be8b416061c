// AMX (Advanced Matrix Extensions) path of the matrix products in kernels/matmul.h.
//
//   y[m, n] = x[m, k] * w[n, k]^T        (w bf16, row-major, the Hugging Face Linear layout)
//
// One TDPBF16PS multiplies a 16 x 32 bf16 tile by a 32 x 16 bf16 tile into a 16 x 16 float32
// tile: 8192 multiply-adds per instruction, an order of magnitude more than AVX-512 can issue. The
// weight matrix is the left operand: a tile is 16 weight rows x 32 consecutive k, loaded straight
// from w's row-major layout (no repacking, no second copy of the model). x is the right operand,
// packed per call into the "VNNI" layout the instruction wants (pairs of consecutive k for each of
// 16 columns). The output tiles come out transposed ([w rows, x rows]) and are scattered into y.
//
// Because reading w dominates for m <= 16, one pass of this kernel costs about the same for 1 or
// 16 activation rows: verifying 8 drafted tokens reads the weights once, like decoding 1 token.
//
// Numerics: x is rounded to bf16 (nearest even); products of bf16 pairs are exact in float32 and
// are accumulated in float32, 32 k at a time, in a fixed order that does not depend on m or on the
// other rows (row-invariant). Error bound as for Isa::Avx512Bf16 (see matmul.h).
#pragma once

#include <cstdint>

namespace dspark::kernels {

// CPU has AMX-TILE + AMX-BF16 and the kernel granted this process the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16). Checked once.
bool amx_usable();

// Shapes the AMX path takes: k a multiple of 32 (whole tiles along k) and at least one full tile
// of 16 weight rows. The caller computes rows [amx_rows(n), n) of w another way.
inline bool amx_shape_ok(int64_t k, int64_t n) { return k > 0 && k % 32 == 0 && n >= 16; }
inline int64_t amx_rows(int64_t n) { return n / 16 * 16; }

// y[i * ldy + j] = sum_p bf16(x[i * ldx + p]) * w[j * ldw + p] for i < m, j < amx_rows(n).
// Requires amx_usable() and amx_shape_ok(k, n). Threads split the weight rows.
void matmul_bf16_amx(const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w, int64_t ldw,
                     int64_t n, float* y, int64_t ldy);

// The same with x read through its transpose: x(i, p) = xt[p * ldxt + i], i.e. xt is [k, m]
// row-major (training: dW = dY^T X without materializing dY^T). Requires m % 16 == 0 as well.
void matmul_bf16_amx_xt(const float* xt, int64_t ldxt, int64_t m, int64_t k, const uint16_t* w, int64_t ldw,
                        int64_t n, float* y, int64_t ldy);

}  // namespace dspark::kernels
