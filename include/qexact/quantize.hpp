// The quantizers' public entry points. Each is *checked*: it validates the contract, the shape
// and (where the contract is finite-only) the values before producing anything, and throws
// qexact::Error naming the problem. Inputs are f32, bf16 or f16 views with any strides.
//
// Engine::fast (the default) runs the SIMD + multi-threaded kernels; Engine::reference runs the
// scalar reference quantizers, written to be obviously correct and independent of the kernels.
// Both give the same bytes for every input: the tests and `qexact conform` check it.
#pragma once
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

enum class Engine { fast, reference };
const char* engine_name(Engine e);
Engine parse_engine(const std::string& name);  // "fast" or "reference"

struct RunOptions {
  Engine engine = Engine::fast;
  // Threads for the fast engine: > 0 exactly that many; 0 the environment's QEXACT_THREADS,
  // else OpenMP's default (one per core). Results never depend on it.
  int threads = 0;
};
// The thread count a RunOptions resolves to (>= 1).
int resolve_threads(const RunOptions& o);

struct QuantResult {
  Tensor payload;       // MX, fp8.scaled, nvfp4: u8 codes (E2M1 packed two per byte); int8 families: i8
  Tensor scale;         // MX: u8 E8M0 in the contract's layout; int8: f32 (or f16 when scale_store=f16);
                        // fp8.scaled: f32; nvfp4: u8 E4M3 codes
  std::string path;     // which implementation path ran: "groupwise", "single_pass", "two_pass_chunked"
  Tensor tensor_scale;  // nvfp4 tensor_scale=amax (t) or te (the amax): f32 []; otherwise empty

  // The outputs by name, in output_specs order: payload, scale, then tensor_scale where the
  // contract produces one.
  std::vector<std::pair<std::string, const Tensor*>> named() const;
};

// What an output's elements are beyond the type that stores them: what a reader needs to view
// the bytes as values (a checkpoint's safetensors dtype, a torch or numpy dtype).
enum class OutputCodes : std::uint8_t {
  e4m3, e5m2, e2m3, e3m2,  // one FP8 / FP6 element code per byte (FP6 in the low 6 bits)
  e2m1_pairs,              // two E2M1 codes per byte, element 2k in the low nibble
  e2m1_halves,             // two E2M1 codes per byte, ggml's order (packing=halves): byte j of a
                           // group of B holds elements j (low nibble) and j + B/2
  e8m0,                    // biased power-of-two exponents (MX scales)
  int8, f32, f16,          // the stored type is the value
};
// "e4m3", "e5m2", "e2m3", "e3m2", "e2m1x2", "e2m1x2_halves", "e8m0", "int8", "f32", "f16".
const char* output_codes_name(OutputCodes codes);

// One output a contract produces for an input shape: its file stem (payload.npy, scale.npy,
// tensor_scale.npy; a checkpoint's <tensor>.<name>), dtype, what its elements are, and shape.
struct OutputSpec {
  std::string name;
  DType dtype;
  OutputCodes codes;
  Shape shape;
};
// Every output of a quantizing contract for input shape `x`, in a stable order; checks the shape
// (rank, divisibility) and throws bad_argument naming the problem.
std::vector<OutputSpec> output_specs(const Contract& c, const Shape& x);
// Scale and payload shapes the contract gives an input of shape `x` (output_specs' first two).
Shape payload_shape(const Contract& c, const Shape& x);
Shape scale_shape(const Contract& c, const Shape& x);

QuantResult quantize(const Contract& c, const TensorView& x, const RunOptions& o = {});

// Quantize with given scales (what ONNX's QuantizeLinear does, or a device's scales): the
// contract's element steps under `scale`, which has exactly the dtype and shape of the scale
// output (scale_shape; MX: u8 E8M0 bytes in the contract's layout; nvfp4: u8 E4M3 codes;
// fp8.scaled and int8: f32 as stored, e.g. the multiplier or its inverse, per the contract).
// Each domain's payload is what the contract makes of its elements with that scale; a given
// scale equal bit for bit to the contract's own is used as the contract's own (so given = own
// reproduces quantize). The non-finite rules still read the input. The result's scale is a copy
// of `scale`; nvfp4's tensor scale is the computed one. The fast engine implements the
// fp8.scaled family; the others run on Engine::reference only (the fast engine refuses them by
// name).
QuantResult quantize_with_scales(const Contract& c, const TensorView& x, const TensorView& scale,
                                 const RunOptions& o = {});

// fp32 values of a quantized tensor of original shape `x_shape`.
Tensor dequantize(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                  const RunOptions& o = {});
// The same for a contract with a tensor scale (nvfp4 tensor_scale=amax or te): `tensor_scale` is its
// f32 [] output. For any other contract it must be an empty view (data == nullptr).
Tensor dequantize(const Contract& c, const TensorView& payload, const TensorView& scale,
                  const TensorView& tensor_scale, const Shape& x_shape, const RunOptions& o = {});

// ---- HiFloat4 (contracts §5) ----
// FP -> HiF4 -> FP along axis qdim (negative allowed); output has x's shape and dtype.
Tensor hifloat4_fake_quant(const TensorView& x, int qdim = -1, const RunOptions& o = {});
struct Hif4Packed {
  Tensor scale;  // u8 [rows, cols/64, 4]
  Tensor value;  // u8 [rows, cols/2]
};
Hif4Packed hif4_pack(const TensorView& x, const RunOptions& o = {});  // 2-D, cols % 64 == 0
Tensor hif4_unpack(const TensorView& scale, const TensorView& value, const RunOptions& o = {});  // fp32

// ---- Into caller-owned outputs (out=) ----
// The same results written into memory the caller owns, with no allocation of the outputs.
// Each output must be C-contiguous with exactly the dtype and shape the allocating form returns
// (quantize: payload_shape/scale_shape and QuantResult's dtypes; dequantize and hif4_unpack:
// f32; hifloat4_fake_quant: x's dtype and shape), and must share no byte with an input or with
// another output. The contract, the input shapes and those output checks all run before any
// output byte is written, and throw bad_argument naming the output. Every byte of every output
// is written (layout padding as zeros). A value error found while the kernel runs (a NaN under
// a finite-only int8 contract) still throws, but the outputs' contents are then unspecified.
// quantize_into returns QuantResult::path.
std::string quantize_into(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                          const MutableTensorView& scale, const RunOptions& o = {});
// With a tensor-scale output (nvfp4 tensor_scale=amax or te: f32 []); an empty view (data == nullptr)
// for contracts without one.
std::string quantize_into(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                          const MutableTensorView& scale, const MutableTensorView& tensor_scale,
                          const RunOptions& o = {});
// x_shape is out's shape.
void dequantize_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                     const MutableTensorView& out, const RunOptions& o = {});
void dequantize_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                     const TensorView& tensor_scale, const MutableTensorView& out, const RunOptions& o = {});
void hifloat4_fake_quant_into(const TensorView& x, const MutableTensorView& out, int qdim = -1,
                              const RunOptions& o = {});
void hif4_pack_into(const TensorView& x, const MutableTensorView& scale, const MutableTensorView& value,
                    const RunOptions& o = {});
void hif4_unpack_into(const TensorView& scale, const TensorView& value, const MutableTensorView& out,
                      const RunOptions& o = {});

// ---- int8 per token (contracts §4) path selection ----
enum class TokenPath { single_pass, two_pass_chunked };
const char* token_path_name(TokenPath p);
// The one selector every caller uses: single-pass when a whole row of `row_bytes` fits `budget`.
TokenPath select_token_path(std::int64_t row_bytes, std::int64_t budget);

}  // namespace qexact
