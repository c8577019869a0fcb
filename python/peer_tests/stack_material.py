"""Inputs and comparisons shared by the stacks' peer tests (compressed-tensors, ModelOpt): 2-D
weights and 3-D activations whose rows span 2^-140 .. 2^120, with the rows that decide a stack's
special rules -- all +0, all -0.0, a tiny amax (2^-130: a bf16 scale amax / 448 underflows), exact
E4M3 ties after the bf16 rounding of the quotient, saturating rows -- and NaN / +-inf at the first,
middle and last positions of some rows; f32 and bf16."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import torch

from conftest import random_groups

BF16 = np.dtype(ml_dtypes.bfloat16)


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """x (f32) as f32, or rounded to bf16 by torch (RNE)."""
    if dtype == "f32":
        return np.ascontiguousarray(x, dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(BF16)


def to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == BF16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x).copy())


def raw(t: torch.Tensor) -> np.ndarray:
    """A tensor's bytes as unsigned integers of its width (float8 -> uint8, bf16 -> uint16)."""
    t = t.detach().contiguous()
    if t.element_size() == 1:
        return t.view(torch.uint8).numpy().copy()
    if t.element_size() == 2:
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    return t.view(torch.int32).numpy().view(np.uint32).copy()


def scale_as_f32(t: torch.Tensor) -> np.ndarray:
    """A stored scale (f32 or bf16) as the f32 value scale.npy holds: bf16 values are exact in f32."""
    return t.detach().to(torch.float32).contiguous().numpy().copy()


def weights(seed: int, rows: int = 200, cols: int = 384, nonfinite: bool = False) -> np.ndarray:
    """f32 [rows, cols]: rows of one magnitude each (groups of 32 share theirs), special rows first."""
    x = random_groups(seed, rows, cols, block=32, nonfinite=False)
    rng = np.random.default_rng(seed + 1)
    x[0] = 0.0
    x[1] = -0.0
    x[2] = np.float32(2.0**-130) * rng.standard_normal(cols).astype(np.float32)
    x[2, 0] = np.float32(2.0**-130)
    # E4M3 ties after a bf16 quotient: amax 4.125 and values that land on grid midpoints.
    x[3] = np.float32(4.125) * rng.integers(-64, 65, cols).astype(np.float32) / 64
    x[3, 5] = np.float32(-1.140625)
    x[4] = np.float32(3.0e38) * rng.random(cols).astype(np.float32)
    x[5, ::3] = np.float32(-448.0)
    x[6] = rng.integers(-16, 17, cols).astype(np.float32) * np.float32(0.25)
    x[7, :] = 0.0
    x[7, 7] = np.float32(-1e-6)
    x[7, 8] = np.float32(1.0)
    if nonfinite:
        for r, c, v in [(8, 0, np.nan), (9, cols // 2, np.inf), (10, cols - 1, -np.inf), (11, 3, np.nan),
                        (11, 100, np.inf), (12, 200, np.nan)]:
            x[r, c % cols] = v
    return x


def nan_code(b: np.ndarray) -> np.ndarray:
    return (b & 0x7F) == 0x7F


def count_fp8(ours: np.ndarray, theirs: np.ndarray) -> tuple[int, int]:
    """(differing bytes, NaN-sign-only positions) of two E4M3 payloads. The sign of a NaN code is
    not a property of torch's loops (ATen's vector body and scalar tail give NaNs of either sign),
    so positions where both are NaN codes are counted apart, never as equal or differing."""
    ours = ours.reshape(-1).view(np.uint8)
    theirs = theirs.reshape(-1).view(np.uint8)
    both_nan = nan_code(ours) & nan_code(theirs)
    return int(np.count_nonzero((ours != theirs) & ~both_nan)), int(np.count_nonzero(both_nan & (ours != theirs)))


def count_scale(ours: np.ndarray, theirs: np.ndarray) -> int:
    """Differing f32 scales; any NaN equals any NaN (its bits come from torch's reduction)."""
    a = np.ascontiguousarray(ours, dtype=np.float32).reshape(-1)
    b = np.ascontiguousarray(theirs, dtype=np.float32).reshape(-1)
    assert a.size == b.size, f"{a.size} scales against {b.size}"
    same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
    return int(np.count_nonzero(~same))


def nibbles(packed: np.ndarray) -> np.ndarray:
    """E2M1 codes of a packed payload, element 2k from the low nibble of byte k."""
    b = np.ascontiguousarray(packed).reshape(-1).view(np.uint8)
    out = np.empty(b.size * 2, dtype=np.uint8)
    out[0::2] = b & 0xF
    out[1::2] = b >> 4
    return out


def count_e2m1(ours: np.ndarray, theirs: np.ndarray, x: np.ndarray) -> tuple[int, int]:
    """(differing codes, sign-only positions) of two packed E2M1 payloads of input x. E2M1 has no
    NaN: where x is NaN or inf the stack's code comes from a NaN quotient, whose sign bit is not a
    property of torch's loops; there only the magnitude is compared."""
    a, b = nibbles(ours), nibbles(theirs)
    free = ~np.isfinite(np.asarray(x, dtype=np.float32)).reshape(-1)
    sign_only = free & ((a ^ b) == 0x8)
    return int(np.count_nonzero((a != b) & ~sign_only)), int(np.count_nonzero(sign_only))


def mx_weights(seed: int, rows: int, cols: int, nonfinite: bool) -> np.ndarray:
    """weights() with MX's own special groups of 32: amax at a power of two at E2M1 precision
    (1.75 * 2^k, 448, 6, 7), just below, and near fp32's top (1.75 * 2^127 rounds to 2^128)."""
    x = weights(seed, rows, cols, nonfinite)
    for i, a in enumerate([448.0, 1.75 * 2.0**8, 1.5 * 2.0**8, 1.75, 1.5, 6.0, 7.0, 6.5, 0.21875, 1.75 * 2.0**127,
                           1.7 * 2.0**127, 2.0**-126, 2.0**120]):
        r, g = 16 + i // (cols // 32), i % (cols // 32)
        blk = x[r, g * 32:(g + 1) * 32]
        blk[:] = np.float32(a) * np.linspace(-0.9, 0.9, 32, dtype=np.float32)
        blk[3] = np.float32(a)
    return x


def check_fp8(stack: str, preset: str, cases, peer) -> None:
    """Each case through the peer (payload bytes, f32 scales) and both engines: 0 differing bytes,
    NaN-sign positions counted apart."""
    import qexact
    from conftest import ENGINES

    diff = total = apart = 0
    for name, x in cases:
        payload, scale = peer(x)
        for engine in ENGINES:
            q_payload, q_scale = qexact.quantize(x, preset, engine=engine)
            q_scale = np.asarray(q_scale)
            d, a = count_fp8(np.asarray(q_payload), payload)
            ds = count_scale(q_scale, scale.reshape(q_scale.shape))
            assert d + ds == 0, f"{name} ({engine}): {d} payload and {ds} scale bytes differ of {payload.size}"
            diff += d + ds
            total += payload.size + scale.size * 4
            apart += a
    print(f"{stack} {preset}: {len(cases)} cases, {diff} differing of {total} bytes, {apart} NaN-sign positions apart")


def check_mx(stack: str, preset: str, cases, peer, e2m1_nan_sign_free: bool) -> None:
    """As check_fp8 for an MX preset: E8M0 bytes exactly; E4M3 payloads with NaN signs apart; E2M1
    payloads code by code, where `e2m1_nan_sign_free` leaves the sign of codes made from a NaN
    quotient (non-finite inputs) apart."""
    import qexact
    from conftest import ENGINES

    diff = total = apart = 0
    for name, x in cases:
        payload, scale = peer(x)
        for engine in ENGINES:
            q_payload, q_scale = qexact.quantize(x, preset, engine=engine)
            q_payload = np.asarray(q_payload)
            if q_payload.dtype.itemsize == 1 and qexact.params(preset)["element"] != "e2m1":
                d, a = count_fp8(q_payload, payload)
            elif e2m1_nan_sign_free:
                d, a = count_e2m1(q_payload, payload, x)
            else:
                d, a = int(np.count_nonzero(nibbles(q_payload) != nibbles(payload))), 0
            ds = int(np.count_nonzero(np.asarray(q_scale).view(np.uint8).reshape(-1) != scale.reshape(-1)))
            assert d + ds == 0, f"{name} ({engine}): {d} payload and {ds} scale bytes differ"
            diff += d + ds
            total += payload.size + scale.size
            apart += a
    print(f"{stack} {preset}: {len(cases)} cases, {diff} differing of {total} bytes, {apart} NaN-sign positions apart")


def infer_on_peer(tmp: Path, preset: str, peer=None, scale_of=None, batch=None, answered_only: bool = False) -> dict:
    """`qexact cases --preset P` run through the peer (payload.npy and scale.npy beside each input
    it takes, as a device would write them), then `qexact infer --json` on that lab. ``peer``
    takes one (rows, k) input; ``batch`` (a peer in another process) takes the list of them and
    returns their outputs in order, None for an input it refuses. ``answered_only``: the lab's
    manifest keeps only the cases the peer answered (a peer that leaves some shapes alone, where
    infer would otherwise search for the refusal too)."""
    import json
    import subprocess

    import qexact
    from conftest import cli

    lab = tmp / "lab"
    subprocess.run([cli(), "cases", "--preset", preset, "--out", str(lab)], check=True, capture_output=True)
    manifest = json.loads((lab / "manifest.json").read_text())
    todo = []
    for case in manifest["cases"]:
        d = lab / case["name"]
        x = np.load(d / "input.npy")
        if x.dtype == np.uint16:
            x = x.view(BF16)
        if case.get("expect_error"):
            continue
        if x.size == 0:  # nothing to quantize: a device answers with empty tensors of the contract's shapes
            for name, dtype, dims in qexact.outputs(preset, x.shape):
                np.save(d / f"{name}.npy", np.zeros(dims, dtype={"u8": np.uint8, "i8": np.int8, "f32": np.float32,
                                                                  "f16": np.float16}[dtype]))
            continue
        todo.append((d, x))

    def one(x):
        try:
            return peer(x.reshape(-1, x.shape[-1]))
        except Exception:  # a shape the library refuses: no device output for this case
            return None

    answers = batch([x.reshape(-1, x.shape[-1]) for _, x in todo]) if batch else [one(x) for _, x in todo]
    ran = 0
    for (d, x), outputs in zip(todo, answers):
        if outputs is None:
            continue
        payload, scale = outputs[:2]
        shapes = {name: dims for name, _, dims in qexact.outputs(preset, x.shape)}
        np.save(d / "payload.npy", payload.reshape(shapes["payload"]))
        np.save(d / "scale.npy", (scale_of(scale) if scale_of else scale).reshape(shapes["scale"]))
        if len(outputs) > 2:  # nvfp4's tensor scale
            np.save(d / "tensor_scale.npy", np.asarray(outputs[2], dtype=np.float32).reshape(shapes["tensor_scale"]))
        ran += 1
    assert ran >= 10, f"the peer took {ran} cases"
    if answered_only:
        answered = {d.name for (d, _), outputs in zip(todo, answers) if outputs is not None}
        manifest["cases"] = [c for c in manifest["cases"] if c.get("expect_error") or c["name"] in answered]
        (lab / "manifest.json").write_text(json.dumps(manifest, indent=1))
    out = subprocess.run([cli(), "infer", str(lab), "--json"], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    result = json.loads(out.stdout)
    result["lab"] = lab
    return result


def nan_cases(lab: Path) -> set[str]:
    """The lab's cases whose input holds a NaN or an inf."""
    out = set()
    for d in lab.iterdir():
        if (d / "input.npy").exists():
            x = np.load(d / "input.npy")
            x = x.view(BF16) if x.dtype == np.uint16 else x
            if not np.isfinite(np.asarray(x, dtype=np.float32)).all():
                out.add(d.name)
    return out


def nvfp4_tensors(seed: int, dtype: str) -> list[tuple[str, np.ndarray]]:
    """NVFP4 material, finite (the stacks' presets reject non-finite input): weights() (zero,
    -0.0, tiny, tie and saturating rows), blocks at E2M1 ties of their own scale, and whole tensors
    at the tensor scale's edges -- all zero, an amax whose 2688-th underflows (ModelOpt's t = 0),
    one whose 2688 / amax overflows (compressed-tensors' gs = 1), 2^-126, 1e30."""
    x = weights(seed, 96, 256)
    rng = np.random.default_rng(seed + 5)
    ties = np.array([6, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, -0.0, -.1, -.25, -5, 0, 1, 2, 4], dtype=np.float32)
    for r in range(20, 40):
        x[r] = np.tile(ties, 16) * np.float32(2.0 ** int(rng.integers(-20, 20)))
    out = [(f"weights {x.shape[0]}x{x.shape[1]}", as_dtype(x, dtype))]
    small = rng.standard_normal((4, 64)).astype(np.float32)
    for name, top in [("all zero", 0.0), ("amax 1e-42", 1e-42), ("amax 2^-120", 2.0**-120), ("amax 2^-126", 2.0**-126),
                      ("amax 1e30", 1e30)]:
        t = small / np.abs(small).max() * np.float32(top)
        out.append((name, as_dtype(t.astype(np.float32), dtype)))
    return out


def check_nvfp4(stack: str, preset: str, cases, peer) -> None:
    """Each case through the peer (packed payload, E4M3 block scale codes, the fp32 tensor scale)
    and both engines: 0 differing codes and bytes, the tensor scale's bits equal."""
    import qexact
    from conftest import ENGINES

    diff = total = 0
    for name, x in cases:
        payload, scale, tensor_scale = peer(x)
        for engine in ENGINES:
            q_payload, q_scale, q_tensor = qexact.quantize(x, preset, engine=engine)
            d = int(np.count_nonzero(nibbles(np.asarray(q_payload)) != nibbles(payload)))
            ds = int(np.count_nonzero(np.asarray(q_scale).view(np.uint8).reshape(-1) != scale.reshape(-1)))
            dt = int(np.asarray(q_tensor, dtype=np.float32).reshape(-1).view(np.uint32)[0] !=
                     np.asarray(tensor_scale, dtype=np.float32).reshape(-1).view(np.uint32)[0])
            assert d + ds + dt == 0, f"{name} ({engine}): {d} codes, {ds} scale bytes, {dt} tensor scale differ"
            diff += d + ds + dt
            total += payload.size + scale.size + 4
    print(f"{stack} {preset}: {len(cases)} cases, {diff} differing of {total} bytes")


def check_nvfp4_exported(tmp: Path, stack: str, preset: str, peer) -> None:
    """Every finite case `qexact cases` exports for an nvfp4 preset that rejects non-finite input
    (whole blocks of 16 along the last axis), as a 2-D weight, through check_nvfp4."""
    from conftest import qexact_cases

    cases = [(n, x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x) for n, x in qexact_cases(tmp, preset, {})]
    usable = [(n, x) for n, x in cases
              if x.size and x.shape[-1] % 16 == 0 and np.isfinite(np.asarray(x, dtype=np.float32)).all()]
    assert len(usable) >= 10, [n for n, _ in cases]
    check_nvfp4(stack, preset, usable, peer)
