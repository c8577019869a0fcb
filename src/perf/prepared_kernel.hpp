// One benchmarked kernel made ready to run on N elements: its contract, its input tensors
// (seeded pseudo-random finite values; for dequantize, the payload and scale the fast engine
// made of them) and the bytes one call reads and writes.
//
// Bytes per element, counted from the tensors the call reads and the tensors it returns
// (so layout padding counts where the contract stores it):
//   quantize    read:  size of the input dtype (bf16 2, f32 4)
//               write: every output of output_specs: payload (1 byte; E2M1 1/2) + scale (MX:
//                      1 E8M0 byte per block in the contract's layout; int8: 4 or 2 bytes per
//                      row, token block or group; fp8.scaled: 4 per scale of its granularity;
//                      nvfp4: 1 E4M3 byte per 16) + the 4-byte tensor scale where there is one
//   dequantize  read:  the quantize outputs as above; write: 4 (fp32)
//   fake_quant  read and write: size of the input dtype
//   pack        read:  size of the input dtype; write: 1/2 (value) + 4/64 (scale bytes per block)
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "perf/kernel_list.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::perf {

struct TensorSpec {
  DType dtype;
  Shape shape;
  std::int64_t bytes() const;
};

struct Traffic {
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  std::int64_t total() const { return bytes_read + bytes_written; }
};

// The tensors a call of `k` on a tensor of shape `x` reads and returns, without running it.
std::vector<TensorSpec> input_specs(const KernelSpec& k, const Shape& x);
std::vector<TensorSpec> output_specs(const KernelSpec& k, const Shape& x);
Traffic traffic(const KernelSpec& k, const Shape& x);

// Finite nonzero values in C order, random sign and mantissa, magnitudes in the top four binades
// of a range that changes from one run of 64 elements to the next (from [2^-11, 2^-7) to
// [2^4, 2^8)), so that blocks get different scales. Deterministic in `seed`.
Tensor pseudo_random_tensor(DType dtype, const Shape& shape, std::uint64_t seed);

class PreparedKernel {
 public:
  PreparedKernel(const KernelSpec& spec, std::int64_t elements);

  const KernelSpec& spec() const { return spec_; }
  std::int64_t elements() const { return elements_; }
  const Shape& shape() const { return shape_; }
  Traffic traffic() const { return perf::traffic(spec_, shape_); }
  // The dtype of the (main) tensor the call reads: the source dtype, or the payload's for
  // dequantize.
  DType input_dtype() const;

  // One call through the public API. Returns its output tensors (output_specs order); a
  // benchmark drops them: their allocation, first touch and release are part of the call, as for
  // any caller of the API.
  std::vector<Tensor> run(const RunOptions& o) const;
  // Allocates and releases tensors like the ones run() returns: the part of run() that is the
  // API's allocation, measured on its own.
  void allocate_outputs() const;

 private:
  KernelSpec spec_;
  std::int64_t elements_;
  Shape shape_;
  Contract contract_;
  std::vector<TensorSpec> outputs_;
  Tensor x_;                // quantize, fake_quant, pack
  Tensor payload_, scale_, tensor_scale_;  // dequantize (tensor_scale_ empty unless the contract has one)
};

}  // namespace qexact::perf
