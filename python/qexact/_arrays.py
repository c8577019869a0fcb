"""How arrays cross into the C++ core and come back: no copies either way.

numpy has no bfloat16: an ``ml_dtypes.bfloat16`` array goes in as its ``uint16`` view (the same
memory) with a flag saying the bits are bf16, and bf16 results come back as ``uint16`` arrays
that are viewed as ``ml_dtypes.bfloat16``. Any other CPU array is handed to the core as it is,
which imports it through DLPack or the buffer protocol (PyTorch tensors included).
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_dtypes
import numpy as np

from . import _torch_io

# One-byte codes (OutputSpec codes) -> their ml_dtypes type. Packed E2M1 pairs, E8M0 scales and
# int8 have none here, so they stay as the core returns them.
PAYLOAD_TYPES: Mapping[str, Any] = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
}

def packs_pairs(codes: Mapping[str, str]) -> bool:
    """Whether the contract's payload packs two E2M1 codes per byte (MX E2M1, nvfp4): the input's
    last dimension is then twice the payload's (for an even length). ``codes``: ContractInfo.codes."""
    return codes.get("payload") in ("e2m1x2", "e2m1x2_halves")


def typed_output(codes: Mapping[str, str], name: str, array: Any) -> Any:
    """One quantize output of the core (uint8 / int8 / float array) viewed as its numpy type,
    over the same memory: one-byte element codes (MX, fp8.scaled payloads) as the ``ml_dtypes``
    type of their element, nvfp4's E4M3 block scales as ``float8_e4m3fn``; packed E2M1
    payloads, E8M0 scales and the rest as they are. ``codes``: ContractInfo.codes."""
    view = PAYLOAD_TYPES.get(codes.get(name, ""))
    return array if view is None or array.dtype != np.uint8 else array.view(view)


def typed_outputs(codes: Mapping[str, str], outputs: list[Any]) -> list[Any]:
    """The core's quantize outputs, in output_specs order, each as ``typed_output`` views it."""
    names = ("payload", "scale", "tensor_scale")
    return [typed_output(codes, names[i], a) for i, a in enumerate(outputs)]


# Accepted spellings of the float dtypes qexact reads and writes, to its own names.
_FLOAT_NAMES = {
    "f32": "f32", "float32": "f32", "fp32": "f32",
    "f16": "f16", "float16": "f16", "fp16": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}


FLOAT_INPUTS = "float32, float16 or bfloat16 (ml_dtypes.bfloat16, or a bfloat16 DLPack tensor)"


def as_input(x: Any, what: str = "x", accepted: str = FLOAT_INPUTS, as_bytes: bool = False) -> tuple[Any, bool]:
    """(the object to hand to the core, whether it holds bf16 bit patterns as uint16). A PyTorch
    tensor must be on the CPU; with ``as_bytes`` its one-byte floats are read as uint8."""
    if isinstance(x, np.ndarray):
        if x.dtype.byteorder == ">":
            raise TypeError(
                f"{what} is big-endian ({x.dtype.str}); qexact reads native little-endian arrays: "
                f"use {what}.astype({what}.dtype.newbyteorder('='))"
            )
        if x.dtype == ml_dtypes.bfloat16:
            return x.view(np.uint16), True
        if x.dtype.kind == "V":  # another ml_dtypes type: neither DLPack nor the buffer protocol carries it
            raise TypeError(f"{what} holds {x.dtype.name} values; it must be {accepted}")
        return x, False
    if _torch_io.is_tensor(x):
        return _torch_io.readable(x, what, as_bytes=as_bytes), False
    if hasattr(type(x), "__dlpack__"):
        return x, False
    raise TypeError(
        f"{what} must be a numpy array or a CPU tensor that supports DLPack (e.g. a PyTorch tensor), "
        f"got {type(x).__module__}.{type(x).__qualname__}"
    )


def check_code_type(a: Any, what: str, preset: str, codes: Mapping[str, str], name: str) -> None:
    """A one-byte float array or tensor (ml_dtypes float8 / float6, torch's float8, E8M0 and
    float4_e2m1fn_x2) standing for the contract's output ``name`` must be of that output's type:
    its bytes would be taken as the contract's codes whatever its type. TypeError naming the
    type it has and the one the contract gives; uint8 / int8 bytes are taken as they are."""
    if isinstance(a, np.ndarray):
        if not any(a.dtype == t for t in PAYLOAD_TYPES.values()):
            return  # other ml_dtypes types are refused by as_input, naming them
        want = PAYLOAD_TYPES.get(codes.get(name, ""))
        if want is not None and a.dtype == want:
            return
        gives = np.dtype(want).name if want is not None else "uint8 / int8 / float32 / float16 as quantize returns it"
        raise TypeError(f"{what} holds {a.dtype.name} values; {preset}'s {name} is {gives} (or its bytes as uint8)")
    if _torch_io.is_tensor(a) and a.dtype in _torch_io.one_byte_floats():
        want = _torch_io.code_dtype(codes.get(name, ""))
        if a.dtype != want:
            raise TypeError(f"{what} holds {a.dtype} values; {preset}'s {name} is {want} (or its bytes as uint8)")


def as_output(a: Any, what: str, typed: tuple[str, Mapping[str, str], str] | None = None) -> tuple[Any, bool]:
    """A caller-owned output (``out=``) ready for the core to write in place: (the object, whether
    it holds bf16 bit patterns). One-byte float arrays and tensors (ml_dtypes, torch's float8 /
    E8M0 / float4_e2m1fn_x2) go as their uint8 view and bfloat16 as uint16, over the same memory,
    once ``typed`` = (preset, ContractInfo.codes, output name) has checked them; the core checks
    dtype, shape, contiguity and overlap."""
    if typed is not None:
        check_code_type(a, what, *typed)
    if isinstance(a, np.ndarray):
        if not a.flags.writeable:
            raise ValueError(f"{what} is read-only; out= needs a writable array")
        if any(a.dtype == t for t in PAYLOAD_TYPES.values()):
            a = a.view(np.uint8)
    accepted = "a writable float32, float16, bfloat16, uint8 or int8 array"
    return as_input(a, what, accepted=accepted, as_bytes=typed is not None)


def as_bytes(a: Any, what: str) -> Any:
    """A quantized array (payload, scale, codes) ready for the core: ml_dtypes float8/float6
    payloads and torch's one-byte floats (float8, E8M0, packed E2M1) as their uint8 view,
    everything else as it is."""
    if isinstance(a, np.ndarray) and any(a.dtype == t for t in PAYLOAD_TYPES.values()):
        a = a.view(np.uint8)
    data, _ = as_input(a, what, accepted="uint8, int8, float32 or float16, as quantize returns them", as_bytes=True)
    return data


def from_core(a: np.ndarray) -> np.ndarray:
    """A float result of the core: bf16 arrive as uint16 bit patterns (the core returns uint16
    for nothing else)."""
    return a.view(ml_dtypes.bfloat16) if a.dtype == np.uint16 else a


def float_dtype_name(dtype: Any) -> str:
    """qexact's name (f32, f16, bf16) of a float dtype given as a string, numpy or ml_dtypes type."""
    if isinstance(dtype, str):
        name = _FLOAT_NAMES.get(dtype)
    else:
        try:
            name = _FLOAT_NAMES.get(np.dtype(dtype).name)
        except TypeError:
            name = None
    if name is None:
        raise TypeError(f"unsupported output dtype {dtype!r}; qexact writes float32, float16 or bfloat16")
    return name


def to_numpy(a: Any, what: str) -> np.ndarray:
    """A numpy view of a quantized array given by the caller (numpy or DLPack), without copying."""
    if isinstance(a, np.ndarray):
        return a
    if _torch_io.is_tensor(a):
        return _torch_io.numpy_bytes(a, what)
    if hasattr(type(a), "__dlpack__"):
        return np.from_dlpack(a)
    raise TypeError(f"{what} must be a numpy array or a CPU tensor that supports DLPack, got {type(a).__name__}")
