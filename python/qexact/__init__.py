"""qexact: quantize tensors bit for bit as real hardware and frameworks do.

The MX family (MXFP8 E4M3/E5M2, MXFP6, MXFP4), FP8 with fp32 scales (per tensor, row, group,
tile or head block), NVFP4 (E2M1 with E4M3 block scales and an optional fp32 tensor scale), int8
per (head, token block), int8 per token, ggml Q8_0 and HiFloat4, each a named contract
(``presets()``) whose every parameter can be overridden by keyword; a mistyped preset, parameter
or value gets the nearest name in its error ("did you mean ...?"). Inputs are numpy arrays (float32, float16, ``ml_dtypes.bfloat16``) or
CPU tensors that speak DLPack, read in place with their strides; outputs are numpy arrays, or
PyTorch tensors (torch's float8 / float4 / E8M0 dtypes, no copies) when the inputs are PyTorch
tensors: those calls run as the ``torch.ops.qexact.*`` ops of ``qexact.torch``, which also holds
differentiable fake quantization (``fake_quant``, ``FakeQuantize``; also at the top level, as
``qexact.fake_quant`` and ``qexact.FakeQuantize``, imported with torch on first use) and torchao
interop. Kernels run without the GIL. ``engine="reference"`` runs the scalar reference
quantizers instead of the SIMD + multi-threaded ones: both give the same bytes.

Errors: ``ValueError`` for a bad preset, parameter, shape or value (NaN where the contract is
finite-only), ``TypeError`` for an unsupported dtype or object, with the CLI's messages.

>>> import numpy as np, ml_dtypes, qexact
>>> x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32).astype(ml_dtypes.bfloat16)
>>> payload, scale = qexact.quantize(x, "mxfp8.ascend")
>>> payload.dtype, scale.dtype, scale.shape
(dtype(float8_e4m3fn), dtype('uint8'), (2, 1, 2))
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np

from . import _arrays, _core, _torch_io
from ._checkpoint import (CheckpointSummary, StoredDiff, TensorSummary, Verification, dequantize_folder,
                          quantize_checkpoint, quantize_folder, quantize_state_dict, verify_folder)
from ._contract import ContractInfo
from ._report import CompareReport, Diagnosis

__version__ = "0.1.0"

__all__ = [
    "CheckpointSummary",
    "CompareReport",
    "Diagnosis",
    "TensorSummary",
    "cast",
    "compare",
    "decode",
    "dequantize",
    "describe",
    "hif4_pack",
    "hif4_unpack",
    "hifloat4_fake_quant",
    "int8_per_token",
    "outputs",
    "params",
    "pooled_block_mean",
    "pooled_block_mean_sharded",
    "presets",
    "quantize",
    "quantize_checkpoint",
    "quantize_folder",
    "dequantize_folder",
    "verify_folder",
    "Verification",
    "StoredDiff",
    "quantize_state_dict",
]

Engine = Literal["fast", "reference"]

# Names of qexact.torch offered at the top level. They need PyTorch, which qexact itself does not:
# resolved on first use (PEP 562), so `import qexact` never imports torch.
_TORCH_NAMES = ("FakeQuantize", "fake_quant")


def __getattr__(name: str) -> Any:
    if name in _TORCH_NAMES:
        try:
            from . import torch as qt
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            raise ImportError(f"qexact.{name} needs PyTorch (pip install torch); the numpy API needs nothing more") from e
        return getattr(qt, name)
    raise AttributeError(f"module 'qexact' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_TORCH_NAMES))


def presets() -> list[str]:
    """Names of the built-in contracts, e.g. ``"mxfp8.ascend"``, ``"int8.token.vllm"``, ``"hif4"``."""
    return list(_core.preset_names())


def describe(preset: str) -> str:
    """One line saying what system a preset reproduces and how."""
    return _core.preset_description(preset)


def params(preset: str, **overrides: Any) -> dict[str, str]:
    """Every parameter of the contract ``preset`` with ``overrides`` applied, as strings.

    Raises ValueError for an unknown preset or parameter, a bad value, or a combination qexact
    does not implement.

    >>> qexact.params("int8.token.blaze", scale_mode="before")["scale_mode"]
    'before'
    """
    return dict(ContractInfo.of(preset, overrides).params)


def quantize(x: Any, preset: str, *, scale: Any = None, out: tuple[Any, ...] | None = None,
             engine: Engine = "fast", threads: int = 0, **params: Any) -> tuple[Any, ...]:
    """Quantize ``x`` under the contract ``preset`` (with parameter overrides ``params``).

    x: float32, float16 or bfloat16 (``ml_dtypes.bfloat16`` or a bf16 DLPack tensor), any
    shape and strides; read in place.

    Returns ``(payload, scale)``, or ``(payload, scale, tensor_scale)`` for a contract with a
    tensor scale (nvfp4 ``tensor_scale="amax"``): the contract's outputs by name, in the order
    ``outputs(preset, x.shape)`` lists them.

    * MX presets: the payload has x's shape as ``ml_dtypes`` ``float8_e4m3fn``,
      ``float8_e5m2``, ``float6_e2m3fn`` or ``float6_e3m2fn`` (one code per byte), or ``uint8``
      for E2M1 (two codes per byte, element 2k in the low nibble, last axis ``ceil(K/2)``);
      ``payload.view(np.uint8)`` gives the bytes. The scale is ``uint8`` E8M0 codes in the
      contract's layout (``pairs``, ``rowmajor``, ``padded`` or ``swizzled``).
    * int8 presets: ``int8`` payload of x's shape; ``float32`` scales (``float16`` with
      ``scale_store="f16"``), one per row, token block or group.
    * fp8.scaled presets: the payload has x's shape as ``float8_e4m3fn`` or ``float8_e5m2``
      (the ``element`` parameter); ``float32`` scales shaped by the granularity (``[]`` tensor,
      ``x.shape[:-1]`` row, ``[..., ceil(C/N)]`` group, ``[ceil(R/M), ceil(C/N)]`` tile,
      ``(B, N, ceil(S/T))`` head_block).
    * nvfp4 presets: ``uint8`` payload of E2M1 pairs (last axis ``K/2``), ``float8_e4m3fn``
      block scales (last axis ``K/16``), and with ``tensor_scale="amax"`` a third output, the
      ``float32`` tensor scale of shape ``()``.

    threads: 0 uses ``QEXACT_THREADS`` or one per core; the bytes never depend on it.

    scale: quantize with these scales instead of the contract's own (what ONNX's
    ``QuantizeLinear`` does with its scale input): an array (or CPU tensor) of exactly the scale
    output's dtype and shape, as ``quantize`` returns it (fp8.scaled and int8 ``float32`` in the
    stored form, MX E8M0 bytes, nvfp4 E4M3 codes; one-byte float types or their ``uint8``
    bytes). Each domain's payload is the contract's elements under that scale; one equal bit for
    bit to the contract's own scale is the contract's own, so ``quantize(x, p, scale=quantize(x,
    p)[1])`` gives ``quantize(x, p)``. The returned scale is a copy of it. fp8.scaled runs on both
    engines; the other families need ``engine="reference"`` (the fast engine refuses them).

    out: ``(payload, scale)`` arrays the caller owns (``(payload, scale, tensor_scale)`` for a
    contract with a tensor scale), written in place and returned (nothing is allocated):
    C-contiguous, writable, of exactly the dtypes and shapes returned otherwise: for PyTorch
    tensors torch's ``float8_e4m3fn`` / ``float8_e5m2`` / ``float8_e8m0fnu`` /
    ``float4_e2m1fn_x2`` as ``qexact.torch.quantize`` returns them (one-byte float arrays and
    tensors may also be their ``uint8`` view; one of another type is a TypeError naming both
    types). They are
    checked before anything is written (ValueError naming the array); a NaN found under a
    finite-only contract still raises ValueError, leaving their contents unspecified.
    """
    if out is None and _torch_io.is_tensor(x):
        from . import torch as qt
        return qt.quantize(x, preset, scale=scale, engine=engine, threads=threads, **params)
    contract = ContractInfo.of(preset, params)
    data, bf16_bits = _arrays.as_input(x)
    given = None
    if scale is not None:
        if out is not None:
            raise ValueError("scale= and out= together are not supported: quantize with given scales allocates its outputs")
        _arrays.check_code_type(scale, "scale", preset, contract.codes, "scale")
        given = _arrays.as_bytes(scale, "scale")
    if out is not None:
        out = tuple(out)
        if len(out) not in (2, 3):
            raise ValueError(f"out must be (payload, scale) or (payload, scale, tensor_scale), got {len(out)} arrays")
        names = ("payload", "scale", "tensor_scale")
        arrays = [_arrays.as_output(a, "out " + names[i], (preset, contract.codes, names[i]))[0]
                  for i, a in enumerate(out)]
        _core.quantize_into(data, bf16_bits, arrays[0], arrays[1], preset, list(contract.overrides), engine, threads,
                            arrays[2] if len(arrays) > 2 else None)
        return out
    payload, scale, _path, tensor_scale = _core.quantize(data, bf16_bits, preset, list(contract.overrides), engine,
                                                         threads, given)
    outputs = [payload, scale] + ([] if tensor_scale is None else [tensor_scale])
    return tuple(_arrays.typed_outputs(contract.codes, outputs))


def outputs(preset: str, shape: Sequence[int], **params: Any) -> list[tuple[str, str, tuple[int, ...]]]:
    """The outputs the contract ``preset`` gives an input of ``shape``, in the order ``quantize``
    returns them: ``(name, dtype, shape)`` with qexact's dtype names (``u8`` codes, ``i8``,
    ``f32``, ``f16``), e.g. ``[("payload", "u8", (4, 32)), ("scale", "u8", (4, 4)),
    ("tensor_scale", "f32", ())]`` for ``nvfp4.torchao`` with ``tensor_scale="amax"`` and shape
    (4, 64). The names are the files ``qexact quantize`` writes (``<name>.npy``) and a
    checkpoint's ``<tensor>.<name>``. Raises ValueError for a shape the contract refuses.
    """
    contract = ContractInfo.of(preset, params)
    return [(name, dtype, tuple(dims))
            for name, dtype, dims in _core.contract_outputs(preset, list(contract.overrides), [int(d) for d in shape])]


def dequantize(payload: Any, scale: Any, preset: str, *, shape: Sequence[int] | None = None,
               tensor_scale_array: Any = None, out: Any = None, engine: Engine = "fast", threads: int = 0,
               **params: Any) -> Any:
    """float32 values of ``(payload, scale)`` made by ``quantize`` under the same contract.

    tensor_scale_array: the third output of a contract with a tensor scale (nvfp4
    ``tensor_scale="amax"``), required there and refused for any other contract. (The keyword
    ``tensor_scale`` is the contract parameter, as in ``quantize``.)

    shape: the shape of the original x; by default the payload's (with its last dimension
    doubled for E2M1 and nvfp4, whose payloads pack two codes per byte: pass ``shape`` when
    x's last dimension was odd).

    out: a C-contiguous, writable float32 array of x's shape that the caller owns, written in
    place and returned (its shape is x's: ``shape``, if given too, must equal it).
    """
    _check_parameter_not_array(params)
    tensor_scale = tensor_scale_array
    if out is None and _torch_io.any_tensor(payload, scale, tensor_scale):
        from . import torch as qt
        return qt.dequantize(payload, scale, preset, shape=shape, tensor_scale_array=tensor_scale, engine=engine,
                             threads=threads, **params)
    contract = ContractInfo.of(preset, params)
    _arrays.check_code_type(payload, "payload", preset, contract.codes, "payload")
    _arrays.check_code_type(scale, "scale", preset, contract.codes, "scale")
    p = _arrays.as_bytes(payload, "payload")
    s = _arrays.as_bytes(scale, "scale")
    if isinstance(tensor_scale, np.generic):  # a numpy scalar (e.g. tensor_scale[()]) as its 0-d array
        tensor_scale = np.asarray(tensor_scale)
    t = None if tensor_scale is None else _arrays.as_bytes(tensor_scale, "tensor_scale")
    if out is not None:
        o, _ = _arrays.as_output(out, "out")
        if shape is not None and [int(d) for d in shape] != _core.array_shape(o):
            raise ValueError(f"shape {tuple(shape)} differs from out's shape {tuple(_core.array_shape(o))}")
        _core.dequantize_into(p, s, o, preset, list(contract.overrides), engine, threads, t)
        return out
    if shape is None:
        shape = _core.array_shape(p)
        if _arrays.packs_pairs(contract.codes) and shape:
            shape[-1] *= 2
    return _core.dequantize(p, s, [int(d) for d in shape], preset, list(contract.overrides), engine, threads, t)


def _check_parameter_not_array(params: dict[str, Any]) -> None:
    """``tensor_scale=`` names nvfp4's parameter (none, amax, te); its output array goes in as
    ``tensor_scale_array=``."""
    value = params.get("tensor_scale")
    if value is not None and not isinstance(value, str):
        raise TypeError("tensor_scale= is the contract parameter (none, amax, te); pass the tensor scale output as "
                        "tensor_scale_array=")


def hifloat4_fake_quant(x: Any, qdim: int = -1, *, out: Any = None, engine: Engine = "fast",
                        threads: int = 0) -> Any:
    """HiFloat4 fake quantization (FP -> HiF4 -> FP) in blocks of 64 along axis ``qdim``.

    The result has x's shape and dtype (bfloat16 in, ``ml_dtypes.bfloat16`` out). Given a
    tensor it is ``qexact.torch.fake_quant(x, "hif4", qdim=qdim)``: differentiable. out: a
    C-contiguous, writable array of that shape and dtype, written in place and returned.
    """
    if out is None and _torch_io.is_tensor(x):
        from . import torch as qt
        return qt.fake_quant(x, "hif4", qdim=qdim, engine=engine, threads=threads)
    data, bf16_bits = _arrays.as_input(x)
    if out is not None:
        o, out_bf16_bits = _arrays.as_output(out, "out")
        _core.hifloat4_fake_quant_into(data, bf16_bits, o, out_bf16_bits, qdim, engine, threads)
        return out
    return _arrays.from_core(_core.hifloat4_fake_quant(data, bf16_bits, qdim, engine, threads))


def hif4_pack(x: Any, *, out: tuple[Any, Any] | None = None, engine: Engine = "fast",
              threads: int = 0) -> tuple[Any, Any]:
    """HiFloat4 storage of a 2-D x whose column count is a multiple of 64.

    Returns ``(scale, value)``: ``uint8`` arrays of shapes (rows, cols/64, 4) and (rows, cols/2).
    out: such a pair the caller owns (C-contiguous, writable), written in place and returned.
    """
    if out is None and _torch_io.is_tensor(x):
        from . import torch as qt
        return qt.hif4_pack(x, engine=engine, threads=threads)
    data, bf16_bits = _arrays.as_input(x)
    if out is not None:
        scale_out, value_out = out
        s, _ = _arrays.as_output(scale_out, "out scale")
        v, _ = _arrays.as_output(value_out, "out value")
        _core.hif4_pack_into(data, bf16_bits, s, v, engine, threads)
        return scale_out, value_out
    return _core.hif4_pack(data, bf16_bits, engine, threads)


def hif4_unpack(scale: Any, value: Any, *, out: Any = None, engine: Engine = "fast", threads: int = 0) -> Any:
    """float32 values of HiFloat4 storage made by ``hif4_pack``; ``out``: a C-contiguous,
    writable float32 array of shape (rows, cols) the caller owns, written in place and returned."""
    if out is None and _torch_io.any_tensor(scale, value):
        from . import torch as qt
        return qt.hif4_unpack(scale, value, engine=engine, threads=threads)
    if out is not None:
        o, _ = _arrays.as_output(out, "out")
        _core.hif4_unpack_into(_arrays.as_bytes(scale, "scale"), _arrays.as_bytes(value, "value"), o, engine, threads)
        return out
    return _core.hif4_unpack(_arrays.as_bytes(scale, "scale"), _arrays.as_bytes(value, "value"), engine, threads)


def int8_per_token(x: Any, *, scale_mode: Literal["before", "after"] = "after", scale_min: float = 0.0,
                   range: Literal[127, 128] = 127, engine: Engine = "fast",
                   threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """int8 per token (contracts §4, preset ``int8.token.blaze``): one scale per row over x's
    complete last axis.

    scale_mode: ``"after"`` gives scale = max(amax / qmax, scale_min), ``"before"`` gives
    scale = max(amax, scale_min) / qmax. range: 127 clamps to [-127, 127], 128 to [-128, 127].
    Returns ``(payload int8 of x's shape, scale float32 of x.shape[:-1])``.
    """
    return quantize(x, "int8.token.blaze", engine=engine, threads=threads, scale_mode=scale_mode,
                    scale_min=scale_min, range=range)


def pooled_block_mean(x: Any, pool: int, *, out: Any = "float32", engine: Engine = "fast",
                      threads: int = 0) -> np.ndarray:
    """Exact block means over the sequence axis (contracts §6).

    x: shape (B, S, F...) with the sequence on axis 1, finite values. The result has shape
    (B, ceil(S/pool), F...); each cell is the exact mean of its real elements (a tail cell
    divides by S % pool), rounded once to ``out`` (float32, float16 or bfloat16).
    """
    data, bf16_bits = _arrays.as_input(x)
    out_name = _arrays.float_dtype_name(out)
    y = _arrays.from_core(_core.pooled_block_mean(data, bf16_bits, pool, out_name, engine, threads))
    return _torch_io.from_numpy(y) if _torch_io.is_tensor(x) else y


def pooled_block_mean_sharded(shards: Sequence[Any], pool: int, *, out: Any = "float32",
                              divisor: Literal["true_length", "uniform"] = "true_length") -> np.ndarray:
    """``pooled_block_mean`` as a sequence-sharded run computes it: ``shards`` are the ranks'
    consecutive slices ``x[:, offset:offset + len]`` in rank order. Each rank's exact partial
    sums are combined and each cell divided once, so the result equals the unsharded one.
    ``divisor="uniform"`` divides every cell by ``pool`` (wrong on a tail cell: shows the drift).
    """
    inputs = [_arrays.as_input(s, f"shard {i}") for i, s in enumerate(shards)]
    out_name = _arrays.float_dtype_name(out)
    y = _arrays.from_core(_core.pooled_block_mean_sharded(
        [d for d, _ in inputs], [b for _, b in inputs], pool, out_name, divisor))
    return _torch_io.from_numpy(y) if _torch_io.any_tensor(*shards) else y


def cast(x: Any, element: str, *, rounding: str = "rne", overflow: str = "saturate") -> np.ndarray:
    """Element codes of x in format ``element`` (e4m3, e5m2, e2m3, e3m2, e2m1), without scaling:
    qexact's reference codec, one ``uint8`` code per element (sign in bit ``bits - 1``).

    rounding: rne, half_away, half_away_fp32, even_fp32. overflow: ``saturate`` (anything
    beyond max, inf included, gives ±max), ``nan`` (values that round past max give NaN; E4M3
    and E5M2 only), ``inf`` (E5M2 only). NaN gives the format's NaN with x's sign (0x7F | sign
    for E4M3 and E5M2) and code 0 in formats without NaN.
    """
    data, bf16_bits = _arrays.as_input(x)
    codes = _core.cast(data, bf16_bits, element, rounding, overflow)
    return _torch_io.from_numpy(codes) if _torch_io.is_tensor(x) else codes


def decode(codes: Any, element: str) -> np.ndarray:
    """float32 values of element codes (``uint8``, one code per byte) in format ``element``."""
    values = _core.decode(_arrays.as_bytes(codes, "codes"), element)
    return _torch_io.from_numpy(values) if _torch_io.is_tensor(codes) else values


def compare(x: Any, preset: str, actual: Any, *, actual_params: dict[str, Any] | None = None,
            engine: Engine = "fast", threads: int = 0, **params: Any) -> CompareReport:
    """Compare another output for ``x`` with the bytes of the contract ``preset`` (+ ``params``):
    the C++ compare of ``qexact compare``, with its counts and diagnoses.

    actual: either ``(payload, scale)`` arrays another system produced for ``x`` (``(payload,
    scale, tensor_scale)`` for a contract with a tensor scale, as ``quantize`` returns them; numpy arrays
    or CPU tensors; float8 / E8M0 / packed E2M1 as their bytes), or the name of another preset
    (with ``actual_params`` overrides, run with ``engine`` and ``threads``) to compare two
    contracts on the same input. The contract's own bytes come from the reference engine.

    A payload or scale of another dtype, or a payload of another shape, is a ValueError naming
    both; a scale of another shape is diagnosed (``granularity``, ``scale_layout``) when another
    block, group or layout of the contract gives that shape. ``report.diagnoses`` names each
    known signature the differences match (``amax_fp32_not_bf16``, ``rounding_mode``,
    ``tail_rule``, ``flush_rule``, ``nonfinite_rule``, ...; see ``Diagnosis``), in the words of
    ``qexact compare``; ``confirmed`` when re-running the contract with the suspected change
    reproduced the other side's bytes.
    """
    expected = ContractInfo.of(preset, params)
    data, bf16_bits = _arrays.as_input(x)
    if isinstance(actual, str):
        other = ContractInfo.of(actual, actual_params or {})
        core = _core.compare_presets(data, bf16_bits, preset, list(expected.overrides), actual,
                                     list(other.overrides), engine, threads)
        return CompareReport.of(core, expected.describe(), other.describe())
    if actual_params is not None:
        raise TypeError("actual_params applies only when actual is a preset name")
    if not isinstance(actual, (tuple, list)) or len(actual) not in (2, 3):
        raise TypeError("actual must be a (payload, scale) pair of arrays or a preset name (a contract with a "
                        "tensor scale: (payload, scale, tensor_scale))")
    payload = _arrays.as_bytes(actual[0], "actual payload")
    scale = _arrays.as_bytes(actual[1], "actual scale")
    tensor_scale = _arrays.as_bytes(np.asarray(actual[2]) if isinstance(actual[2], np.generic) else actual[2],
                                    "actual tensor_scale") if len(actual) > 2 else None
    core = _core.compare_arrays(data, bf16_bits, preset, list(expected.overrides), payload, scale, tensor_scale)
    return CompareReport.of(core, expected.describe(), "the given arrays")
