#pragma once
// Top-p (nucleus) sampling with temperature and top-k: one token drawn per row of logits from
// a uniform u the caller supplies (the engine's SamplingUniform(seed, request id, token index),
// so a request's draws do not depend on batching or preemption). Greedy is GreedySample's.
//
// THE RULE, per row (V = vocab_size, logits l_0..l_{V-1}, T = temperature):
//
// 1. Weights, fixed point. m = max_i l_i; x_i = (l_i - m) / T in f32 (IEEE division);
//    q_i = floor(e^{x_i} * 2^40) as an integer, with e^x evaluated by TopPWeight below (a
//    fixed f32 polynomial, not the platform's expf) and q_i = 0 for x_i <= -28 (there
//    e^x * 2^40 < 1 anyway). So q_m = 2^40 and p_i = q_i / sum q: the softmax at temperature
//    T, to f32 precision, on an absolute grid of 2^-40 of the largest probability's weight.
//    Every mass below is an exact integer sum (V <= 2^23 keeps it under 2^63), so it does not
//    depend on summation order: the CUDA kernel's block reductions and the twin's loops agree
//    bit for bit, and no float rounding can make them keep different sets.
// 2. Order. Tokens are ranked by logit (TopPOrderKey: -0 equals +0); a tie group is the
//    tokens with one logit value. "Prefix" below means a set {i : l_i >= lambda}: the most
//    likely tokens, tie groups never split.
// 3. Top-k. top_k in 1..V-1: K_k = the shortest prefix with at least top_k tokens, i.e.
//    every token whose logit is >= the top_k-th largest logit (counting repeats). Ties at the
//    threshold are all kept, so K_k may hold more than top_k tokens. top_k = 0 or >= V: all.
//    M_k = sum of q over K_k.
// 4. Top-p, relative to the top-k set (as engine/sampler.cc, HF and vLLM apply top-p to the
//    renormalised top-k distribution). top_p = 1: K = K_k. top_p < 1: target =
//    TopPTargetMass(top_p, M_k) = ceil(top_p * M_k) in f64, within [1, M_k]; K = the shortest
//    prefix whose mass reaches the target (tie group at the boundary kept whole). Equivalently
//    K = {p_i >= tau} for the largest tau whose kept mass is >= top_p * M_k, no smaller than
//    the top_k-th largest probability.
// 5. Draw, in token-id order (inverse CDF over ids, not over the sorted order, so the kernel
//    needs no sort). M = sum of q over K; r = TopPDrawPoint(u, M) = floor(u * M) in f64,
//    at most M - 1. The token is the smallest id j in K with sum_{i in K, i <= j} q_i > r.
//    A token of zero weight is never drawn.
//
// Caveats (float): ties are logit ties; two different logits whose weights round to one q are
// ranked, not tied. Probabilities below 2^-40 of the top token's become 0 (never drawn); the
// rest carry f32 precision (~1e-7 relative), so thresholds and draws within that of a
// boundary may differ from an exact-arithmetic softmax. The CUDA kernel computes the same
// integers as the twin because TopPWeight is compiled from this header for both with explicit
// fmaf and IEEE division: building the kernels with --use_fast_math would break that.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace servelab::kernels {

inline constexpr int kTopPWeightBits = 40;          // q of the most likely token: 2^40
inline constexpr int32_t kTopPMaxVocab = 1 << 23;  // V * 2^40 < 2^63: masses fit in uint64

// Order-preserving map of a logit to an unsigned key: a < b  <=>  key(a) < key(b), and -0
// ties +0. (NaN is a precondition violation; it would sort outside +-inf.)
SERVELAB_HOST_DEVICE inline uint32_t TopPOrderKey(float logit) {
  if (logit == 0.0f) logit = 0.0f;
  uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(logit);
#else
  std::memcpy(&bits, &logit, sizeof bits);
#endif
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// q = floor(e^x * 2^40) for x = (logit - max_logit) / temperature <= 0, 0 when x <= -28 (or
// NaN, -inf). e^x = 2^n e^r with n = rint(x log2 e) and r = x - n ln 2 (ln 2 split in two,
// Cody-Waite); e^r by its degree-7 Taylor polynomial (|r| <= 0.35: relative error < 1e-8,
// below f32 rounding); the product with 2^(n + 40) is exact. Only correctly rounded
// operations (IEEE *, /, explicit fmaf, rintf), so host and device give the same bits.
SERVELAB_HOST_DEVICE inline uint64_t TopPWeight(float logit, float max_logit,
                                                      float temperature) {
  const float x = (logit - max_logit) / temperature;
  if (!(x > -28.0f)) return 0;
  const float n = rintf(x * 1.44269504f);  // in [-40, 0]
  float r = fmaf(n, -0.693145752f, x);     // ln 2 high part: n * it is exact
  r = fmaf(n, -1.42860677e-6f, r);         // ln 2 low part
  float p = 1.0f / 5040.0f;
  p = fmaf(p, r, 1.0f / 720.0f);
  p = fmaf(p, r, 1.0f / 120.0f);
  p = fmaf(p, r, 1.0f / 24.0f);
  p = fmaf(p, r, 1.0f / 6.0f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const uint32_t scale_bits = static_cast<uint32_t>(static_cast<int>(n) + kTopPWeightBits + 127)
                              << 23;  // 2^(n + 40), a normal float
  float scale;
#if defined(__CUDA_ARCH__)
  scale = __uint_as_float(scale_bits);
#else
  std::memcpy(&scale, &scale_bits, sizeof scale);
#endif
  return static_cast<uint64_t>(p * scale);
}

// The mass the top-p set must reach: ceil(top_p * mass) in f64, clamped to [1, mass].
SERVELAB_HOST_DEVICE inline uint64_t TopPTargetMass(float top_p, uint64_t mass) {
  const double target = ceil(static_cast<double>(top_p) * static_cast<double>(mass));
  if (!(target < static_cast<double>(mass))) return mass;
  return target < 1.0 ? 1 : static_cast<uint64_t>(target);
}

// The draw point floor(u * mass) in f64 for u in [0, 1); clamped to mass - 1, which f64
// rounding of a mass above 2^53 could otherwise reach. REQUIRES: mass > 0.
SERVELAB_HOST_DEVICE inline uint64_t TopPDrawPoint(double u, uint64_t mass) {
  const auto r = static_cast<uint64_t>(u * static_cast<double>(mass));
  return r < mass ? r : mass - 1;
}

namespace cpu {

// The rule above, row by row (sort-based: the reference for the CUDA kernel).
//   token_ids:    [num_rows], int32, written
//   logits:       [num_rows, vocab_size], f32; finite or -inf (masked), at least one finite
//   temperatures: [num_rows], f32, finite and > 0
//   top_ks:       [num_rows], int32, >= 0 (0 = no top-k)
//   top_ps:       [num_rows], f32, in (0, 1]
//   uniforms:     [num_rows], f64, in [0, 1)
// REQUIRES: 0 < vocab_size <= kTopPMaxVocab. Violations are CHECK failures.
void TopPSample(int32_t* token_ids, const float* logits, const float* temperatures,
                const int32_t* top_ks, const float* top_ps, const double* uniforms,
                int32_t num_rows, int32_t vocab_size);

}  // namespace cpu
}  // namespace servelab::kernels
