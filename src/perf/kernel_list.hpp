// The kernels `qexact bench` and the Google Benchmark executables (bench/) measure: one X-macro
// list, so both always measure the same set, called the same way (the public API with
// RunOptions; see prepared_kernel.hpp for the call each op makes).
#pragma once
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::perf {

// What a benchmarked kernel does, i.e. which public entry point it calls:
//   quantize    qexact::quantize(contract, x, options)
//   dequantize  qexact::dequantize(contract, payload, scale, x_shape, options)
//   fake_quant  qexact::hifloat4_fake_quant(x, qdim, options)
//   pack        qexact::hif4_pack(x, options)
enum class Op { quantize, dequantize, fake_quant, pack };
const char* op_name(Op op);

// How a tensor of N elements is shaped (N must be a multiple of kElementQuantum):
//   rows   (N / 4096, 4096): rows of a typical hidden size
//   heads  (1, N / 2048, 16, 128): (B, S, heads, D), 16 heads of 128, N / 2048 tokens
enum class Layout { rows, heads };
inline constexpr std::int64_t kElementQuantum = 4096;
Shape layout_shape(Layout layout, std::int64_t elements);

// X(id, preset, params, op, source dtype, layout, target ratio to copy bandwidth at 2 threads out
// of cache; 0 = no target): one row per kind of kernel path (MX on the fixed E4M3 / E2M1 grids
// and the general one, int8 per token / block / group, fp8.scaled per row / group / tile / head
// block / tensor and in the input's dtype, nvfp4 with and without a tensor scale, 16x16 tiles
// and JAX's prescaled quotient). Targets: issue 24's, 0.9 for MXFP8, MXFP4, int8 and every
// dequantize, 0.8 for the other quantizers. params: "" or one "key=value" override of the preset (a variant such
// as nvfp4's tensor_scale=amax). The source dtype is the float dtype of the tensor quantized (for
// dequantize: the tensor its outputs were made from).
#define QEXACT_PERF_KERNELS(X)                                                                         \
  X(mxfp8_ascend_quantize, "mxfp8.ascend", "", quantize, bf16, rows, 0.9)                              \
  X(mxfp8_torchao_floor_quantize, "mxfp8.torchao.floor", "", quantize, bf16, rows, 0.9)                \
  X(mxfp8_te_quantize, "mxfp8.te", "", quantize, bf16, rows, 0.9)                                      \
  X(mxfp4_ocp_quantize, "mx.ocp.e2m1", "", quantize, bf16, rows, 0.9)                                  \
  X(mxfp4_ggml_quantize, "mxfp4.ggml", "", quantize, f32, rows, 0.9)                                   \
  X(mxfp6_ocp_quantize, "mx.ocp.e3m2", "", quantize, bf16, rows, 0.8)                                  \
  X(int8_token_blaze_quantize, "int8.token.blaze", "", quantize, bf16, rows, 0.9)                      \
  X(int8_ct_token_quantize, "int8.ct.token", "", quantize, bf16, rows, 0.9)                            \
  X(int8_modelopt_channel_quantize, "int8.modelopt.channel", "", quantize, bf16, rows, 0.9)            \
  X(int8_block_ascend_quantize, "int8.block.ascend", "", quantize, bf16, heads, 0.9)                   \
  X(int8_ct_group_quantize, "int8.ct.group", "", quantize, bf16, rows, 0.9)                            \
  X(q8_0_ggml_quantize, "q8_0.ggml", "", quantize, f32, rows, 0.9)                                     \
  X(fp8_ascend_token_quantize, "fp8.ascend.token", "", quantize, bf16, rows, 0.8)                      \
  X(fp8_ct_channel_quantize, "fp8.ct.channel", "", quantize, bf16, rows, 0.8)                          \
  X(fp8_deepseek_1x128_quantize, "fp8.deepseek.1x128", "", quantize, bf16, rows, 0.8)                  \
  X(fp8_deepseek_128x128_quantize, "fp8.deepseek.128x128", "", quantize, bf16, rows, 0.8)              \
  X(fp8_ascend_block_quantize, "fp8.ascend.block", "", quantize, bf16, heads, 0.8)                     \
  X(fp8_torchao_tensorwise_quantize, "fp8.torchao.tensorwise", "", quantize, bf16, rows, 0.8)          \
  X(nvfp4_torchao_quantize, "nvfp4.torchao", "", quantize, bf16, rows, 0.8)                            \
  X(nvfp4_torchao_amax_quantize, "nvfp4.torchao", "tensor_scale=amax", quantize, bf16, rows, 0.8)      \
  X(nvfp4_modelopt_quantize, "nvfp4.modelopt", "", quantize, bf16, rows, 0.8)                          \
  X(nvfp4_te_2d_quantize, "nvfp4.te.2d", "", quantize, bf16, rows, 0.8)                                \
  X(nvfp4_jax_quantize, "nvfp4.jax", "", quantize, bf16, rows, 0.8)                                    \
  X(hif4_fake_quant, "hif4", "", fake_quant, bf16, rows, 0.8)                                          \
  X(hif4_pack, "hif4", "", pack, bf16, rows, 0.8)                                                      \
  X(mxfp8_ascend_dequantize, "mxfp8.ascend", "", dequantize, bf16, rows, 0.9)                          \
  X(mxfp4_ocp_dequantize, "mx.ocp.e2m1", "", dequantize, bf16, rows, 0.9)                              \
  X(int8_token_blaze_dequantize, "int8.token.blaze", "", dequantize, bf16, rows, 0.9)                  \
  X(int8_block_ascend_dequantize, "int8.block.ascend", "", dequantize, bf16, heads, 0.9)               \
  X(q8_0_ggml_dequantize, "q8_0.ggml", "", dequantize, f32, rows, 0.9)                                 \
  X(fp8_deepseek_1x128_dequantize, "fp8.deepseek.1x128", "", dequantize, bf16, rows, 0.9)              \
  X(nvfp4_torchao_amax_dequantize, "nvfp4.torchao", "tensor_scale=amax", dequantize, bf16, rows, 0.9)

struct KernelSpec {
  const char* id;
  const char* preset;
  const char* params;  // "" or one "key=value" override
  Op op;
  DType source;
  Layout layout;
  double target_ratio;  // 0: none
};

inline constexpr KernelSpec kKernels[] = {
#define QEXACT_PERF_KERNEL_SPEC(id, preset, params, op, dtype, layout, target) \
  KernelSpec{#id, preset, params, Op::op, DType::dtype, Layout::layout, target},
    QEXACT_PERF_KERNELS(QEXACT_PERF_KERNEL_SPEC)
#undef QEXACT_PERF_KERNEL_SPEC
};

// The contract a kernel runs: its preset with its params.
Contract kernel_contract(const KernelSpec& k);
// The preset as the tables show it: "nvfp4.torchao" or "nvfp4.torchao tensor_scale=amax".
std::string kernel_preset_label(const KernelSpec& k);

// The kernels of the given presets, in list order (all of them when `presets` is empty).
// Throws bad_argument naming a preset that has no benchmarked kernel.
std::vector<KernelSpec> select_kernels(const std::vector<std::string>& presets);

}  // namespace qexact::perf
