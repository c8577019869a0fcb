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
};
const char* family_name(Family f);

// ---- MX parameters --------------------------------------------------------------------
enum class ScaleRule : std::uint8_t {
  floor,  // 2^(floor(log2 amax) - emax_elem): the fp32 exponent of amax minus emax_elem
  rceil,  // the fp32 ratio amax/max_elem rounded up to a power of two
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
};
// Whether an element that rounds to zero keeps its sign.
enum class SignedZero : std::uint8_t {
  keep,       // "true": negative values and -0.0 give the negative zero code
  drop,       // "false": every zero is +0
  underflow,  // a negative value that rounds to zero keeps its sign; a -0.0 input gives +0
              // (microxcaling: sign(x) * floor(|v| + 0.5), with torch.sign(-0.0) == +0)
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

struct Contract {
  std::string preset;  // the preset it was built from ("" for a hand-made contract)
  Family family = Family::mx;

  // mx
  ElemFormat element = ElemFormat::e4m3;
  int block = 32;
  ScaleRule scale_rule = ScaleRule::floor;
  bool log2_fp32 = false;          // floor(log2 amax) evaluated in fp32, as torch.log2 does
  Rounding rounding = Rounding::rne;
  Overflow overflow = Overflow::saturate;
  NonFiniteRule nonfinite = NonFiniteRule::zero;
  Byte0Rule byte0 = Byte0Rule::flush;
  SignedZero signed_zero = SignedZero::keep;
  Prequant prequant = Prequant::none;
  ScaleLayout layout = ScaleLayout::rowmajor;
  TailRule tail = TailRule::partial;
  RatioOp ratio = RatioOp::divide;

  // int8 (block, token, group)
  int token_block = 64;            // int8_block: tokens per block
  int group = 32;                  // int8_group: elements per group
  ScaleMode scale_mode = ScaleMode::after;
  float scale_min = 0.0f;
  Quotient quotient = Quotient::divide;
  IntRounding int_rounding = IntRounding::rne;
  int range = 127;                 // 127: [-127, 127]; 128: [-128, 127]
  ScaleStore scale_store = ScaleStore::f32;
  std::int64_t budget = 1 << 20;   // int8_token: working-buffer budget in bytes

  // hif4
  int qdim = -1;

  // pool
  std::int64_t pool = 64;          // P: sequence positions per cell
  PoolDivisor divisor = PoolDivisor::true_length;
  DType pool_out = DType::f32;     // f32, bf16 or f16
};

// Named presets.
std::vector<std::string> preset_names();
std::string preset_description(const std::string& name);
// How a preset's bytes are verified: "peer" (against the running peer in the peer suite, in CI),
// "seed" (the seeds' contracts and their check values), "source" (modelled from reading the
// system's source only: no running peer here).
std::string preset_verified(const std::string& name);
Contract make_preset(const std::string& name);  // throws bad_argument on an unknown name

// Parameters by name. `params` lists the family's parameters with their current values in a
// stable order; `set_param` parses and validates one "key=value" (or key, value) override.
std::vector<std::pair<std::string, std::string>> params(const Contract& c);
void set_param(Contract& c, const std::string& key, const std::string& value);
void set_param(Contract& c, const std::string& key_eq_value);
// Every value an enumerated or boolean parameter can take, in a stable order (each accepted by
// set_param); empty for a numeric parameter (block, group, scale_min, ...) and an unknown key.
std::vector<std::string> param_choices(const std::string& key);
// Throws bad_argument if the combination of parameters is not a contract qexact implements.
void validate(const Contract& c);

// Builds a preset and applies overrides ("key=value" strings), then validates.
Contract make_contract(const std::string& preset, const std::vector<std::string>& overrides = {});

}  // namespace qexact
