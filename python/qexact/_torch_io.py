"""How PyTorch tensors cross into qexact and come back, without copies either way.

torch is never imported here: a caller holding a tensor has imported it already, so
``sys.modules`` tells whether an object can be one. In: a CPU tensor is read in place through
DLPack; torch's one-byte float types (float8, E8M0 scales, packed E2M1) are read as their
``uint8`` view, which is what the core takes for quantized bytes. Out: the core's numpy array
becomes a tensor over the same memory (``torch.from_numpy`` keeps the array, which owns the
bytes, alive) and is viewed as the natural torch dtype.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def torch_module() -> Any:
    return sys.modules.get("torch")


def is_tensor(x: Any) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def any_tensor(*xs: Any) -> bool:
    return any(is_tensor(x) for x in xs)


def device_error(device: Any, what: str) -> TypeError:
    """The error for a tensor qexact cannot read: it names the device and what to do."""
    if device.type == "meta":
        return TypeError(f"{what} is a meta tensor (device 'meta'): it has a shape but no values to quantize; "
                         f"pass a CPU tensor (torch.ops.qexact.* give meta outputs for meta inputs)")
    return TypeError(f"{what} is on device '{device}'; qexact computes on the CPU: pass {what}.cpu() "
                     f"(and move the results back with .to('{device}'))")


def check_cpu(t: Any, what: str) -> Any:
    if t.device.type != "cpu":
        raise device_error(t.device, what)
    return t


def tensor(a: Any, what: str) -> Any:
    """A CPU tensor, or a numpy array as a tensor over its memory."""
    if isinstance(a, np.ndarray):
        return from_numpy(a)
    if not is_tensor(a):
        raise TypeError(f"{what} must be a PyTorch tensor or a numpy array, got {type(a).__module__}.{type(a).__qualname__}")
    return check_cpu(a, what)


def one_byte_floats() -> tuple[Any, ...]:
    """torch's float types whose bytes are qexact codes (the fnuz float8 types are not: their
    encodings differ)."""
    torch = torch_module()
    return (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2)


def code_dtype(code: str) -> Any:
    """The torch dtype of a contract output's codes (ContractInfo.codes values), or None (uint8
    stays: e2m1x2_halves among them, since float4_e2m1fn_x2 means adjacent nibbles)."""
    torch = torch_module()
    return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m1x2": torch.float4_e2m1fn_x2,
            "e8m0": torch.float8_e8m0fnu, "int8": torch.int8, "f32": torch.float32,
            "f16": torch.float16}.get(code)


def readable(t: Any, what: str, as_bytes: bool = False) -> Any:
    """``t`` as the core takes it: a CPU tensor outside autograd (DLPack refuses one that
    requires grad), one-byte floats as their uint8 view when ``as_bytes``. No copy."""
    torch = torch_module()
    check_cpu(t, what)
    t = t.detach()
    if as_bytes and t.dtype in one_byte_floats():
        t = t.view(torch.uint8)
    return t


def numpy_bytes(t: Any, what: str) -> np.ndarray:
    """A numpy view of a quantized tensor's memory (one-byte floats as uint8)."""
    t = readable(t, what, as_bytes=True)
    if t.dtype == torch_module().bfloat16:
        t = t.view(torch_module().uint16)
    return t.numpy()


def _torch_dtype(a: np.ndarray) -> tuple[Any, Any]:
    """(the numpy view torch can import, the torch dtype to view it as)."""
    torch = torch_module()
    name = a.dtype.name
    if name == "bfloat16":
        return a.view(np.uint16), torch.bfloat16
    if name == "float8_e4m3fn":
        return a.view(np.uint8), torch.float8_e4m3fn
    if name == "float8_e5m2":
        return a.view(np.uint8), torch.float8_e5m2
    if name.startswith("float6_"):  # torch has no float6: one code per byte, as torchao keeps them
        return a.view(np.uint8), torch.uint8
    return a, None


def from_numpy(a: np.ndarray, dtype: Any = None) -> Any:
    """A tensor over ``a``'s memory, viewed as ``dtype`` (default: the natural torch dtype of
    a's dtype; ``uint16`` arrays from the core are bf16 bit patterns)."""
    torch = torch_module()
    base, natural = _torch_dtype(a)
    t = torch.from_numpy(base)
    if dtype is None:
        dtype = torch.bfloat16 if base.dtype == np.uint16 else natural
    return t if dtype is None or dtype == t.dtype else t.view(dtype)
