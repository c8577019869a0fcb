"""torchao interop: qexact's MX outputs as a torchao ``MXTensor`` and back, scales in the shapes
torchao gives them. torchao is imported only when these functions are called.

torchao's MXTensor (0.18) holds ``qdata`` (float8_e4m3fn / float8_e5m2, or uint8 for packed E2M1
and for MXFP6, one code per byte) and ``scale`` (float8_e8m0fnu), either as the grid
``(*x.shape[:-1], K // block)`` or, with ``is_swizzled_scales``, in cuBLAS's blocked layout as the
2-D (per leading dimension) ``(ceil(M/128) * 32, ceil(K/128) * 16)``. qexact's ``rowmajor`` scales
are that grid and its ``swizzled`` scales are those bytes in that order (flat); ``pairs`` and
``padded`` scales are regridded (a copy of the scales only). torchao has no partial blocks.

NVFP4: torchao's ``NVFP4Tensor`` holds ``qdata`` (uint8, two E2M1 codes a byte, element 2k in the
low nibble: qexact's nvfp4 payload bytes), ``scale`` (float8_e4m3fn, the grid
``(*x.shape[:-1], K // 16)``: qexact's block scales) and an optional ``per_tensor_scale`` (a 0-dim
float32 descale, amax / (448 * 6): the third output of qexact's ``tensor_scale="amax"``).
``to_nvfp4tensor`` / ``from_nvfp4tensor`` convert both ways without copies; contracts whose
tensor scale is another quantity (``multiplier``, ``te``) have no NVFP4Tensor form and are refused.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import torch

from . import _torch_io
from ._contract import ContractInfo

_ELEMENTS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m1": torch.float4_e2m1fn_x2}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _as_tensor(a: Any, what: str) -> torch.Tensor:
    return _torch_io.readable(a, what) if _torch_io.is_tensor(a) else _torch_io.from_numpy(a)


def _mx_contract(preset: str, params: dict[str, Any]) -> ContractInfo:
    c = ContractInfo.of(preset, params)
    if c.family != "mx":
        raise ValueError(f"torchao's MXTensor holds MX formats; {c.describe()} is family {c.family}")
    return c


def _swizzled_shape(x_shape: Sequence[int], groups: int) -> list[int]:
    if len(x_shape) < 2:
        raise ValueError(f"swizzled scales need x of 2 or more dimensions (torchao's M and K), got shape {tuple(x_shape)}")
    *leading, m = x_shape[:-1]
    if leading and m % 128:
        raise ValueError(f"torchao keeps the swizzled scales of x {tuple(x_shape)} per leading dimension, which needs "
                         f"M = {m} to be a multiple of 128 (qexact swizzles all {math.prod(x_shape[:-1])} rows as one)")
    return [*leading, _ceil_div(m, 128) * 32, _ceil_div(groups, 4) * 16]


def to_mxtensor(payload: Any, scale: Any, preset: str, *, shape: Optional[Sequence[int]] = None,
                orig_dtype: torch.dtype = torch.float32, **params: Any) -> Any:
    """A torchao ``MXTensor`` over ``qexact.quantize(x, preset, **params)``'s outputs (tensors or
    numpy arrays). The payload is shared, not copied; so are ``rowmajor`` and ``swizzled`` scales.

    shape: x's shape, as for ``qexact.dequantize``. orig_dtype: the dtype MXTensor reports and
    ``dequantize()`` gives by default.
    """
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    c = _mx_contract(preset, params)
    element, block = c.params["element"], int(c.params["block"])
    if c.params.get("packing", "adjacent") != "adjacent":
        raise ValueError(f"torchao's MXTensor packs element 2k in the low nibble of byte k; {preset} has "
                         f"packing={c.params['packing']} (ggml's order): its payload would be read out of order")
    p = _as_tensor(payload, "payload")
    s = _as_tensor(scale, "scale")
    if s.dtype == torch.uint8:
        s = s.view(torch.float8_e8m0fnu)
    x_shape = list(shape) if shape is not None else [*p.shape[:-1], p.shape[-1] * (2 if element == "e2m1" else 1)]
    if not x_shape or x_shape[-1] % block:
        raise ValueError(f"torchao's MXTensor needs whole blocks of {block} along the last axis, x has shape {tuple(x_shape)}")
    rows, groups = math.prod(x_shape[:-1]), x_shape[-1] // block
    layout = c.params["layout"]
    if layout == "swizzled":
        s = s.reshape(_swizzled_shape(x_shape, groups))
    else:
        if layout == "pairs":
            grid = s.reshape(rows, 2 * _ceil_div(groups, 2))[:, :groups]
        elif layout == "padded":
            grid = s.reshape(_ceil_div(rows, 128) * 128, _ceil_div(groups, 4) * 4)[:rows, :groups]
        else:
            grid = s.reshape(rows, groups)
        s = grid.contiguous().reshape(*x_shape[:-1], groups)
    if element in ("e4m3", "e5m2"):
        qdata, elem_dtype = p.view(_ELEMENTS[element]), _ELEMENTS[element]
    else:
        qdata = p.view(torch.uint8)
        elem_dtype = {"e2m1": torch.float4_e2m1fn_x2, "e2m3": DTYPE_FP6_E2M3, "e3m2": DTYPE_FP6_E3M2}[element]
    return MXTensor(qdata, s, elem_dtype, block, orig_dtype, None, None, layout == "swizzled")


def from_mxtensor(t: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(payload, scale)`` of a torchao ``MXTensor`` as ``qexact.quantize`` gives them, for
    ``compare``, ``dequantize`` or a byte check against a contract with torchao's block size:
    the payload in qexact's dtypes (packed E2M1 as ``float4_e2m1fn_x2``), the scales
    ``float8_e8m0fnu`` in layout ``rowmajor`` (the grid, as ``mxfp8.torchao.*`` and ``mx.ocp.*``
    give them), or ``swizzled`` (flat) when the MXTensor's scales are swizzled. No copies."""
    qdata = t.qdata
    if not qdata.is_contiguous():
        raise ValueError("the MXTensor's data is transposed (blocks along dim -2): qexact's MX blocks run along "
                         "the last axis; use the untransposed tensor")
    payload = qdata.view(torch.float4_e2m1fn_x2) if t.elem_dtype == torch.float4_e2m1fn_x2 else qdata
    scale = t.scale.view(torch.float8_e8m0fnu)
    return payload, scale.reshape(-1) if t.is_swizzled_scales else scale


def _nvfp4_contract(preset: str, params: dict[str, Any]) -> ContractInfo:
    c = ContractInfo.of(preset, params)
    if c.family != "nvfp4":
        raise ValueError(f"torchao's NVFP4Tensor holds NVFP4; {c.describe()} is family {c.family}")
    if c.params["tensor_scale"] not in ("none", "amax"):
        raise ValueError(f"torchao's per_tensor_scale is a descale, amax / (448 * 6); {c.describe()} has "
                         f"tensor_scale={c.params['tensor_scale']}, another quantity")
    return c


def to_nvfp4tensor(payload: Any, scale: Any, preset: str, *, tensor_scale_array: Any = None,
                   shape: Optional[Sequence[int]] = None, orig_dtype: torch.dtype = torch.float32,
                   **params: Any) -> Any:
    """A torchao ``NVFP4Tensor`` over ``qexact.quantize(x, preset, **params)``'s outputs (tensors or
    numpy arrays), sharing their memory: the payload as ``qdata``, the block scales as ``scale``
    and, for ``tensor_scale="amax"``, ``tensor_scale_array`` as ``per_tensor_scale``.

    shape: x's shape (default: the payload's with its last axis doubled); torchao needs two or
    more dimensions and whole blocks of 16. orig_dtype: the dtype the NVFP4Tensor reports.
    """
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    c = _nvfp4_contract(preset, params)
    p = _as_tensor(payload, "payload").view(torch.uint8)
    s = _as_tensor(scale, "scale")
    if s.dtype == torch.uint8:
        s = s.view(torch.float8_e4m3fn)
    x_shape = list(shape) if shape is not None else [*p.shape[:-1], 2 * p.shape[-1]]
    if len(x_shape) < 2 or x_shape[-1] % 16:
        raise ValueError(f"torchao's NVFP4Tensor needs x of 2 or more dimensions with whole blocks of 16 along the "
                         f"last axis, x has shape {tuple(x_shape)}")
    t = None
    if c.params["tensor_scale"] == "amax":
        if tensor_scale_array is None:
            raise ValueError(f"{c.describe()} has a tensor scale: pass its third output as tensor_scale_array")
        t = _as_tensor(tensor_scale_array, "tensor_scale_array").to(torch.float32).reshape(())
    elif tensor_scale_array is not None:
        raise ValueError(f"{c.describe()} has no tensor scale, but a tensor_scale_array was given")
    qdata = p.reshape(*x_shape[:-1], x_shape[-1] // 2)
    return NVFP4Tensor(qdata, s.reshape(*x_shape[:-1], x_shape[-1] // 16), 16, orig_dtype, t, None, False)


def from_nvfp4tensor(t: Any) -> tuple[torch.Tensor, ...]:
    """``(payload, scale)``, or ``(payload, scale, tensor_scale)`` when it has a per-tensor scale,
    of a torchao ``NVFP4Tensor`` as ``qexact.torch.quantize`` gives them for nvfp4 (payload
    ``float4_e2m1fn_x2``, block scales ``float8_e4m3fn``, the tensor scale a 0-dim float32): for
    ``compare``, ``dequantize`` (``tensor_scale_array=``) or a byte check. No copies."""
    if t.block_size != 16:
        raise ValueError(f"qexact's nvfp4 has blocks of 16; this NVFP4Tensor has {t.block_size}")
    if t.is_swizzled_scales:
        raise ValueError("the NVFP4Tensor's scales are swizzled: qexact's nvfp4 block scales are the plain grid")
    if not t.qdata.is_contiguous():
        raise ValueError("the NVFP4Tensor's data is transposed (blocks along dim -2): qexact's blocks run along the "
                         "last axis; use the untransposed tensor")
    if t.per_tensor_scale is not None and t.per_tensor_scale.dim() != 0:
        raise ValueError("the NVFP4Tensor has per-expert scales (E, 1, 1): qexact's tensor scale is one per tensor")
    out = (t.qdata.view(torch.float4_e2m1fn_x2), t.scale.view(torch.float8_e4m3fn))
    return out if t.per_tensor_scale is None else (*out, t.per_tensor_scale.to(torch.float32))
