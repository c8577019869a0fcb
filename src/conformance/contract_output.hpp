// What a contract produces for an input, the way the conformance lab needs it: the quantizing
// families give a payload and a scale; HiF4 gives its fake-quant output (x's shape and dtype);
// pool.mean gives its pooled means. One entry point, so that compare (and infer) run every
// contract alike.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

enum class OutputKind {
  payload_scale,  // mx, int8.block, int8.token, int8.group
  single,         // hif4 (fake-quant), pool (pooled means)
};
OutputKind output_kind(const Contract& c);

struct ContractOutput {
  Tensor payload, scale;  // payload_scale
  Tensor output;          // single
  Tensor tensor_scale;    // payload_scale with a tensor scale (nvfp4 tensor_scale=amax); else empty
};

// Runs c on x (checked: throws qexact::Error on bad input, like the entry points it calls).
ContractOutput run_contract(const Contract& c, const TensorView& x, const RunOptions& o);

}  // namespace qexact::conformance
