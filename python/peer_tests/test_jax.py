"""JAX 0.12.0.1 on XLA:CPU (``scaled_matmul_stablehlo.quantize``, the quantizer of
``jax.nn.scaled_dot_general``) against qexact's ``mxfp8.jax``, ``mxfp4.jax``, ``nvfp4.jax`` and
``nvfp4.jax.global``, byte for byte, both engines, under jax.jit (the presets) and op by op (the
parameters the presets name for eager JAX). jaxlib 0.12 has no Python 3.11 wheel: JAX runs in its
own Python 3.12 venv (scripts/jax-venv.sh), called once per test as a subprocess on .npy files
(jax_runner.py).

Each tensor goes to JAX in pieces of at most 64 blocks: over 128 blocks and more XLA:CPU's f32
max reduction (YNNPACK) drops a NaN or keeps it depending on its position, so a NaN block's
bytes are not a function of the block there (docs/decisions.md); below that they are, and the
pieces keep the NaN, inf, zero and tiny blocks at the first, middle and last positions.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qexact
from conftest import ENGINES, ROOT, SEED, differing, qexact_cases, random_groups
from stack_material import infer_on_peer

BF16 = ml_dtypes.bfloat16
RUNNER = Path(__file__).resolve().parent / "jax_runner.py"
# preset -> (JAX mode, global scale, block, parameters of eager JAX)
PRESETS = {
    "mxfp8.jax": ("mxfp8", "one", 32, {"byte0": "infinite"}),
    "mxfp4.jax": ("mxfp4", "one", 32, {"byte0": "infinite"}),
    "nvfp4.jax": ("nvfp4", "one", 16, {}),
    "nvfp4.jax.global": ("nvfp4", "amax", 16, {"scale_arith": "fp32"}),
}
MAX_BLOCKS = 64


def jax_python() -> str:
    path = os.environ.get("QEXACT_JAX_PYTHON_BIN") or str(ROOT / "build" / "jax-venv" / "bin" / "python")
    if not os.access(path, os.X_OK):
        pytest.fail(f"the JAX peer's Python is needed: {path} (run scripts/jax-venv.sh, or set QEXACT_JAX_PYTHON_BIN)")
    return path


def run_jax(work: Path, jobs: list[tuple[np.ndarray, str, bool, str]]) -> list[tuple[np.ndarray, ...]]:
    """JAX's (codes one per element, scale bytes[, global scale]) for each (x, mode, jit, global)."""
    work.mkdir(parents=True, exist_ok=True)
    listed = []
    rows = []
    for i, (x, mode, jit, gs) in enumerate(jobs):
        bf16 = x.dtype == BF16
        # Zero rows pad each piece to one shape per last axis, so that jit compiles once per
        # shape (zero blocks change no other block, nor the tensor's amax).
        block = 32 if mode != "nvfp4" else 16
        r = max(x.shape[0], MAX_BLOCKS * block // x.shape[1])
        rows.append(x.shape[0])
        x = np.concatenate([x, np.zeros((r - x.shape[0], x.shape[1]), dtype=x.dtype)])
        np.save(work / f"x{i}.npy", x.view(np.uint16) if bf16 else np.asarray(x, dtype=np.float32))
        listed.append({"id": f"j{i}", "input": f"x{i}.npy", "bf16": bf16, "mode": mode, "jit": jit, "global_scale": gs})
    (work / "jobs.json").write_text(json.dumps(listed))
    out = subprocess.run([jax_python(), str(RUNNER), str(work)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["jax"] == "0.12.0.1", out.stdout
    results = []
    for i, (_, mode, _, gs) in enumerate(jobs):
        r = [np.load(work / f"j{i}.q.npy")[: rows[i]], np.load(work / f"j{i}.s.npy")[: rows[i]]]
        if gs == "amax":
            r.append(np.load(work / f"j{i}.gs.npy"))
        results.append(tuple(r))
    return results


def packed(codes: np.ndarray, mode: str) -> np.ndarray:
    """JAX's codes as qexact's payload: E2M1 two per byte, element 2k in the low nibble."""
    if mode == "mxfp8":
        return codes
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def edges(block: int) -> np.ndarray:
    """Blocks at the FTZ / DAZ and scale edges: amax 2^k for k across the subnormal band and the
    top, subnormal elements beside normal ones, zero and -0.0 blocks, ties of E2M1 and E4M3."""
    rows = []
    for k in list(range(-149, 128, 4)) + [-133, -130, -128, -127, -126, -125, -121, -118, -117, 126, 127]:
        a = np.float32(2.0**k)
        for amax in (a, np.nextafter(a, np.float32(0)), np.float32(1.75) * a, np.float32(448) * a, np.float32(6) * a):
            if np.isfinite(amax) and amax > 0:
                r = amax * np.linspace(-1, 1, block, dtype=np.float32)
                r[1] = amax
                r[2] = np.float32(2.0**-130)  # a subnormal beside them
                r[3] = -np.float32(2.0**-149)
                rows.append(r)
    z = np.zeros(block, np.float32)
    rows.append(z.copy())
    nz = z.copy()
    nz[::2] = -0.0
    rows.append(nz)
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0], dtype=np.float32)
    t = np.zeros(block, np.float32)
    t[:8], t[8:16] = ties, -ties
    rows.append(t)
    rows.append(t * np.float32(2.0**-120))
    x = np.stack(rows)
    return x


def material(tmp_root: Path, preset: str) -> list[tuple[str, np.ndarray]]:
    block = PRESETS[preset][2]
    cases = [(n, x) for n, x in qexact_cases(tmp_root, preset, {}) if x.ndim and x.size and x.shape[-1] % 32 == 0]
    rnd = random_groups(SEED + 11, 96, 128, block=block, nonfinite=True)
    cases += [("random", rnd), ("random-bf16", rnd.astype(BF16)), ("edges", edges(32)),
              ("edges-bf16", edges(32).astype(BF16))]
    return cases


def pieces(x: np.ndarray, block: int) -> list[np.ndarray]:
    """x as (rows, k), in row pieces of at most MAX_BLOCKS blocks."""
    x2 = x.reshape(-1, x.shape[-1])
    per = max(1, MAX_BLOCKS * block // x2.shape[1])
    return [x2[i : i + per] for i in range(0, x2.shape[0], per)]


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("jax")


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_quantize_against_jax(tmp_root, preset, jit):
    mode, gs, block, eager_params = PRESETS[preset]
    params = {} if jit else eager_params
    tensors = [(name, p) for name, x in material(tmp_root, preset) for p in pieces(x, block) if p.size]
    theirs = run_jax(tmp_root / f"run-{preset}-{'jit' if jit else 'eager'}", [(p, mode, jit, gs) for _, p in tensors])
    diff = total = 0
    worst = {}
    for (name, x), peer in zip(tensors, theirs):
        want = [packed(peer[0], mode), peer[1]] + ([peer[2]] if len(peer) > 2 else [])
        for engine in ENGINES:
            got = qexact.quantize(x, preset, engine=engine, **params)
            for g, w in zip(got, want):
                d = differing(np.asarray(g).view(np.uint8) if np.asarray(g).dtype != np.float32 else np.asarray(g),
                              w.astype(np.asarray(g).dtype, copy=False) if w.dtype == np.float32 else w)
                diff, total = diff + d, total + np.asarray(w).nbytes
                if d:
                    worst.setdefault(f"{engine}/{name}", d)
    print(f"{preset} {'jit' if jit else 'eager'} {params}: {diff} differing of {total} bytes over {len(tensors)} tensors")
    assert diff == 0, worst


@pytest.mark.parametrize("preset", list(PRESETS))
def test_infer_names_the_jax_preset(tmp_path, preset):
    """`qexact infer` on JAX's bytes for the exported cases (each whole, under jit) names the preset.
    The cases' inputs JAX refuses (a last axis that is not whole blocks) get no device output."""
    mode, gs, block, _ = PRESETS[preset]

    def batch(inputs):
        take = [i for i, x in enumerate(inputs) if x.shape[-1] % block == 0 and x.shape[-1] >= block]
        ran = run_jax(tmp_path / "run", [(inputs[i], mode, True, gs) for i in take])
        answers = [None] * len(inputs)
        for i, r in zip(take, ran):
            answers[i] = (packed(r[0], mode), *r[1:])
        return answers

    result = infer_on_peer(tmp_path, preset, batch=batch)
    assert result["exact"], result
    assert result["preset"] == preset, result
