// A Contract is the complete, bit-level definition of a quantizer (docs/contracts.md): which
// elements share a scale, how the scale is computed and encoded, how elements round, what
// overflow and degenerate blocks produce. Named presets (docs/presets.md) are Contract values;
// every parameter can be overridden by name ("scale_mode=before", "rounding=even", ...).
// Only the parameters of a contract's family are listed or accepted, so no switch is inert.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qexact/formats/element.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

enum class Family : std::uint8_t {
  mx,          // contracts §1-2: groups along the last axis, E8M0 scale, minifloat payload
  int8_block,  // §3: (B, S, N, D), one fp32 scale per (b, head, token block)
  int8_token,  // §4: one scale per row over the complete last axis
  int8_group,  // ggml q8_0: groups of `group` along the last axis, int8 payload
  hif4,        // §5: HiFloat4 three-level block format
  pool,        // §6: pooled block mean over the sequence axis (not a quantizer: one output)
  fp8_scaled,  // §9.1: FP8 elements, one fp32 scale (not a power of two) per tensor/row/group/tile/head block
  nvfp4,       // §9.2: E2M1 elements in blocks of 16, E4M3 block scales, optional fp32 tensor scale
};
const char* family_name(Family f);

// ---- MX parameters --------------------------------------------------------------------
enum class ScaleRule : std::uint8_t {
  floor,  // 2^(floor(log2 amax) - emax_elem): the fp32 exponent of amax minus emax_elem
  rceil,  // the fp32 ratio amax/max_elem rounded up to a power of two
  rceil_bits,  // rceil on the ratio's fp32 bits (bits + 0x7FFFFF, mantissa cleared: triton_kernels'
               // ROUND_UP): the same byte for a normal ratio, 2^-126 (byte 1) for a subnormal one
  ceil,   // torchao CEIL: floor rule on amax rounded up to a power of two when its mantissa != 0
  even,   // torchao EVEN: floor rule on amax rounded (half up) to mbits_elem mantissa bits
};
enum class Byte0Rule : std::uint8_t {
  flush,       // a group whose scale byte is 0 has all-zero payload (Ascend)
  quantize,    // elements are quantized against 2^-127 like any other scale (OCP)
  min_normal,  // elements are quantized against 2^-126 while the byte says 0 (torchao 0.18 FLOOR,
               // CEIL, EVEN clamp their fp32 scale to the smallest normal)
  unscaled,    // elements are multiplied by 1.0 (TransformerEngine's exp2f_rcp(0) == 1): tiny
               // groups come out as signed zeros
  written_one, // elements are quantized against 2^-127, the byte written is 1 (AMD Quark's export
               // writes every scale <= 2^-126 as 0x01; its codes used the scale itself)
  infinite,    // elements are multiplied by +inf (eager JAX on XLA:CPU: DAZ reads the divisor
               // 2^-127 as 0, and 1 / 0 is inf): nonzero elements saturate, zeros are NaN
};
enum class NonFiniteRule : std::uint8_t {
  zero,     // Ascend: scale byte 255, every payload byte 0x00
  nan,         // OCP: scale byte 255, every element the canonical NaN 0x7F (x * NaN on a device
               // gives +NaN whatever x's sign); 0 for formats without NaN
  nan_signed,  // as nan, but each element keeps its own sign (0xFF for negative elements)
  te,          // TransformerEngine (ptx.cuh exp2f_rcp): NaN takes no part in amax (fmaxf), an inf
               // amax gives byte 0xFE whose multiplier is +0.0: inf * 0 -> NaN (0x7F), peers -> +/-0;
               // a NaN element -> 0x7F
  te_saturate, // older TransformerEngine (exp2f): byte 0xFE multiplies by 2^-127: inf -> +/-max
  torchao,     // torchao 0.18 to_mx FLOOR/CEIL/EVEN: an inf amax is an exponent field of 255, its byte
               // 255 - emax (inf elements saturate, finite ones quantize against it); a NaN amax gives
               // byte 255 and elements x / +inf: finite -> signed zero, NaN -> its own NaN, inf ->
               // the x86 default NaN (negative)
  torchao_rceil,           // torchao 0.18 to_mx RCEIL, eager: an inf amax gives byte 254 multiplying
                           // by 2^-127 (inf -> +/-max); a NaN amax gives byte 255 and x * NaN: every
                           // element (NaN ones too) the amax's positive canonical NaN
  torchao_rceil_compiled,  // as torchao_rceil, but a NaN group is the NaN 0xFFFFFFFF everywhere
                           // (torch.compile'd to_mx RCEIL on CPU, torch 2.15)
  byte0_nan,   // ModelOpt MXFP8: a NaN amax gives byte 0 (its `d > 0` test fails), an inf amax byte
               // 254 (log2 inf clamps to 127); elements are quantized against those scales like any
               // others (finite ones saturate or vanish, inf saturates), a NaN element is the NaN
               // code of its own sign
  negative_zero,  // ModelOpt MXFP4: a group holding NaN or inf has byte 0 and every element the
                  // negative zero code (2^NaN, and x / 2^inf)
  ct,          // compressed-tensors: a NaN amax gives byte 0 (its vectorised min/max make the NaN
               // an all-ones pattern whose power-of-two rounding carries to +0), elements against
               // 2^-127 as byte0_nan; an inf amax, or one whose power-of-two rounding overflows,
               // gives byte 0x7F (127 + int(inf) wraps) and elements x / inf (zeros; inf -> NaN)
  xla,         // JAX on XLA:CPU (cast_to_e8m0_with_rounding_up on the bits): a NaN amax gives byte 0
               // (exponent field 255 rounded up wraps), its elements quantized against byte 0's
               // multiplier; an inf amax gives byte 255, elements x * (1 / inf) = x * 0 (finite ->
               // signed zero, inf -> the x86 default NaN); the NaN code keeps the NaN's sign, and
               // E2M1, which has none, codes NaN 0x8 (XLA's convert)
  quark,       // AMD Quark 0.13 (even scales): a NaN amax is the scale +NaN, written 0x7F; every element
               // x / NaN, a NaN element keeping its own NaN (quieted); an inf amax is the scale
               // 2^127 (byte 254), elements x / 2^127. A format without NaN (E2M1, E2M3, E3M2)
               // codes a NaN or inf by Quark's packing of its fp32 bits: the top mantissa bits
               // below the exponent field's, and the sign (E2M1 inf -> 0x6, NaN -> 0x7)
  triton,      // triton_kernels' downcast_to_mxfp (ROUND_UP): a NaN amax's bits round up to byte 0, an
               // inf amax stays byte 255, and both mean the multiplier 0 (its `scale == 0 ? 0 : 1 /
               // scale`, and 1 / inf): every element x * 0, finite -> a zero of its sign, NaN -> itself,
               // inf -> the x86 default NaN (negative); a NaN codes as the NaN code of its sign, or in
               // E2M1, which has none, as the largest code of its sign (its bit packing saturates)
  ggml,        // gguf-py's MXFP4: a NaN amax fails its `d > 0` test and an inf one's uint8 cast gives
               // 0, so the group has byte 0; its finite elements are quantized against 2^-127, its
               // NaN and inf elements are code 0 (the argmin of all-NaN or all-inf errors is the
               // table's first entry)
};
// How two E2M1 codes share a payload byte.
enum class Packing : std::uint8_t {
  adjacent,  // element 2k in the low nibble of byte k, 2k + 1 in the high one (OCP, torchao)
  halves,    // ggml's block_mxfp4: in each group of B, byte j of the group's B/2 holds element j
             // (low nibble) and element j + B/2 (high nibble)
};
// Whether an element that rounds to zero keeps its sign.
enum class SignedZero : std::uint8_t {
  keep,       // "true": negative values and -0.0 give the negative zero code
  drop,       // "false": every zero is +0
  underflow,  // a negative value that rounds to zero keeps its sign; a -0.0 input gives +0
              // (microxcaling: sign(x) * floor(|v| + 0.5), with torch.sign(-0.0) == +0)
  negative,   // a quotient that is exactly zero, +0.0 included, gets the negative zero code; a
              // nonzero one keeps its sign (ModelOpt's E2M1 packing: its sign bit is q <= 0)
};
enum class ScaleLayout : std::uint8_t {
  pairs,     // [rows, ceil(G/2), 2], padding byte 0 (Ascend)
  rowmajor,  // [..., G]
  padded,    // [pad128(rows), pad4(G)] row-major, padding bytes 0 (TransformerEngine)
  swizzled,  // torchao/cuBLAS to_blocked: 128x4 tiles, padded with byte 0
};
enum class TailRule : std::uint8_t { partial, reject };
enum class Prequant : std::uint8_t { none, bf16 };
enum class RatioOp : std::uint8_t { divide, reciprocal };  // rceil: amax / max or amax * fp32(1/max)

// ---- int8 parameters -------------------------------------------------------------------
enum class ScaleMode : std::uint8_t {
  before,  // scale = max(amax, scale_min) / qmax
  after,   // scale = max(amax / qmax, scale_min)
};
enum class Quotient : std::uint8_t {
  divide,      // x / stored scale (a correctly rounded division)
  reciprocal,  // x * fp32(qmax / max(amax, scale_min))  (SageAttention CUDA, vLLM)
  inv_scale,   // x * fp32(1 / scale), scale before storage rounding (ggml)
};
enum class IntRounding : std::uint8_t {
  rne,             // (v + 1.5*2^23) - 1.5*2^23
  half_away,       // roundf
  half_away_fp32,  // trunc(fp32(v + 0.5*sign(v)))  (Triton)
  trunc,           // toward zero (a device that converts without rounding)
};
enum class ScaleStore : std::uint8_t { f32, f16 };

// ---- pool parameters -------------------------------------------------------------------
enum class PoolDivisor : std::uint8_t {
  true_length,  // each cell divided by its real length (the contract)
  uniform,      // every cell divided by P: wrong on a tail cell, offered to show the drift
};

// ---- fp8.scaled / nvfp4 parameters (contracts §9) ------------------------------------------
// Which elements share one fp32 scale. Spelled tensor, row, group:N, tile:MxN, head_block:T.
enum class Granularity : std::uint8_t {
  tensor,      // one scale for the whole tensor, shape []
  row,         // one per row of the last axis, shape x.shape[:-1]
  group,       // N consecutive elements of a row, shape [..., ceil(C/N)]
  tile,        // M x N tiles of the [R, C] view (R = product of the leading dims), [ceil(R/M), ceil(C/N)]
  head_block,  // (B, S, N, D): per (b, head, T-token block), shape (B, N, ceil(S/T)), as int8.block
};
struct ScaleGrain {
  Granularity kind = Granularity::tensor;
  int rows = 1;  // tile: M; head_block: T tokens
  int cols = 1;  // group and tile: N
  bool operator==(const ScaleGrain&) const = default;
};
enum class ScaleKind : std::uint8_t {
  descale,     // amax / max: x ~ q * s
  multiplier,  // max / amax: x ~ q / s
};
enum class ScaleArith : std::uint8_t {
  fp32,        // one correctly rounded fp32 division
  reciprocal,  // amax * fp32(1 / max) (descale only); nvfp4: the tensor scale amax * fp32(1 / 2688)
               // (XLA's rewrite of a division by a constant, quotient=prescaled)
  fp64,        // the division in fp64 (amax and floor widened), rounded once to fp32 (torchao)
  fp32_satfinite,  // fp32 division; an infinite result (a tiny amax) becomes FLT_MAX
                   // (TransformerEngine compute_scale_from_amax's value_for_inf)
  input,           // the fp32 division rounded (RNE) to the input's dtype: torch's arithmetic on a
                   // bf16 / f16 amax (ModelOpt, compressed-tensors); fp32 for an f32 input
  reciprocal_multiplier,  // max * fp32(1 / amax): torch's `scalar / tensor` (multiplier only)
};
// The precision the quotient x / s (or x * s) is rounded to before the element cast.
enum class QuotientArith : std::uint8_t {
  fp32,   // one fp32 operation, then the element's rounding
  input,  // the fp32 operation rounded (RNE) to the input's dtype, then the element's rounding:
          // torch computing on a bf16 / f16 tensor (a double rounding)
};
// fp8.scaled's parameter "quotient" (int8's is Quotient).
enum class Fp8Quotient : std::uint8_t {
  divide,      // x / the descale, as stored (a correctly rounded division: the seed)
  reciprocal,  // x * fp32(1 / descale)
  multiply,    // x * the multiplier (torchao float8, TransformerEngine)
};
// The computed scale rounded to a power of two.
enum class ScalePow2 : std::uint8_t {
  none,
  down,       // the largest power of two <= s, exactly (TransformerEngine masks the mantissa bits)
  up,         // the smallest power of two >= s
  down_log2f, // 2^floor(fp32(log2 s)): torchao's exp2(floor(log2(s))), whose fp32 log2 rounds up
              // to k for s a few ulp below 2^k, giving 2^k > s there
};
enum class StoredScale : std::uint8_t {
  computed,  // scale.npy holds the scale the quotient uses
  inverse,   // scale.npy holds fp32(1 / it) (TransformerEngine's scale_inv)
};
enum class ZeroGroup : std::uint8_t {
  zero,   // amax == 0: scale 0.0, payload 0 (the seed)
  floor,  // amax == 0 goes through max(amax, amax_floor) like any other amax
  one,    // max(amax, amax_floor) == 0: scale 1.0, payload x * 1 (TransformerEngine current scaling)
  nan,    // amax == 0: the scale is 0 and stored, elements x / 0 (0 / 0: NaN codes; ModelOpt).
          // int8: any scale that comes out 0 is divided by as IEEE does: +-inf saturates to
          // 127 / the range's lowest, 0 / 0 gives 0 (ModelOpt's INT8QTensor)
  eps,    // a scale that comes out 0 (amax 0, or one that underflows) becomes the machine epsilon
          // of the scale's arithmetic (fp32 2^-23, bf16 2^-7, f16 2^-10; compressed-tensors)
  amax_one,  // an amax <= amax_floor is replaced by 1.0 (ModelOpt's fp8 fake quant)
  one_unless_positive,  // an amax that is not > 0 (0, or NaN) gives scale 1.0: transformers'
                        // FP8 torch.where(amax > 0, max / amax, 1); a positive amax as `floor`
};
enum class NonFiniteInput : std::uint8_t {
  reject,     // an error naming the first non-finite element (the seed presets)
  propagate,  // IEEE arithmetic as the peer does it (NaN amax, inf * 0, ...)
};
constexpr int kNvfp4Block = 16;  // nvfp4: elements per E4M3 block scale
enum class TensorScale : std::uint8_t {
  none,  // single level: block scales alone
  amax,  // two level: t = fp32(amax_tensor / (448 * 6)), a descale, block scales relative to t
  te,    // two level as TransformerEngine: S_enc = 448 * 6 / amax_tensor multiplies, amax is stored
  multiplier,  // two level, stored as a multiplier (compressed-tensors' global scale):
               // gs = fp32(2688 * fp32(1 / max(amax_tensor, 2^-126))), 1.0 where that is not finite;
               // with scale_arith=input both steps are rounded to the input's dtype (f16: the floor is
               // f16's smallest normal 2^-14) and the block scale is fp32(gs * D(amax / 6))
};
// nvfp4: the unrounded block scale s of a block amax with tensor_scale=amax (t a descale).
enum class BlockArith : std::uint8_t {
  split,  // (amax / 6) / t, two divisions (torchao)
  fused,  // amax / fp32(6 * t) (ModelOpt)
};
// nvfp4: what an unrounded block scale of 0 (an all-zero block) becomes.
enum class ZeroBlock : std::uint8_t {
  clamp,  // nothing of its own: the lower clamp block_min takes it (torchao)
  one,    // 1.0 before the clamp (ModelOpt's per_block_scale[== 0] = 1.0)
  eps,    // the E4M3 code 0 after the cast becomes E4M3's epsilon 0.125, code 0x20 (compressed-tensors)
};
// nvfp4 tensor_scale=te: TransformerEngine's "4over6" (FourOverSix): each block is quantized twice,
// under the block scale e4m3(1.5 * s) (the largest |x| maps to 4) and e4m3(s) (maps to 6), and
// keeps the one whose error is smaller (a tie keeps 6). The error is summed over the block's 16
// elements in order, in fp32, from 0: |v - x| (mae) or (v - x)^2 (mse), v = ((code value * s) *
// amax_tensor) / (6 * global_e4m3_max), as TE's reference computes it.
enum class FourOverSix : std::uint8_t { off, mae, mse };
// nvfp4: how an element meets its block's scale s and the tensor scale.
enum class Nvfp4Quotient : std::uint8_t {
  reciprocal,  // x * fp32(1 / s), two level x * fp32(fp32(1 / t) / s) (torchao)
  divide,      // x / fp32(d), d the block's whole descale: s * t (amax), s / gs (multiplier), s
               // (none); a NaN quotient (0 / 0 where the tensor scale is 0) is code 7, as
               // ModelOpt's table cast makes it (ModelOpt, compressed-tensors)
  prescaled,   // JAX's steps, as XLA computes them: x' = x * fp32(1 / t) first (t = 1 without a
               // tensor scale), the block scale e4m3(clamp(amax(x') * fp32(1 / 6), block_min, 448)),
               // then x' * fp32(1 / s) (a zero scale multiplies by inf), clamped to +-6; a NaN
               // quotient is code 0x8 (XLA's convert to E2M1)
};

// ---- The contract model (contracts "The contract model") ----------------------------------
// A contract is composed of specs, each deciding one part of the result, plus its family and
// the family's parameters that are not about elements or scales. The specs are the contract's
// public bases, so `c.block`, `c.element` read as before, and a step that needs one spec takes
// it alone (`const ElementSpec&`, `const ScaleSpec&`): a Contract converts to each. A field is
// meaningful only in the families whose parameters name it (params(c)); elsewhere it keeps its
// default and is never read.

// How the scale output encodes one scale: derived per contract (scale_encoding below), not a
// parameter of its own. Scale differences are counted in the encoding's own steps.
enum class ScaleEncoding : std::uint8_t {
  none,  // no scale output (hif4, pool)
  e8m0,  // u8 biased power-of-two exponents (MX)
  e4m3,  // u8 E4M3 codes (nvfp4 block scales)
  fp32,  // f32 values (int8 scale_store=f32, fp8.scaled)
  f16,   // f16 values (int8 scale_store=f16)
};

// The element spec: what one element's code is and how an input value becomes it, given the
// value already divided by (or multiplied with) its scale: the element format, its rounding,
// overflow and signed zero, the input's pre-rounding, and what non-finite inputs do. The int8
// families' element is int8 (int_rounding, range); nvfp4's is E2M1, fixed by the family.
struct ElementSpec {
  ElemFormat element = ElemFormat::e4m3;  // mx, fp8.scaled (e4m3 | e5m2)
  Rounding rounding = Rounding::rne;      // mx
  Overflow overflow = Overflow::saturate; // mx; fp8.scaled: a quotient past max (after rounding)
                                          // saturates, or is NaN (e4m3) / inf (e5m2) as ONNX's
                                          // QuantizeLinear with saturate=0
  SignedZero signed_zero = SignedZero::keep;  // mx, fp8.scaled, nvfp4
  Prequant prequant = Prequant::none;     // mx "prequant_round": the input's rounding, before all
  bool ftz = false;                       // mx, nvfp4: XLA:CPU's arithmetic (FTZ and DAZ on):
                                          // subnormal inputs read as zeros of their sign, and every
                                          // subnormal result of a scale or quotient step is flushed
                                          // to a zero of its sign
  IntRounding int_rounding = IntRounding::rne;  // int8
  int range = 127;                        // int8: 127: [-127, 127]; 128: [-128, 127]
  NonFiniteRule nonfinite = NonFiniteRule::zero;  // mx: a group holding NaN/inf (its scale byte too)
  NonFiniteInput nonfinite_input = NonFiniteInput::reject;  // fp8.scaled, nvfp4
  bool operator==(const ElementSpec&) const = default;
};

// The scale spec: which elements share one scale (the granularity: a group of N along an axis,
// a row, the tensor, a 2-D tile, a head block; the family row's grain reads these fields), how
// the scale is computed from their amax (the rule), how elements are divided or multiplied by
// it (the quotient), and how it is stored (the encoding, derived by scale_encoding(c), and the
// layout of the scale tensor).
struct ScaleSpec {
  // Granularity.
  int block = 32;                  // mx: elements per group along the last axis
  int token_block = 64;            // int8_block: tokens per (b, head) block
  int group = 32;                  // int8_group: elements per group along the last axis
  ScaleGrain granularity;          // fp8.scaled: tensor | row | group:N | tile:MxN | head_block:T
  int qdim = -1;                   // hif4: the axis its 64-element groups run along
  TailRule tail = TailRule::partial;  // mx: a partial last group, or an error

  // Rule: the scale from the amax.
  ScaleRule scale_rule = ScaleRule::floor;  // mx
  bool log2_fp32 = false;          // mx: floor(log2 amax) evaluated in fp32, as torch.log2 does
  bool scale_wrap = false;         // mx scale_rule=floor: below byte 0 the byte wraps modulo 256
                                   // (ggml's uint8 cast of a negative exponent) instead of clamping
                                   // to 0, and byte 255 is the scale 2^128, not NaN
  RatioOp ratio = RatioOp::divide; // mx rceil
  ScaleMode scale_mode = ScaleMode::after;  // int8
  float scale_min = 0.0f;          // int8
  float qmax = 127.0f;             // int8: the scale's divisor, 127 or 127.5 (compressed-tensors:
                                   // the bit range (127 - -128) / 2); the clamp is `range`'s
  ScaleKind scale_kind = ScaleKind::descale;  // fp8.scaled
  ScaleArith scale_arith = ScaleArith::fp32;  // fp8.scaled; nvfp4 (fp32 | input, with tensor_scale=multiplier);
                                              // int8 (fp32 | input)
  int round_mbits = -1;            // mx scale_rule=even: amax rounded to this many mantissa bits
                                   // (-1: the element's; compressed-tensors' MXFP8 rounds at 1)
  ScalePow2 scale_pow2 = ScalePow2::none;     // fp8.scaled
  double amax_floor = 0.0;         // fp8.scaled: max(amax, amax_floor) before the division; 0: none.
                                   // A double: torchao's 1e-12 is a Python float, compared in fp64
  ZeroGroup zero_group = ZeroGroup::zero;     // fp8.scaled; int8 (zero | eps | nan)
  BlockArith block_arith = BlockArith::split;  // nvfp4, tensor_scale=amax
  float block_min = 0x1p-6f;                   // nvfp4: block scales are clamped to [block_min, 448]
  ZeroBlock zero_block = ZeroBlock::clamp;     // nvfp4
  int block_rows = 1;                          // nvfp4: rows of a block scale's tile (1: 1x16; 16: 16x16,
                                               // TransformerEngine's weights), its scale in each row's slot
  FourOverSix four_over_six = FourOverSix::off;  // nvfp4 tensor_scale=te

  // Quotient: how an element meets its scale.
  Byte0Rule byte0 = Byte0Rule::flush;              // mx: what scale byte 0 divides by
  bool finite_products = false;    // mx: an element is the nearest value v whose product v * scale
                                   // is finite in fp32 (ggml compares x with each v * scale, so a
                                   // product that overflows is never chosen: E2M1's 4 and 6 under
                                   // byte 253)
  Quotient quotient = Quotient::divide;            // int8 "quotient"
  Fp8Quotient fp8_quotient = Fp8Quotient::divide;  // fp8.scaled "quotient"
  QuotientArith quotient_arith = QuotientArith::fp32;  // mx, fp8.scaled, int8 (with quotient=divide)
  Nvfp4Quotient nvfp4_quotient = Nvfp4Quotient::reciprocal;  // nvfp4 "quotient"

  // Storage.
  ScaleStore scale_store = ScaleStore::f32;  // int8: the scale's IEEE width (encoding fp32 | f16)
  StoredScale stored = StoredScale::computed;  // fp8.scaled: the scale or its reciprocal
  ScaleLayout layout = ScaleLayout::rowmajor;  // mx: where each scale byte sits
  Packing packing = Packing::adjacent;         // mx e2m1: which two codes share a payload byte

  bool operator==(const ScaleSpec&) const = default;
};

// The tensor scale spec: an optional second level, one fp32 scale for the whole tensor (an f32 []
// output, "tensor_scale") that the block scales are relative to (nvfp4; the others have none).
struct TensorScaleSpec {
  TensorScale tensor_scale = TensorScale::none;
  int global_e4m3_max = 448;  // nvfp4 tensor_scale=te: S_enc = (global_e4m3_max * 6) / amax (4over6's
                              // tensor scale keeps the block scales below 256)
  bool operator==(const TensorScaleSpec&) const = default;
};

struct Contract : ElementSpec, ScaleSpec, TensorScaleSpec {
  std::string preset;  // the preset it was built from ("" for a hand-made contract)
  Family family = Family::mx;

  // Family parameters that decide neither elements nor scales.
  std::int64_t budget = 1 << 20;   // int8_token: working-buffer budget in bytes (which pass runs)
  std::int64_t pool = 64;          // pool: P, sequence positions per cell
  PoolDivisor divisor = PoolDivisor::true_length;  // pool
  DType pool_out = DType::f32;     // pool: f32, bf16 or f16

  bool operator==(const Contract&) const = default;
};

// The encoding of c's scale output: its family row's (contracts/family_table), int8's from
// scale_store. none for the families without scales.
ScaleEncoding scale_encoding(const Contract& c);
// The dtype a scale of encoding e is stored as: u8 (e8m0, e4m3), f32, f16; throws for none.
DType scale_dtype(ScaleEncoding e);

// Named presets.
std::vector<std::string> preset_names();
std::string preset_description(const std::string& name);
// How a preset's bytes are verified: "peer" (against the running peer in the peer suite, in CI),
// "seed" (the seeds' contracts and their check values), "source" (modelled from reading the
// system's source only: no running peer here).
std::string preset_verified(const std::string& name);
// The stack a preset reproduces ("torchao", "modelopt", ...: src/contracts/presets/ has one file
// per stack), and every stack as (key, what it is in words), in `qexact presets` order.
std::string preset_stack(const std::string& name);
std::vector<std::pair<std::string, std::string>> preset_stacks();
Contract make_preset(const std::string& name);  // throws bad_argument on an unknown name

// Parameters by name. `params` lists the family's parameters with their current values in a
// stable order; `set_param` parses and validates one "key=value" (or key, value) override.
std::vector<std::pair<std::string, std::string>> params(const Contract& c);
void set_param(Contract& c, const std::string& key, const std::string& value);
void set_param(Contract& c, const std::string& key_eq_value);
// Every value an enumerated or boolean parameter can take, in a stable order (each accepted by
// set_param); empty for a numeric parameter (block, group, scale_min, ...) and an unknown key.
std::vector<std::string> param_choices(const std::string& key);
// The values key takes in family f (each accepted by set_param on a contract of that family):
// "quotient" is divide|reciprocal|inv_scale for int8, divide|reciprocal|multiply for fp8.scaled;
// "element" is e4m3|e5m2 for fp8.scaled. The one-argument form lists every family's values.
std::vector<std::string> param_choices(Family f, const std::string& key);
// Throws bad_argument if the combination of parameters is not a contract qexact implements.
void validate(const Contract& c);

// Builds a preset and applies overrides ("key=value" strings), then validates.
Contract make_contract(const std::string& preset, const std::vector<std::string>& overrides = {});

}  // namespace qexact
