"""The JAX peer, run by the peer suite in its own Python 3.12 venv (scripts/jax-venv.sh):

    build/jax-venv/bin/python python/peer_tests/jax_runner.py DIR

DIR/jobs.json lists jobs ``{"id", "input", "mode", "jit", "global_scale"}``: ``input`` an .npy in
DIR (float32, or bfloat16 stored as its uint16 bits with ``"bf16": true``), ``mode`` mxfp8 |
mxfp4 | nvfp4, ``jit`` whether the quantizer runs under jax.jit (else op by op), and for nvfp4
``global_scale`` "one" (get_scaled_dot_general_config's default) or "amax" (JAX's own tests:
max|x| / (6 * 448), computed under the same jit or eagerly). For each job it writes DIR/<id>.q.npy
(one uint8 code per element, as JAX's float8 / float4 arrays hold them), DIR/<id>.s.npy (the
scale bytes) and, with a global scale, DIR/<id>.gs.npy (float32). The peer is
jax._src.cudnn.scaled_matmul_stablehlo.quantize, the quantizer of jax.nn.scaled_dot_general.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax._src.cudnn.scaled_matmul_stablehlo import quantize
from jax.nn import get_scaled_dot_general_config


def global_scale(x):
    data_max = jnp.finfo(jnp.float4_e2m1fn).max.astype(jnp.float32)
    scale_max = jnp.finfo(jnp.float8_e4m3fn).max.astype(jnp.float32)
    return jnp.max(jnp.abs(x)).astype(jnp.float32) / (data_max * scale_max)


_quantizers: dict = {}


def quantizer(mode: str, amax_scale: bool, jit: bool):
    """One function per kind of job, so that jit compiles once per input shape."""
    key = (mode, amax_scale, jit)
    if key not in _quantizers:

        def quantize_with_its_scale(a):
            gs = global_scale(a) if amax_scale else None
            config = get_scaled_dot_general_config(mode, None if gs is None else jnp.reshape(gs, (1,)))
            q, s = quantize(a, config)
            return q, s, (gs if gs is not None else jnp.float32(1))

        _quantizers[key] = jax.jit(quantize_with_its_scale) if jit else quantize_with_its_scale
    return _quantizers[key]


def run(job: dict, x: np.ndarray):
    mode = job["mode"]
    fn = quantizer(mode, mode == "nvfp4" and job.get("global_scale") == "amax", job["jit"])
    q, s, gs = fn(jnp.asarray(x)[None])
    q = np.asarray(q)[0]
    s = np.asarray(s)[0]
    return q.view(np.uint8), s.view(np.uint8), np.asarray(gs, dtype=np.float32)


def main(d: Path) -> None:
    jobs = json.loads((d / "jobs.json").read_text())
    for job in jobs:
        x = np.load(d / job["input"])
        if job.get("bf16"):
            x = x.view(ml_dtypes.bfloat16)
        q, s, gs = run(job, x)
        np.save(d / f"{job['id']}.q.npy", q)
        np.save(d / f"{job['id']}.s.npy", s)
        if job["mode"] == "nvfp4" and job.get("global_scale") == "amax":
            np.save(d / f"{job['id']}.gs.npy", gs.reshape(()))
    print(json.dumps({"jax": jax.__version__, "jobs": len(jobs)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
