"""qexact for PyTorch: ``torch.ops.qexact.*`` custom ops, differentiable fake quantization and a
module for quantization-aware training. Importing this module registers the ops; the
package's functions import it themselves when they are given a tensor.

Tensors in, tensors out, on the CPU and without copies: payloads come back as
``torch.float8_e4m3fn`` / ``float8_e5m2`` (MXFP8, fp8.scaled), ``torch.float4_e2m1fn_x2`` (MXFP4
and nvfp4, two codes per byte, element 2k in the low nibble), ``uint8`` (MXFP6, one code per
byte, as torchao keeps them) or ``int8``; MX scales as ``torch.float8_e8m0fnu``, nvfp4 block
scales as ``torch.float8_e4m3fn``, fp8.scaled scales and nvfp4's tensor scale as ``float32``,
int8 scales as ``float32`` (``float16`` with ``scale_store="f16"``); HiF4 storage as ``uint8``;
values as ``float32`` or x's dtype.
A tensor on another device raises TypeError naming it (qexact computes on the CPU); the ops
given meta tensors (as ``torch.compile`` traces them) compute only shapes and dtypes.

Ops (``torch.ops.qexact.<name>``, each with a fake kernel, so ``torch.compile(fullgraph=True)``
traces them; their output shapes are computed from torch's symbolic sizes, so a compiled
function whose batch or sequence size changes traces once, ``dynamic=True`` or not):

* ``quantize(x, preset, overrides, engine, threads) -> (payload, scale)`` (contracts without a
  tensor scale)
* ``quantize_outputs(x, preset, overrides, engine, threads) -> [payload, scale(, tensor_scale)]``:
  every output by name, in ``qexact.outputs`` order (any quantizing contract)
* ``dequantize(payload, scale, shape, preset, overrides, engine, threads, tensor_scale=None) -> float32``
* ``fake_quant(x, preset, overrides, qdim, engine, threads) -> x's dtype`` (differentiable)
* ``hif4_pack(x, engine, threads) -> (scale, value)``, ``hif4_unpack(scale, value, engine, threads)``

``overrides`` are ``"key=value"`` strings, as the CLI's ``--param``; the functions below take
them as keywords.

Gradients (straight-through estimator): ``fake_quant``'s gradient with respect to x is the
incoming gradient, unchanged, for every element, saturated ones included. An element beyond
the saturation bound (``max_code × scale``, e.g. 500 in an MXFP8 floor-scaled block whose scale
is 1: it comes back as 448) gets the gradient an unquantized element would get, not zero: the
bound of a block-scaled format follows the block's own amax, so the elements it clips are the
block's largest, and a clipped-STE zero would stop training exactly the weights that set the
scale. NaN and inf pass their gradient through the same way; ``torch.func`` (``grad``,
``jacrev``, ...) takes that gradient too. ``quantize``, ``quantize_outputs`` and ``hif4_pack`` are
not differentiable: their outputs are marked so (they never require grad, whatever the input),
and ``fake_quant`` is the path to train through. Under ``torch.vmap``, ``quantize``,
``quantize_outputs`` and ``fake_quant`` run once per sample: a contract's scale domains (a
per-tensor scale included) never span two samples.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Optional, Sequence

import torch

from . import _arrays, _core, _torch_io
from ._contract import ContractInfo, override_strings
from ._torchao import from_mxtensor, from_nvfp4tensor, to_mxtensor, to_nvfp4tensor

__all__ = [
    "FakeQuantize",
    "dequantize",
    "fake_quant",
    "from_mxtensor",
    "from_nvfp4tensor",
    "hif4_pack",
    "hif4_unpack",
    "quantize",
    "to_mxtensor",
    "to_nvfp4tensor",
]

Tensor = torch.Tensor


@functools.lru_cache(maxsize=256)
def _params(preset: str, overrides: tuple[str, ...]) -> Mapping[str, str]:
    """The validated contract's parameters plus its family (raises ValueError as the core does)."""
    params = dict(_core.contract_params(preset, list(overrides)))
    params["family"] = _core.contract_family(preset, list(overrides))
    # The outputs' names (output_names), comma-separated; "" for a contract that does not quantize.
    quantizes = params["family"] not in ("hif4", "pool")
    params["outputs"] = ",".join(_core.output_names(preset, list(overrides))) if quantizes else ""
    # What each output's elements are ("codes.payload": e4m3, e2m1x2, int8, ...; OutputSpec codes).
    params.update({"codes." + name: codes for name, codes in _core.output_codes(preset, list(overrides))})
    return params


# OutputSpec codes -> the torch dtype of an output (torch has no float6: MXFP6 stays uint8, as
# torchao keeps it).
def _output_dtype(p: Mapping[str, str], name: str) -> torch.dtype:
    """The torch dtype of the contract's output ``name`` (the tensor scale is float32)."""
    return _torch_io.code_dtype(p["codes." + name]) or torch.uint8


def _outputs(preset: str, overrides: list[str], x: Tensor) -> list[tuple[str, list[int]]]:
    """(name, shape) of every output the contract gives x, from the core's output_specs."""
    return [(name, dims) for name, _, dims in _core.contract_outputs(preset, overrides, [int(d) for d in x.shape])]


def _has_tensor_scale(p: Mapping[str, str]) -> bool:
    return "tensor_scale" in p["outputs"]


def _check_quantizer(preset: str, p: Mapping[str, str]) -> None:
    if p["family"] in ("hif4", "pool"):
        raise ValueError(f"{preset} is not a quantize contract (family {p['family']}): "
                         f"use fake_quant or hif4_pack for hif4, pooled_block_mean for pool")


_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _check_float(x: Tensor, what: str = "x") -> None:
    if x.dtype not in _FLOATS:
        raise TypeError(f"{what} holds {x.dtype} values; it must be float32, float16 or bfloat16")


# The ops take the overrides as "key=value" strings (str[] in the schemas: torch infers no schema
# from list[str]).

# -- quantize / dequantize ---------------------------------------------------------------------

def _quantized(x: Tensor, preset: str, overrides: list[str], engine: str, threads: int,
               given: Optional[Any] = None) -> list[Tensor]:
    """Every output of the contract for x, as tensors over the core's arrays (output_specs order);
    ``given``: scales to quantize with (the scale output's bytes, as _arrays.as_bytes gives them)."""
    p = _params(preset, tuple(overrides))
    _check_quantizer(preset, p)
    payload, scale, _, tensor_scale = _core.quantize(_torch_io.readable(x, "x"), False, preset, overrides, engine,
                                                     threads, given)
    arrays = [payload, scale] + ([] if tensor_scale is None else [tensor_scale])
    names = ("payload", "scale", "tensor_scale")
    return [_torch_io.from_numpy(a, _output_dtype(p, names[i])) for i, a in enumerate(arrays)]


def _ceil_div(a: Any, b: int) -> Any:
    return (a + (b - 1)) // b


def _prod(dims: Sequence[Any]) -> Any:
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def _symbolic_outputs(p: Mapping[str, str], shape: Sequence[Any]) -> list[tuple[str, list[Any]]]:
    """(name, shape) of every output, as the core's output_specs gives them (family_table.cpp,
    scale_grain.cpp), in arithmetic that keeps torch's symbolic sizes symbolic: the fake kernels
    of a compiled function whose batch or sequence size changes trace once. The shape checks
    stay the real kernel's (and the core's, for concrete shapes: _fake_outputs)."""
    x = list(shape)
    lead, k = x[:-1], x[-1]
    family = p["family"]
    if family == "mx":
        groups = _ceil_div(k, int(p["block"]))
        payload = [*lead, _ceil_div(k, 2)] if p["element"] == "e2m1" else x
        rows = _prod(lead)
        scale = {"pairs": lambda: [*lead, _ceil_div(groups, 2), 2],
                 "rowmajor": lambda: [*lead, groups],
                 "padded": lambda: [_ceil_div(rows, 128) * 128, _ceil_div(groups, 4) * 4],
                 "swizzled": lambda: [_ceil_div(rows, 128) * 128 * (_ceil_div(groups, 4) * 4)]}[p["layout"]]()
        return [("payload", payload), ("scale", scale)]
    if family == "int8.block":
        return [("payload", x), ("scale", [x[0], x[2], _ceil_div(x[1], int(p["token_block"]))])]
    if family == "int8.token":
        return [("payload", x), ("scale", lead)]
    if family == "int8.group":
        return [("payload", x), ("scale", [*lead, k // int(p["group"])])]
    if family == "fp8.scaled":
        kind, _, size = p["granularity"].partition(":")
        if kind == "tensor":
            scale = []
        elif kind == "row":
            scale = lead
        elif kind == "group":
            scale = [*lead, _ceil_div(k, int(size))]
        elif kind == "tile":
            m, n = (int(v) for v in size.split("x"))
            scale = [_ceil_div(_prod(lead), m), _ceil_div(k, n)]
        else:  # head_block:T of (B, S, N, D)
            scale = [x[0], x[2], _ceil_div(x[1], int(size))]
        return [("payload", x), ("scale", scale)]
    if family == "nvfp4":
        out = [("payload", [*lead, _ceil_div(k, 2)]), ("scale", [*lead, k // 16])]
        return out + ([("tensor_scale", [])] if _has_tensor_scale(p) else [])
    raise ValueError(f"{family} has no quantize outputs")


def _fake_outputs(x: Tensor, preset: str, overrides: list[str]) -> list[Tensor]:
    p = _params(preset, tuple(overrides))
    _check_quantizer(preset, p)
    _check_float(x)
    if all(isinstance(d, int) for d in x.shape):  # concrete: the core checks the shape and gives the sizes
        specs = _outputs(preset, overrides, x)
    else:
        specs = _symbolic_outputs(p, x.shape)
    return [x.new_empty(dims, dtype=_output_dtype(p, name)) for name, dims in specs]


def _two_outputs(preset: str, p: Mapping[str, str]) -> None:
    if _has_tensor_scale(p):
        raise ValueError(f"{preset} has a tensor scale, a third output (payload, scale, tensor_scale): "
                         f"use torch.ops.qexact.quantize_outputs")


@torch.library.custom_op("qexact::quantize", mutates_args=(),
                         schema="(Tensor x, str preset, str[] overrides, str engine, int threads) -> (Tensor, Tensor)")
def _quantize_op(x: Tensor, preset: str, overrides: list[str], engine: str, threads: int) -> tuple[Tensor, Tensor]:
    _two_outputs(preset, _params(preset, tuple(overrides)))
    payload, scale = _quantized(x, preset, overrides, engine, threads)
    return payload, scale


@_quantize_op.register_fake
def _(x: Tensor, preset: str, overrides: list[str], engine: str, threads: int) -> tuple[Tensor, Tensor]:
    _two_outputs(preset, _params(preset, tuple(overrides)))
    payload, scale = _fake_outputs(x, preset, overrides)
    return payload, scale


# Every output by name, in output_specs order: (payload, scale) or (payload, scale, tensor_scale).
@torch.library.custom_op("qexact::quantize_outputs", mutates_args=(),
                         schema="(Tensor x, str preset, str[] overrides, str engine, int threads) -> Tensor[]")
def _quantize_outputs_op(x: Tensor, preset: str, overrides: list[str], engine: str, threads: int) -> list[Tensor]:
    return _quantized(x, preset, overrides, engine, threads)


@_quantize_outputs_op.register_fake
def _(x: Tensor, preset: str, overrides: list[str], engine: str, threads: int) -> list[Tensor]:
    return _fake_outputs(x, preset, overrides)


# Quantized codes and their scales have no gradient: the outputs of quantize (and hif4_pack) are
# marked non-differentiable, so a requires_grad input gives outputs that do not require grad,
# instead of outputs whose backward fails. fake_quant is the differentiable path.
def _mark_non_differentiable(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.mark_non_differentiable(*(output if isinstance(output, (tuple, list)) else (output,)))


def _no_gradient(ctx: Any, *grads: Any) -> tuple[None, ...]:
    raise RuntimeError("qexact: quantized outputs have no gradient (use qexact.torch.fake_quant to train through "
                       "quantization)")


for _op in ("qexact::quantize", "qexact::quantize_outputs"):
    torch.library.register_autograd(_op, _no_gradient, setup_context=_mark_non_differentiable)


def _check_payload(payload: Tensor, preset: str, p: Mapping[str, str], scale: Optional[Tensor] = None) -> None:
    """A typed payload (and scale) must be the contract's type: its bytes would be read as the
    contract's codes either way (uint8 / int8 bytes are taken as they are)."""
    codes = {k.removeprefix("codes."): v for k, v in p.items() if k.startswith("codes.")}
    _arrays.check_code_type(payload, "payload", preset, codes, "payload")
    if scale is not None:
        _arrays.check_code_type(scale, "scale", preset, codes, "scale")


def _x_shape(payload: Tensor, shape: Optional[Sequence[int]], p: Mapping[str, str]) -> list[Any]:
    """x's shape: `shape`, or the payload's with packed E2M1 pairs doubled; symbolic sizes stay
    symbolic (the fake kernel), the real kernel makes them ints."""
    out = list(shape) if shape is not None else list(payload.shape)
    if shape is None and p.get("codes.payload") in ("e2m1x2", "e2m1x2_halves") and out:
        out[-1] = out[-1] * 2
    return out


def _check_tensor_scale(tensor_scale: Optional[Tensor], preset: str, p: Mapping[str, str]) -> None:
    if _has_tensor_scale(p) and tensor_scale is None:
        raise ValueError(f"{preset} has a tensor scale (tensor_scale={p['tensor_scale']}): dequantize needs its "
                         f"tensor_scale")
    if not _has_tensor_scale(p) and tensor_scale is not None:
        raise ValueError(f"{preset} has no tensor scale, but a tensor_scale was given")


# tensor_scale (last, optional): the third output of a contract with a tensor scale.
@torch.library.custom_op("qexact::dequantize", mutates_args=(),
                         schema="(Tensor payload, Tensor scale, int[]? shape, str preset, str[] overrides, str engine, "
                                "int threads, Tensor? tensor_scale=None) -> Tensor")
def _dequantize_op(payload: Tensor, scale: Tensor, shape: Optional[list[int]], preset: str, overrides: list[str],
                   engine: str, threads: int, tensor_scale: Optional[Tensor] = None) -> Tensor:
    p = _params(preset, tuple(overrides))
    _check_payload(payload, preset, p, scale)
    t = None if tensor_scale is None else _torch_io.readable(tensor_scale, "tensor_scale")
    y = _core.dequantize(_torch_io.readable(payload, "payload", as_bytes=True),
                         _torch_io.readable(scale, "scale", as_bytes=True),
                         [int(d) for d in _x_shape(payload, shape, p)], preset, overrides, engine, threads, t)
    return _torch_io.from_numpy(y)


@_dequantize_op.register_fake
def _(payload: Tensor, scale: Tensor, shape: Optional[list[int]], preset: str, overrides: list[str], engine: str,
      threads: int, tensor_scale: Optional[Tensor] = None) -> Tensor:
    p = _params(preset, tuple(overrides))
    _check_payload(payload, preset, p, scale)
    _check_tensor_scale(tensor_scale, preset, p)
    return payload.new_empty(_x_shape(payload, shape, p), dtype=torch.float32)


# -- fake quantization, differentiable ---------------------------------------------------------

@torch.library.custom_op("qexact::fake_quant", mutates_args=(),
                         schema="(Tensor x, str preset, str[] overrides, int qdim, str engine, int threads) -> Tensor")
def _fake_quant_op(x: Tensor, preset: str, overrides: list[str], qdim: int, engine: str, threads: int) -> Tensor:
    p = _params(preset, tuple(overrides))
    x = _torch_io.readable(x, "x")
    if p["family"] == "hif4":
        return _torch_io.from_numpy(_core.hifloat4_fake_quant(x, False, qdim, engine, threads))
    _check_quantizer(preset, p)
    moved = x.movedim(qdim, -1)  # a strided view: the core reads it in place
    payload, scale, _, tensor_scale = _core.quantize(moved, False, preset, overrides, engine, threads)
    y = _core.dequantize(payload, scale, [int(d) for d in moved.shape], preset, overrides, engine, threads,
                         tensor_scale)
    return _torch_io.from_numpy(y).to(x.dtype).movedim(-1, qdim).contiguous()


@_fake_quant_op.register_fake
def _(x: Tensor, preset: str, overrides: list[str], qdim: int, engine: str, threads: int) -> Tensor:
    p = _params(preset, tuple(overrides))
    if p["family"] != "hif4":
        _check_quantizer(preset, p)
    _check_float(x)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _fake_quant_backward(ctx: Any, grad: Tensor) -> tuple[Optional[Tensor], ...]:
    # Straight-through: every element's gradient passes unchanged (see the module's docstring).
    return grad, None, None, None, None, None


torch.library.register_autograd("qexact::fake_quant", _fake_quant_backward)


class _StraightThrough(torch.autograd.Function):
    """fake_quant with its straight-through gradient as an autograd.Function that torch.func
    (grad, jacrev, vmap) can transform: the op's own registered autograd cannot be, as torch
    builds it without a setup_context. Its vmap rule is the op's (one call per sample)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, preset: str, overrides: list[str], qdim: int, engine: str, threads: int) -> Tensor:
        return torch.ops.qexact.fake_quant(x, preset, overrides, qdim, engine, threads)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        pass  # nothing to save: the gradient passes through unchanged

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Optional[Tensor], ...]:
        return _fake_quant_backward(ctx, grad)


# -- HiFloat4 storage --------------------------------------------------------------------------

def _hif4_shapes(x: Tensor) -> tuple[list[int], list[int]]:
    if x.dim() != 2 or x.shape[1] % 64:
        raise ValueError(f"hif4_pack needs a 2-D x whose column count is a multiple of 64, got shape {tuple(x.shape)}")
    rows, cols = int(x.shape[0]), int(x.shape[1])
    return [rows, cols // 64, 4], [rows, cols // 2]


@torch.library.custom_op("qexact::hif4_pack", mutates_args=())
def _hif4_pack_op(x: Tensor, engine: str, threads: int) -> tuple[Tensor, Tensor]:
    scale, value = _core.hif4_pack(_torch_io.readable(x, "x"), False, engine, threads)
    return _torch_io.from_numpy(scale), _torch_io.from_numpy(value)


@_hif4_pack_op.register_fake
def _(x: Tensor, engine: str, threads: int) -> tuple[Tensor, Tensor]:
    _check_float(x)
    scale_shape, value_shape = _hif4_shapes(x)
    return x.new_empty(scale_shape, dtype=torch.uint8), x.new_empty(value_shape, dtype=torch.uint8)


@torch.library.custom_op("qexact::hif4_unpack", mutates_args=())
def _hif4_unpack_op(scale: Tensor, value: Tensor, engine: str, threads: int) -> Tensor:
    y = _core.hif4_unpack(_torch_io.readable(scale, "scale"), _torch_io.readable(value, "value"), engine, threads)
    return _torch_io.from_numpy(y)


@_hif4_unpack_op.register_fake
def _(scale: Tensor, value: Tensor, engine: str, threads: int) -> Tensor:
    if value.dim() != 2:
        raise ValueError(f"value must be 2-D (rows, cols/2), got shape {tuple(value.shape)}")
    return value.new_empty([int(value.shape[0]), 2 * int(value.shape[1])], dtype=torch.float32)


torch.library.register_autograd("qexact::hif4_pack", _no_gradient, setup_context=_mark_non_differentiable)


# -- vmap: one call per sample ---------------------------------------------------------------------
# A contract's scale domains are its own (a per-tensor scale spans the whole tensor), so a batch
# dimension cannot be folded into the input: vmap runs the op once per sample and stacks the
# outputs (one-byte codes stacked as their bytes: torch stacks no float8 / float4 tensors).

def _stacked(parts: list[Tensor]) -> Tensor:
    if parts[0].element_size() == 1 and parts[0].dtype != torch.uint8:
        return torch.stack([p.view(torch.uint8) for p in parts]).view(parts[0].dtype)
    return torch.stack(parts)


def _batched(d: Any) -> bool:
    """Whether a vmap in_dims entry batches its argument (a list argument's entry is a list)."""
    return any(_batched(e) for e in d) if isinstance(d, (list, tuple)) else d is not None


def _per_sample_vmap(op: Any) -> Any:
    def rule(info: Any, in_dims: tuple[Optional[int], ...], x: Tensor, *rest: Any) -> tuple[Any, Any]:
        if any(_batched(d) for d in in_dims[1:]):
            raise NotImplementedError(f"qexact ops batch over x only, got in_dims {in_dims}")
        if in_dims[0] is None:
            out = op(x, *rest)
            return out, (None if isinstance(out, Tensor) else [None] * len(out))
        samples = [op(xi, *rest) for xi in x.movedim(in_dims[0], 0).unbind(0)]
        if isinstance(samples[0], Tensor):
            return _stacked(samples), 0
        stacked = [_stacked([s[k] for s in samples]) for k in range(len(samples[0]))]
        return (tuple(stacked) if isinstance(samples[0], tuple) else stacked), [0] * len(stacked)
    return rule


for _name in ("quantize", "quantize_outputs", "fake_quant"):
    torch.library.register_vmap(f"qexact::{_name}", _per_sample_vmap(getattr(torch.ops.qexact, _name).default))


# -- the functions: keywords in, ops called ----------------------------------------------------

def quantize(x: Tensor, preset: str, *, like: str = "qexact", scale: Optional[Tensor] = None, engine: str = "fast",
             threads: int = 0, **params: Any) -> tuple[Tensor, ...]:
    """``qexact.quantize`` for a CPU tensor: ``(payload, scale)`` tensors in torch's dtypes, or
    ``(payload, scale, tensor_scale)`` (float32, shape ``()``) for a contract with a tensor
    scale (nvfp4 ``tensor_scale="amax"``); runs ``torch.ops.qexact.quantize_outputs``.

    like: the scales' convention, the bytes of every output unchanged otherwise.

    * ``"qexact"``: qexact's shapes, as the CLI writes them (row scales ``x.shape[:-1]``,
      swizzled MX scales flat).
    * ``"torchao"``: torchao's shapes: fp8.scaled row scales ``(*x.shape[:-1], 1)`` (its
      ``_scale``), MX scales as its ``MXTensor`` holds them (the grid, or swizzled 2-D).
    * ``"scaled_mm"``: fp8.scaled scales as ``torch._scaled_mm`` takes them: descales (a
      multiplier becomes ``torch.reciprocal`` of it, what torchao passes), row scales
      ``(M, 1)``; for the second operand pass ``scale.t()`` with ``payload.t()``.

    A convention other than ``"qexact"`` reads the contract's parameters in Python: call it
    outside ``torch.compile`` (the default traces as one op).

    scale: quantize with these scales (``qexact.quantize``'s ``scale=``: the scale output's
    dtype and shape in qexact's convention), eagerly (no op for torch.compile to trace).
    """
    _torch_io.check_cpu(x, "x")
    overrides = override_strings(params)
    if scale is not None:
        _arrays.check_code_type(scale, "scale", preset, ContractInfo.of(preset, params).codes, "scale")
        outs = tuple(_quantized(x, preset, overrides, engine, threads, _arrays.as_bytes(scale, "scale")))
    else:
        # One op for every contract: the number of outputs is the op's to know (no call into the
        # core here, which torch.compile could not trace).
        outs = tuple(torch.ops.qexact.quantize_outputs(x, preset, overrides, engine, threads))
    if like == "qexact":
        return outs
    if like not in ("torchao", "scaled_mm"):
        raise ValueError(f"like must be 'qexact', 'torchao' or 'scaled_mm', got {like!r}")
    p = _params(preset, tuple(overrides))
    scale = outs[1]
    if p["family"] == "fp8.scaled":
        if p["granularity"] == "row":
            scale = scale.unsqueeze(-1)
        if like == "scaled_mm" and p["scale_kind"] == "multiplier" and p["stored"] != "inverse":
            scale = torch.reciprocal(scale)
    elif like == "scaled_mm":
        raise ValueError(f"like='scaled_mm' is for fp8.scaled presets (torch._scaled_mm's float8 operands); "
                         f"{preset} is family {p['family']}")
    elif p["family"] == "mx":
        scale = to_mxtensor(outs[0], scale, preset, shape=x.shape, **params).scale
    return (outs[0], scale, *outs[2:])


def dequantize(payload: Tensor, scale: Tensor, preset: str, *, shape: Optional[Sequence[int]] = None,
               tensor_scale_array: Optional[Tensor] = None, engine: str = "fast", threads: int = 0,
               **params: Any) -> Tensor:
    """``qexact.dequantize`` for tensors: float32 values. Payloads and scales may be torch's
    float8 / float4_e2m1fn_x2 / float8_e8m0fnu tensors or their bytes (uint8, int8), or numpy
    arrays (read in place as tensors); ``tensor_scale_array`` the float32 third output of a
    contract with a tensor scale (``tensor_scale=`` is the contract parameter)."""
    payload, scale = _torch_io.tensor(payload, "payload"), _torch_io.tensor(scale, "scale")
    t = None if tensor_scale_array is None else _torch_io.tensor(tensor_scale_array, "tensor_scale_array")
    dims = None if shape is None else [int(d) for d in shape]
    return torch.ops.qexact.dequantize(payload, scale, dims, preset, override_strings(params), engine, threads, t)


def fake_quant(x: Tensor, preset: str, *, qdim: int = -1, engine: str = "fast", threads: int = 0,
               **params: Any) -> Tensor:
    """``dequantize(quantize(x))`` under the contract ``preset`` (HiF4's own fake quantization
    for ``"hif4"``), in x's dtype (the fp32 values rounded once to it), differentiable with the
    straight-through gradient of this module's docstring.

    qdim: the axis the blocks run along. HiF4 quantizes along it; every other contract sees x
    with that axis moved last (its own block axis), and the result is moved back.
    """
    _torch_io.check_cpu(x, "x")
    return _StraightThrough.apply(x, preset, override_strings(params), qdim, engine, threads)


def hif4_pack(x: Tensor, *, engine: str = "fast", threads: int = 0) -> tuple[Tensor, Tensor]:
    """``qexact.hif4_pack`` for a CPU tensor: ``(scale, value)`` uint8 tensors."""
    _torch_io.check_cpu(x, "x")
    return torch.ops.qexact.hif4_pack(x, engine, threads)


def hif4_unpack(scale: Tensor, value: Tensor, *, engine: str = "fast", threads: int = 0) -> Tensor:
    """``qexact.hif4_unpack`` for tensors: float32 values."""
    scale, value = _torch_io.tensor(scale, "scale"), _torch_io.tensor(value, "value")
    return torch.ops.qexact.hif4_unpack(scale, value, engine, threads)


class FakeQuantize(torch.nn.Module):
    """``fake_quant`` as a module, for quantization-aware training: ``FakeQuantize("hif4")(w)``.

    The contract is validated when the module is made; the gradient is straight-through.
    """

    def __init__(self, preset: str, *, qdim: int = -1, engine: str = "fast", threads: int = 0, **params: Any):
        super().__init__()
        self.overrides = override_strings(params)
        _params(preset, tuple(self.overrides))  # a bad preset or parameter fails here, not mid-training
        self.preset, self.qdim, self.engine, self.threads = preset, qdim, engine, threads

    def forward(self, x: Tensor) -> Tensor:
        _torch_io.check_cpu(x, "x")
        return _StraightThrough.apply(x, self.preset, self.overrides, self.qdim, self.engine, self.threads)

    def extra_repr(self) -> str:
        return ", ".join([repr(self.preset), f"qdim={self.qdim}", *self.overrides])
