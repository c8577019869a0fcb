// Recomputable predicates of the conformance cases (contracts §8.4): each directed case names
// the property its input is built to have ("amax is exactly 2^k in >= 1 group", "at least one
// exact tie", ...) and a function that counts how often the property holds, recomputed from the
// input alone. A case whose count is below its target is not coverage but a failure.
//
// Predicates about "the scale" (exact ties, int8 saturation, HiF4 code clamping) read the
// decoded scales from a quantizer's output when one is observed (conform passes the
// reference's), and otherwise from the family's nominal scale, so that the generator can check
// its cases without running a quantizer:
//   mx          2^(floor(log2 amax) - emax_elem), from the exponent bits (the OCP floor rule)
//   int8        the contract's scale formula (scale_mode, scale_min, scale_store), qmax = 127
//   hif4        the E6M2 scale and micro-exponent bits of contracts §5
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

// The scale groups a contract forms on an input shape, numbered in the order of its scale
// tensor (MX: row-major (row, group) before any layout; int8.block: (b, head, token block);
// int8.token: rows; int8.group: (row, group); HiF4: (row, 64-block); nvfp4: (row, 16-block);
// fp8.scaled: the C order of its scale tensor, for every granularity). Members are C-order flat
// indices in the group's reduction order. A partial last group has only its real elements.
class Groups {
 public:
  Groups(const Contract& c, const Shape& shape);
  std::int64_t count() const { return count_; }
  std::int64_t size(std::int64_t g) const;
  std::int64_t member(std::int64_t g, std::int64_t i) const;

 private:
  // Scale domains that are not runs along the last axis (int8.block and fp8.scaled head_block:T,
  // tensor, tile:MxN): members listed per domain, from contracts/scale_grain's element -> scale
  // map of the family row's grain.
  std::vector<std::int64_t> offsets_, members_;
  Shape shape_;
  std::int64_t len_ = 0;         // elements of a full group along the last axis
  std::int64_t per_row_ = 0;     // groups per row (along the last axis) or token blocks per head
  std::int64_t count_ = 0;
};

// What a quantizer produced for a case, for the predicates that read scales from it.
struct Observed {
  const QuantResult* quant = nullptr;  // MX and int8 families
  const Hif4Packed* hif4 = nullptr;    // HiF4
};

struct Predicate {
  std::string name;
  std::string description;        // one line: what a hit is
  std::int64_t min_hits = 1;      // the case's target: at least this many hits
  std::function<std::int64_t(const Contract&, const TensorView&, const Observed&)> count;
};

// Scale of an int8 group of max |x| = amax by the contract's formula (scale_mode, scale_min,
// scale_store; qmax = 127 for both ranges), as stored.
float int8_nominal_scale(const Contract& c, float amax);

// fp8.scaled: the scale the quotient uses (descale or multiplier, after amax_floor, scale_arith
// and scale_pow2; before `stored`) for a group of max |x| = amax; 0 for an all-zero group under
// zero_group=zero.
float fp8_nominal_scale(const Contract& c, float amax);
// nvfp4: the tensor scale t its block steps use (amax: fp32(tensor_amax / 2688); te:
// S_enc = 2688 / tensor_amax, capped at FLT_MAX, 1 for a zero amax; none: 0), a block's scale
// before E4M3 rounding (fp32(amax / 6) [/ t]; te: amax * (S_enc * fp32(1/6))), and its decoded
// E4M3 scale (clamped to [2^-6, 448]; te: saturated, no lower clamp).
float nvfp4_nominal_tensor_scale(const Contract& c, float tensor_amax);
float nvfp4_unrounded_block_scale(const Contract& c, float amax, float tensor_scale);
float nvfp4_nominal_block_scale(const Contract& c, float amax, float tensor_scale);

// Fraction bits of the precision amax is compared in: 7 (bf16) where the input or the MX
// contract's prequant_round is bf16, 10 for f16 input, else 23.
int working_fraction_bits(const Contract& c, DType input);

// The largest code magnitude a group's scale maps amax onto: the element max (MX, fp8.scaled),
// 127 (int8), 7 (HiF4), 6 (nvfp4).
float top_code(const Contract& c);

// ---- the predicates of §8.4 ------------------------------------------------------------
// "Value as the contract quantizes it": MX contracts with prequant_round = bf16 see bf16(x).
Predicate all_equal();                // groups whose elements all equal the tensor's first value
Predicate exact_ties();               // elements on a midpoint of two adjacent codes (family-specific)
Predicate amax_pow2();                // groups whose amax is exactly 2^k
Predicate amax_above_pow2();          // groups whose amax is the next value above 2^k (working precision)
Predicate all_zero_groups();          // groups of zeros only
Predicate all_negative_groups();      // groups whose elements are all < 0
Predicate big_small_mix();            // groups with max |x| >= 2^16 * min non-zero |x|
Predicate bf16_subnormals();          // elements that are non-zero bf16 subnormals
Predicate elements_equal(const std::string& name, float magnitude);   // |x| == magnitude as stored
Predicate group_amax_equals(const std::string& name, float amax);     // groups of that amax
enum class NonFinite { pos_inf, neg_inf, nan };
enum class Position { first, middle, last };
const char* non_finite_name(NonFinite k);  // "pos_inf", "neg_inf", "nan"
const char* position_name(Position p);     // "first", "middle", "last"
Predicate non_finite_at(NonFinite kind, Position pos);
Predicate saturation();               // elements past the largest code (family-specific)
Predicate tail();                     // partial groups (or, int8.token, rows with Q % 16 != 0)
Predicate max_outside_first_vector(); // groups whose max |x| lies past their first 16 elements
Predicate scale_marker();             // MX: groups whose scale byte is unique and at its offset
Predicate amax_sweep();               // groups whose amax is top * 2^k (top: elem max, 127, 7)
Predicate negative_zero();            // elements that are -0.0
Predicate bf16_binade_cross();        // groups whose fp32 amax changes binade under bf16 rounding
Predicate empty_rows();               // int8.token: R == 0
// §9 (fp8.scaled, nvfp4): x as the contract scales it, by the group's scale.
Predicate scaled_subnormals();        // elements scaled into the element format's subnormal range
Predicate block_scale_ties();         // nvfp4 blocks whose fp32(amax / 6) [/ t] is an E4M3 midpoint
Predicate block_scale_clamped();      // nvfp4 blocks whose fp32(amax / 6) [/ t] is below 2^-6 (the clamp)
Predicate tensor_amax_between(const std::string& name, float lo, float hi);  // lo <= max |x| <= hi

}  // namespace qexact::conformance
