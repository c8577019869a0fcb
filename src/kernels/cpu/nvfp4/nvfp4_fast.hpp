// Fast nvfp4 kernels (contracts §9.2), the entry points of nvfp4_fast.cpp; the rules every fast
// entry point follows (checks, threads, determinism, the _into forms) are in
// kernels/cpu/README.md.
#pragma once
#include <cstdint>
#include <string>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

// tensor_scale is null unless the contract has a tensor scale (tensor_scale=amax or te: one
// f32). tensor_amax (a contract with a tensor scale only): the amax the ranks agreed on for the
// whole tensor x is a shard of, used instead of x's, as for fp8.scaled.
std::string quantize_nvfp4_into(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                                float* tensor_scale, int threads, const float* tensor_amax = nullptr);
// quantize_nvfp4_into for a caller that has already validated `c`, checked that x is a float view
// and checked the outputs against output_specs(c, x.shape) (quantize.cpp's front door): nothing
// is checked or derived again. tensor_scale.data is null where the contract has none.
std::string quantize_nvfp4_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                      const MutableTensorView& scale, const MutableTensorView& tensor_scale,
                                      int threads);
void dequantize_nvfp4_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                           const TensorView& tensor_scale, const Shape& x_shape, float* out, int threads);

}  // namespace qexact::fast
