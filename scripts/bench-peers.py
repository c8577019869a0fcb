#!/usr/bin/env python3
"""qexact's Python API against the peers it reproduces, on one machine, in one run, one table.

    build/python-venv/bin/python scripts/bench-peers.py [--elements N] [--threads T] [--rounds R]

Run it in the venv of scripts/python-venv.sh (pinned torch, torchao, gguf, ml_dtypes,
compressed-tensors and ModelOpt beside qexact), with the JAX venv of scripts/jax-venv.sh built
(``--jax-python``, or QEXACT_JAX_PYTHON_BIN, names another interpreter). Each row quantizes the
same values, (N / 4096, 4096), through one implementation:

- torchao's ``to_mx`` (FLOOR, E4M3, blocks of 32) eager and under ``torch.compile``;
- torch's plain cast to float8_e4m3fn (no scales: a floor for any MXFP8 quantizer written in
  torch) and ml_dtypes' cast to float8_e4m3fn (numpy, one thread);
- gguf-py's Q8_0 quantize (numpy);
- compressed-tensors' FP8 weight path per channel and per tensor (the observer's min / max,
  ``calculate_qparams``, ``forward.quantize``) and its NVFP4A16 weight path (``generate_gparam``,
  the group min / max through ``calculate_qparams``, ``NVFP4PackedCompressor.compress``);
- ModelOpt's ``FP8QTensor.quantize`` per tensor and per channel and ``NVFP4QTensor.quantize``;
- JAX's ``scaled_matmul_stablehlo.quantize`` (the quantizer of ``jax.nn.scaled_dot_general``)
  for MXFP8 and NVFP4 under ``jax.jit`` on XLA:CPU, in a subprocess of the JAX venv;

and qexact's presets of the same contracts (allocating, and for MXFP8 FLOOR and Q8_0 also with
``out=``). GB/s counts the bytes of the input read (bf16 2 bytes, f32 4) per second, from the
median of R timed calls after one warm-up call (torch.compile's and jax.jit's compilation is in
the warm-up, not in the time).

A benchmark, not a test: it asserts nothing about speed and is not run by CI. It does check
that qexact and each peer it is paired with give the same bytes, so that the table compares
equal work.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent

# Run by the JAX venv's Python: argv is DIR ROUNDS MODE...; reads DIR/x.npy (bf16 as its uint16
# bits), writes DIR/<mode>.q.npy (one code per element, as JAX's float8 / float4 arrays hold
# them) and DIR/<mode>.s.npy (scale bytes) from the warm-up call, and prints the medians as JSON.
# The call is jax_runner.py's (python/peer_tests): the leading batch axis, and for NVFP4
# get_scaled_dot_general_config's default global scale of one.
JAX_BENCH = r"""
import json, statistics, sys, time
from pathlib import Path
import jax, ml_dtypes, numpy as np
from jax._src.cudnn.scaled_matmul_stablehlo import quantize
from jax.nn import get_scaled_dot_general_config

d, rounds = Path(sys.argv[1]), int(sys.argv[2])
x = jax.device_put(np.load(d / "x.npy").view(ml_dtypes.bfloat16)[None])
seconds = {}
for mode in sys.argv[3:]:
    config = get_scaled_dot_general_config(mode, None)
    fn = jax.jit(lambda a, config=config: quantize(a, config))
    q, s = jax.block_until_ready(fn(x))
    np.save(d / f"{mode}.q.npy", np.asarray(q)[0].view(np.uint8))
    np.save(d / f"{mode}.s.npy", np.asarray(s)[0].view(np.uint8))
    del q, s
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(fn(x))
        times.append(time.perf_counter() - start)
    seconds[mode] = statistics.median(times)
print(json.dumps({"jax": jax.__version__, "seconds": seconds}))
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=1 << 24, help="elements per tensor (multiple of 4096)")
    p.add_argument("--threads", type=int, default=2, help="threads for torch and qexact")
    p.add_argument("--rounds", type=int, default=7, help="timed calls per row (median reported)")
    p.add_argument("--jax-python", default=os.environ.get("QEXACT_JAX_PYTHON_BIN")
                   or str(ROOT / "build" / "jax-venv" / "bin" / "python"),
                   help="the Python of the JAX venv (scripts/jax-venv.sh)")
    return p.parse_args()


def median_seconds(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm-up: compilation, first-touch of reused buffers
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_jax(python: str, x_bits: Any, modes: list[str], rounds: int, threads: int) -> tuple[str, dict, dict]:
    """JAX's version, its median seconds per mode, and its (codes, scale bytes) per mode."""
    import numpy as np

    if not os.access(python, os.X_OK):
        raise SystemExit(f"the JAX peer's Python is needed: {python} (run scripts/jax-venv.sh, or pass --jax-python)")
    cpus = sorted(os.sched_getaffinity(0))
    # XLA:CPU sizes its thread pools by the CPUs it may run on (measured: 13 threads on 2 CPUs,
    # 7 pinned to 1): give it --threads of them, as torch and qexact get --threads threads.
    pin = (lambda: os.sched_setaffinity(0, cpus[:threads])) if threads < len(cpus) else None
    with tempfile.TemporaryDirectory(prefix="bench-peers-jax-") as tmp:
        d = Path(tmp)
        np.save(d / "x.npy", x_bits)
        out = subprocess.run([python, "-c", JAX_BENCH, str(d), str(rounds), *modes],
                             capture_output=True, text=True, preexec_fn=pin)
        if out.returncode != 0:
            raise SystemExit(f"the JAX peer failed:\n{out.stderr[-4000:]}")
        report = json.loads(out.stdout.strip().splitlines()[-1])
        results = {m: (np.load(d / f"{m}.q.npy"), np.load(d / f"{m}.s.npy")) for m in modes}
    return report["jax"], report["seconds"], results


def main() -> None:
    args = parse_args()
    if args.elements <= 0 or args.elements % 4096:
        raise SystemExit("--elements must be a positive multiple of 4096")
    # Before torch and qexact start their thread pools. torch and qexact each bring an OpenMP
    # runtime; with the default (spinning) wait policy each one's idle threads keep the 2 cores
    # busy while the other runs (measured: torchao eager 278 -> 149 ms, qexact 14 -> 10 ms with
    # PASSIVE), so every row runs with passive waiting.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    warnings.filterwarnings("ignore")  # modelopt warns about CUDA extensions and untested transformers
    import compressed_tensors
    import gguf
    import ml_dtypes
    import modelopt
    import modelopt.torch.quantization  # noqa: F401  (registers what its qtensors need)
    import numpy as np
    import torch
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.offload import update_offload_parameter
    from compressed_tensors.quantization import (QuantizationArgs, initialize_module_for_quantization,
                                                 preset_name_to_scheme)
    from compressed_tensors.quantization.lifecycle.forward import quantize as ct_quantize
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
    from modelopt.torch.quantization.qtensor import FP8QTensor, NVFP4QTensor
    from torchao.prototype.mx_formats.mx_tensor import ScaleCalculationMode, to_mx

    import qexact

    torch.set_num_threads(args.threads)
    shape = (args.elements // 4096, 4096)
    gen = torch.Generator().manual_seed(7)
    x_f32_t = torch.randn(shape, generator=gen, dtype=torch.float32)
    x_bf16_t = x_f32_t.to(torch.bfloat16)
    x_bf16 = x_bf16_t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)  # the same memory
    x_f32 = x_f32_t.numpy()
    T = args.threads

    def raw(t: torch.Tensor) -> bytes:
        return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()

    def ours(preset: str) -> list[bytes]:
        return [np.asarray(a).view(np.uint8).tobytes() if np.asarray(a).itemsize == 1 else np.asarray(a).tobytes()
                for a in qexact.quantize(x_bf16, preset, threads=T)]

    def to_mx_eager() -> Any:
        return to_mx(x_bf16_t, torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR)

    to_mx_compiled = torch.compile(lambda t: to_mx(t, torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR))

    # Same bytes before timing: torchao FLOOR is qexact's mxfp8.torchao.floor (scales: torchao's
    # E8M0 bytes [rows, K/32]; elements: float8_e4m3fn), gguf Q8_0 is q8_0.ggml (d as f16, then 32 codes).
    scale_t, data_t = to_mx_eager()
    payload, scale = qexact.quantize(x_bf16, "mxfp8.torchao.floor", threads=T)
    assert payload.view(np.uint8).tobytes() == data_t.view(torch.uint8).numpy().tobytes(), "to_mx payload differs"
    assert scale.tobytes() == scale_t.view(torch.uint8).numpy().tobytes(), "to_mx scales differ"
    scale_c, data_c = to_mx_compiled(x_bf16_t)
    assert data_c.view(torch.uint8).numpy().tobytes() == data_t.view(torch.uint8).numpy().tobytes()
    q8 = gguf.quants.quantize(x_f32, gguf.GGMLQuantizationType.Q8_0)
    codes, d = qexact.quantize(x_f32, "q8_0.ggml", threads=T)
    blocks = q8.reshape(-1, 34)
    assert blocks[:, :2].tobytes() == d.tobytes() and blocks[:, 2:].tobytes() == codes.tobytes(), "Q8_0 differs"

    # compressed-tensors as python/peer_tests/test_compressed_tensors.py drives it: the peer's
    # time includes the min / max the observer reduces, since qexact's includes its amax. The
    # scale stays in the input's dtype (bf16, exact in qexact's f32 scale).
    def ct_fp8(strategy: str) -> tuple[torch.Tensor, torch.Tensor]:
        a = QuantizationArgs(num_bits=8, type="float", symmetric=True, strategy=strategy, dynamic=False)
        t = x_bf16_t
        lo, hi = (t.amin().reshape(1), t.amax().reshape(1)) if strategy == "tensor" else \
            (t.amin(dim=1, keepdim=True), t.amax(dim=1, keepdim=True))
        s, zp = calculate_qparams(lo, hi, a)
        return ct_quantize(t, s.to(t.dtype), zp, a, dtype=torch.float8_e4m3fn), s.to(t.dtype)

    # The NVFP4A16 Linear is initialised once, outside the time (llm-compressor does that before
    # calibrating); the global scale, the block scales and the compressor's quantize + pack are timed.
    nvfp4_scheme = preset_name_to_scheme("NVFP4A16", ["Linear"])
    linear = torch.nn.Linear(shape[1], shape[0], bias=False, dtype=torch.bfloat16)
    linear.weight.data.copy_(x_bf16_t)
    initialize_module_for_quantization(linear, nvfp4_scheme, force_zero_point=True)

    def ct_nvfp4() -> dict:
        w = linear.weight.data
        update_offload_parameter(linear, "weight_global_scale", generate_gparam(w.amin(), w.amax()))
        g = w.unflatten(-1, (-1, 16))
        s, zp = calculate_qparams(g.amin(dim=-1), g.amax(dim=-1), nvfp4_scheme.weights,
                                  global_scale=linear.weight_global_scale)
        update_offload_parameter(linear, "weight_scale", s)
        if hasattr(linear, "weight_zero_point"):
            update_offload_parameter(linear, "weight_zero_point", zp)
        return NVFP4PackedCompressor.compress({k: v.data for k, v in linear.named_parameters()}, nvfp4_scheme)

    for strategy in ("channel", "tensor"):
        q, s = ct_fp8(strategy)
        assert ours(f"fp8.ct.{strategy}") == [raw(q), raw(s.float())], f"compressed-tensors FP8 {strategy} differs"
    packed = ct_nvfp4()
    assert ours("nvfp4.ct") == [raw(packed[k].float() if k == "weight_global_scale" else packed[k])
                                for k in ("weight_packed", "weight_scale", "weight_global_scale")], \
        "compressed-tensors NVFP4 differs"

    # ModelOpt's qtensors as python/peer_tests/test_modelopt.py calls them (axis=0: a scale per row).
    mo_axis = {"tensor": {}, "channel": {"axis": 0}}
    for kind, kw in mo_axis.items():
        q, s = FP8QTensor.quantize(x_bf16_t, **kw)
        assert ours(f"fp8.modelopt.{kind}") == [raw(q._quantized_data), raw(s.float())], f"ModelOpt FP8 {kind} differs"
    q, s, t = NVFP4QTensor.quantize(x_bf16_t, 16)
    assert ours("nvfp4.modelopt") == [raw(q._quantized_data), raw(s), raw(t.float())], "ModelOpt NVFP4 differs"

    # JAX times itself in its own venv, before the table (a subprocess per row would compile
    # again); its codes come one per byte, NVFP4's packed here as qexact's payload (element 2k
    # in the low nibble). With a global scale of one, nvfp4.jax has no tensor scale output.
    jax_version, jax_seconds, jax_out = run_jax(args.jax_python, x_bf16.view(np.uint16), ["mxfp8", "nvfp4"],
                                                args.rounds, T)
    jq, js = jax_out["mxfp8"]
    assert ours("mxfp8.jax") == [jq.tobytes(), js.tobytes()], "JAX MXFP8 differs"
    jq, js = jax_out["nvfp4"]
    jq = (jq[..., 0::2] & 0xF) | ((jq[..., 1::2] & 0xF) << 4)
    assert ours("nvfp4.jax") == [jq.tobytes(), js.tobytes()], "JAX NVFP4 differs"
    del packed, jax_out  # only the input stays resident while rows run

    def jax_row(mode: str) -> Callable[[], float]:
        return lambda: jax_seconds[mode]

    mx_out = (np.empty_like(payload), np.empty_like(scale))
    q8_out = (np.empty_like(codes), np.empty_like(d))
    R = args.rounds

    def timed(fn: Callable[[], Any]) -> Callable[[], float]:
        return lambda: median_seconds(fn, R)

    def qexact_row(preset: str, x: Any = x_bf16) -> Callable[[], float]:
        return timed(lambda: qexact.quantize(x, preset, threads=T))

    rows: list[tuple[str, str, str, Callable[[], float]]] = [
        ("MXFP8 E4M3 FLOOR", "torchao to_mx, eager", "bf16", timed(to_mx_eager)),
        ("MXFP8 E4M3 FLOOR", "torchao to_mx, torch.compile", "bf16", timed(lambda: to_mx_compiled(x_bf16_t))),
        ("MXFP8 E4M3 FLOOR", "qexact mxfp8.torchao.floor", "bf16", qexact_row("mxfp8.torchao.floor")),
        ("MXFP8 E4M3 FLOOR", "qexact mxfp8.torchao.floor, out=", "bf16",
         timed(lambda: qexact.quantize(x_bf16, "mxfp8.torchao.floor", out=mx_out, threads=T))),
        ("MXFP8 E4M3 (JAX)", "JAX scaled_dot_general quantize, jax.jit", "bf16", jax_row("mxfp8")),
        ("MXFP8 E4M3 (JAX)", "qexact mxfp8.jax", "bf16", qexact_row("mxfp8.jax")),
        ("E4M3 cast, no scales", "torch .to(float8_e4m3fn)", "bf16", timed(lambda: x_bf16_t.to(torch.float8_e4m3fn))),
        ("E4M3 cast, no scales", "ml_dtypes astype (1 thread)", "bf16",
         timed(lambda: x_bf16.astype(ml_dtypes.float8_e4m3fn))),
        ("FP8 E4M3 per channel", "compressed-tensors min/max, calculate_qparams, quantize", "bf16",
         timed(lambda: ct_fp8("channel"))),
        ("FP8 E4M3 per channel", "qexact fp8.ct.channel", "bf16", qexact_row("fp8.ct.channel")),
        ("FP8 E4M3 per channel", "ModelOpt FP8QTensor.quantize(axis=0)", "bf16",
         timed(lambda: FP8QTensor.quantize(x_bf16_t, axis=0))),
        ("FP8 E4M3 per channel", "qexact fp8.modelopt.channel", "bf16", qexact_row("fp8.modelopt.channel")),
        ("FP8 E4M3 per tensor", "compressed-tensors min/max, calculate_qparams, quantize", "bf16",
         timed(lambda: ct_fp8("tensor"))),
        ("FP8 E4M3 per tensor", "qexact fp8.ct.tensor", "bf16", qexact_row("fp8.ct.tensor")),
        ("FP8 E4M3 per tensor", "ModelOpt FP8QTensor.quantize", "bf16", timed(lambda: FP8QTensor.quantize(x_bf16_t))),
        ("FP8 E4M3 per tensor", "qexact fp8.modelopt.tensor", "bf16", qexact_row("fp8.modelopt.tensor")),
        ("NVFP4", "compressed-tensors NVFP4A16 (gparam, qparams, compress)", "bf16", timed(ct_nvfp4)),
        ("NVFP4", "qexact nvfp4.ct", "bf16", qexact_row("nvfp4.ct")),
        ("NVFP4", "ModelOpt NVFP4QTensor.quantize", "bf16", timed(lambda: NVFP4QTensor.quantize(x_bf16_t, 16))),
        ("NVFP4", "qexact nvfp4.modelopt", "bf16", qexact_row("nvfp4.modelopt")),
        ("NVFP4 (global scale 1)", "JAX scaled_dot_general quantize, jax.jit", "bf16", jax_row("nvfp4")),
        ("NVFP4 (global scale 1)", "qexact nvfp4.jax", "bf16", qexact_row("nvfp4.jax")),
        ("Q8_0", "gguf-py quants.quantize (numpy)", "f32",
         timed(lambda: gguf.quants.quantize(x_f32, gguf.GGMLQuantizationType.Q8_0))),
        ("Q8_0", "qexact q8_0.ggml", "f32", qexact_row("q8_0.ggml", x_f32)),
        ("Q8_0", "qexact q8_0.ggml, out=", "f32", timed(lambda: qexact.quantize(x_f32, "q8_0.ggml", out=q8_out, threads=T))),
    ]
    print(f"# {args.elements} elements {shape}, {T} threads (torch {torch.__version__}, "
          f"torchao {__import__('torchao').__version__}, gguf-py, ml_dtypes {ml_dtypes.__version__}, "
          f"compressed-tensors {compressed_tensors.__version__}, modelopt {modelopt.__version__}, "
          f"jax {jax_version} (XLA:CPU, its own venv), "
          f"qexact {qexact.__version__}); OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; "
          f"median of {args.rounds}; GB/s of input read; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("| format | implementation | in | ms | GB/s |")
    print("|---|---|---|---|---|")
    for fmt, name, dtype, seconds_of in rows:
        seconds = seconds_of()
        in_bytes = args.elements * (2 if dtype == "bf16" else 4)
        print(f"| {fmt} | {name} | {dtype} | {seconds * 1e3:.1f} | {in_bytes / seconds / 1e9:.2f} |", flush=True)


if __name__ == "__main__":
    main()
