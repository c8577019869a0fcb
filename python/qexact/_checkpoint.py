"""Checkpoints from Python: a .safetensors file, or a state_dict, quantized as the CLI's
``qexact quantize --preset P model.safetensors --out q.safetensors`` does (one implementation,
in C++: the same include/exclude rules, summary and metadata)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple, Sequence

import numpy as np

from . import _arrays, _core, _torch_io
from ._contract import ContractInfo

# dtype names (numpy's, ml_dtypes', torch's without "torch.") -> safetensors dtype names.
_SAFETENSORS_DTYPES = {
    "float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64",
    "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
    "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "bool": "BOOL", "complex64": "C64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0fnu": "F8_E8M0",
}
_FLOATS = ("F32", "F16", "BF16")

Engine = Literal["fast", "reference"]


class TensorSummary(NamedTuple):
    """One quantized tensor's line of the summary (as the CLI prints it)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # f32, f16 or bf16
    sqnr_db: float
    saturated_pct: float
    bytes_in: int
    bytes_out: int


@dataclass(frozen=True)
class CheckpointSummary:
    """What quantizing a checkpoint did.

    quantized: one line per quantized tensor, by name. skipped: name -> why the contract could not
    take it (passed through unchanged). copied: names no include/exclude rule selected. metadata:
    the output's ``__metadata__`` (the input's plus ``qexact.*``). text: the CLI's table.
    """

    quantized: list[TensorSummary]
    skipped: dict[str, str]
    copied: list[str]
    metadata: dict[str, str]
    text: str

    @staticmethod
    def _of(t: tuple[Any, ...]) -> "CheckpointSummary":
        rows, skipped, copied, metadata, text = t
        return CheckpointSummary(
            quantized=[TensorSummary(n, tuple(s), d, q, p, i, o) for n, s, d, q, p, i, o in rows],
            skipped=dict(skipped), copied=list(copied), metadata=dict(metadata), text=text)


def _globs(g: str | Sequence[str] | None, what: str) -> list[str]:
    if g is None:
        return []
    if isinstance(g, str):
        return [g]
    out = list(g)
    if not all(isinstance(x, str) for x in out):
        raise TypeError(f"{what} must be a glob (str) or a sequence of globs")
    return out


def quantize_checkpoint(src: str | os.PathLike[str], out: str | os.PathLike[str], preset: str, *,
                        params: Mapping[str, Any] | None = None, include: str | Sequence[str] | None = None,
                        exclude: str | Sequence[str] | None = None, strict: bool = False,
                        engine: Engine = "fast", threads: int = 0, force: bool = False) -> CheckpointSummary:
    """Quantize the .safetensors file ``src`` into ``out`` under ``preset`` (with parameter
    overrides ``params``), exactly as ``qexact quantize --preset P src --out out`` does: the same
    bytes, streamed tensor by tensor, ``out`` published atomically. An existing ``out`` is a
    ValueError unless ``force=True`` (``--force``), which replaces it as a whole.

    Tensors whose name matches an ``include`` glob (default: all) and no ``exclude`` glob are
    quantized into ``<name>.payload`` and ``<name>.scale`` (and ``<name>.tensor_scale`` for a
    contract with a tensor scale); the others, and those the contract
    cannot take, are copied unchanged (with ``strict=True`` the latter is a ValueError). A file
    qexact already quantized, and a tensor ``w`` beside a tensor ``w.payload`` or ``w.scale``, are
    refused (ValueError) before any work.
    """
    contract = ContractInfo.of(preset, dict(params or {}))
    return CheckpointSummary._of(_core.quantize_checkpoint(
        os.fspath(src), os.fspath(out), preset, list(contract.overrides), _globs(include, "include"),
        _globs(exclude, "exclude"), bool(strict), engine, threads, bool(force)))


def quantize_folder(src: str | os.PathLike[str], out: str | os.PathLike[str], preset: str | None = None, *,
                    format: str = "qexact", params: Mapping[str, Any] | None = None,
                    include: str | Sequence[str] | None = None, exclude: str | Sequence[str] | None = None,
                    strict: bool = False, engine: Engine = "fast", threads: int = 0,
                    force: bool = False, activations: Literal["none", "dynamic"] = "none",
                    max_shard_size: int | str | None = None) -> CheckpointSummary:
    """Quantize the model folder ``src`` (config.json, safetensors shards and their index) into the
    folder ``out`` in a loader's ``format``, as ``qexact quantize src --format F --out out`` does:
    "compressed-tensors" (llm-compressor's layout, for vLLM and transformers; preset nvfp4.ct by
    default), "modelopt" (ModelOpt's HF export; nvfp4.modelopt), "hf-fp8" (transformers' and
    DeepSeek-V3's fine-grained FP8, weight_scale_inv; fp8.hf.block), "gpt-oss-mxfp4" (its experts
    as *_blocks / *_scales; mxfp4.triton), "gguf" (one GGUF file for llama.cpp, ``out`` its path;
    q8_0.ggml or mxfp4.ggml), or "qexact" (each shard in
    qexact's layout; a preset is required). A loader format quantizes the Linear weights but
    lm_head, embeddings and routers unless ``include`` / ``exclude`` say otherwise.
    ``activations="dynamic"`` (compressed-tensors) also declares the activations the loader
    quantizes at run time, as ``--activations dynamic``. ``max_shard_size`` (bytes, or "5GB",
    "500MB", "2GiB") cuts the output into shards of at most that size, as transformers does."""
    if activations not in ("none", "dynamic"):
        raise ValueError(f"activations must be 'none' or 'dynamic', got {activations!r}")
    overrides: list[str] = []
    if preset is not None:
        overrides = list(ContractInfo.of(preset, dict(params or {})).overrides)
    elif params:
        raise ValueError("params need a preset")
    return CheckpointSummary._of(_core.quantize_folder(
        os.fspath(src), os.fspath(out), preset or "", overrides, format, _globs(include, "include"),
        _globs(exclude, "exclude"), bool(strict), engine, threads, bool(force), activations == "dynamic",
        "" if max_shard_size is None else str(max_shard_size)))


def dequantize_folder(quantized: str | os.PathLike[str], out: str | os.PathLike[str], *, dtype: str | None = None,
                      engine: Engine = "fast", threads: int = 0, force: bool = False) -> list[str]:
    """``qexact dequantize quantized --out out``: the quantized model folder (any format but GGUF)
    unquantized into ``out``, each quantized tensor under its source name in ``dtype`` ("F32",
    "BF16", "F16"; default the config's dtype); returns the dequantized tensors' names."""
    return list(_core.dequantize_folder(os.fspath(quantized), os.fspath(out), dtype or "", engine, threads, bool(force)))


class StoredDiff(NamedTuple):
    """One stored output of a quantized tensor: its differing bytes of all."""

    name: str        # the stored tensor
    differing: int   # bytes differing from qexact's recomputation
    bytes: int


@dataclass(frozen=True)
class Verification:
    """What ``verify_folder`` found: per quantized tensor the differing bytes of each stored output,
    and the loader-contract findings (one sentence each). ok: no differing byte, no finding."""

    format: str
    preset: str
    ok: bool
    differing: int
    bytes: int
    activation_scales: int
    tensors: dict[str, list[StoredDiff]]
    findings: list[str]
    diagnoses: dict[str, list[str]]  # per differing tensor: compare's signatures, or why it was not diagnosed


def verify_folder(quantized: str | os.PathLike[str], source: str | os.PathLike[str], *, preset: str | None = None,
                  engine: Engine = "fast", threads: int = 0) -> Verification:
    """``qexact verify quantized --source source``: recompute every quantized tensor of the folder
    (or GGUF file) from its source with the recipe its config names (or ``preset``) and compare
    byte for byte; where bytes differ, compare's diagnoses say why."""
    fmt, name, ok, differing, nbytes, activation, tensors, findings, diagnoses = _core.verify_folder(
        os.fspath(quantized), os.fspath(source), preset or "", engine, threads)
    return Verification(fmt, name, ok, differing, nbytes, activation,
                        {t: [StoredDiff(*r) for r in rows] for t, rows in tensors}, list(findings),
                        {t: list(d) for t, d in diagnoses})


def _dtype_key(x: Any) -> str:
    dtype = x.dtype
    if isinstance(dtype, np.dtype):
        return dtype.name
    return str(dtype).removeprefix("torch.")


def _torch_output(a: np.ndarray, st_dtype: str) -> Any:
    """A torch tensor over ``a``'s memory typed as safetensors' ``st_dtype`` (as torch would
    load the CLI's file)."""
    torch = _torch_io.torch_module()
    target = {"F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "F8_E8M0": torch.float8_e8m0fnu}.get(st_dtype)
    return _torch_io.from_numpy(a.view(np.uint8) if target is not None else a, target)


def quantize_state_dict(state_dict: Mapping[str, Any], preset: str, *, params: Mapping[str, Any] | None = None,
                        include: str | Sequence[str] | None = None, exclude: str | Sequence[str] | None = None,
                        strict: bool = False, metadata: Mapping[str, str] | None = None,
                        engine: Engine = "fast", threads: int = 0) -> tuple[dict[str, Any], CheckpointSummary]:
    """Quantize a state_dict (name -> numpy array or CPU torch tensor) as ``quantize_checkpoint``
    quantizes a file holding it: the same selection, outputs, summary and metadata.

    Returns ``(tensors, summary)``. ``tensors`` is the quantized state_dict, by name: every
    ``<name>.payload`` and ``<name>.scale`` (and ``<name>.tensor_scale`` for a contract with a
    tensor scale: the bytes the CLI's file holds for them), and every
    other tensor as the very object given. Outputs of a torch tensor are torch tensors typed as
    torch loads the CLI's file (``float8_e4m3fn``/``float8_e5m2`` payloads, ``float8_e8m0fnu``
    MX scales, ``float8_e4m3fn`` nvfp4 scales, int8 payloads, float32/float16 int8 and fp8.scaled
    scales and tensor scales, uint8 for other MX and nvfp4 payloads); outputs
    of a numpy array are what ``qexact.quantize`` returns. ``metadata``: the ``__metadata__`` to
    start from (``summary.metadata`` is the output's).
    """
    contract = ContractInfo.of(preset, dict(params or {}))
    names, dtypes, shapes, arrays, bf16_bits, originals = [], [], [], [], [], {}
    for name, value in state_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"state_dict keys must be tensor names (str), got {type(name).__name__}")
        if not hasattr(value, "dtype") or not hasattr(value, "shape"):
            raise TypeError(f"{name}: {type(value).__module__}.{type(value).__qualname__} is not an array or tensor")
        st_dtype = _SAFETENSORS_DTYPES.get(_dtype_key(value))
        if st_dtype is None:
            raise TypeError(f"{name}: dtype {value.dtype} has no safetensors name")
        if st_dtype in _FLOATS:
            data = value.detach() if _torch_io.is_tensor(value) else value
            data, bits = _arrays.as_input(data, name)
        else:
            data, bits = None, False
        names.append(name)
        dtypes.append(st_dtype)
        shapes.append([int(d) for d in value.shape])
        arrays.append(data)
        bf16_bits.append(bits)
        originals[name] = value
    outputs, passed, summary = _core.quantize_tensors(
        names, dtypes, shapes, arrays, bf16_bits, {str(k): str(v) for k, v in (metadata or {}).items()}, preset,
        list(contract.overrides), _globs(include, "include"), _globs(exclude, "exclude"), bool(strict), engine,
        threads)
    tensors: dict[str, Any] = {name: originals[name] for name in passed}
    for name, st_dtype, array in outputs:
        source_name, output = name.rsplit(".", 1)
        if _torch_io.is_tensor(originals[source_name]):
            tensors[name] = _torch_output(array, st_dtype)
        else:
            tensors[name] = _arrays.typed_output(contract.codes, output, array)
    return dict(sorted(tensors.items())), CheckpointSummary._of(summary)
