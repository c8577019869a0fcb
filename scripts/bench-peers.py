#!/usr/bin/env python3
"""qexact's Python API against the peers it reproduces, on one machine, in one run, one table.

    build/python-venv/bin/python scripts/bench-peers.py [--elements N] [--threads T] [--rounds R]

Run it in the venv of scripts/python-venv.sh (pinned torch, torchao, gguf, ml_dtypes beside
qexact). Each row quantizes the same values, (N / 4096, 4096), through one implementation:
torchao's ``to_mx`` (FLOOR, E4M3, blocks of 32) eager and under ``torch.compile``, torch's
plain cast to float8_e4m3fn (no scales: a floor for any MXFP8 quantizer written in torch),
ml_dtypes' cast to float8_e4m3fn (numpy, one thread), gguf-py's Q8_0 quantize (numpy) and
qexact's presets of the same contracts, allocating and with ``out=``. GB/s counts the bytes of
the input read (bf16 2 bytes, f32 4) per second, from the median of R timed calls after one
warm-up call (torch.compile's compilation is in the warm-up, not in the time).

A benchmark, not a test: it asserts nothing about speed and is not run by CI. It does check
that qexact and each peer it is paired with give the same bytes, so that the table compares
equal work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=1 << 24, help="elements per tensor (multiple of 4096)")
    p.add_argument("--threads", type=int, default=2, help="threads for torch and qexact")
    p.add_argument("--rounds", type=int, default=7, help="timed calls per row (median reported)")
    return p.parse_args()


def median_seconds(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm-up: compilation, first-touch of reused buffers
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
    import gguf
    import ml_dtypes
    import numpy as np
    import torch
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

    mx_out = (np.empty_like(payload), np.empty_like(scale))
    q8_out = (np.empty_like(codes), np.empty_like(d))
    rows: list[tuple[str, str, str, Callable[[], Any]]] = [
        ("MXFP8 E4M3 FLOOR", "torchao to_mx, eager", "bf16", to_mx_eager),
        ("MXFP8 E4M3 FLOOR", "torchao to_mx, torch.compile", "bf16", lambda: to_mx_compiled(x_bf16_t)),
        ("MXFP8 E4M3 FLOOR", "qexact mxfp8.torchao.floor", "bf16",
         lambda: qexact.quantize(x_bf16, "mxfp8.torchao.floor", threads=T)),
        ("MXFP8 E4M3 FLOOR", "qexact mxfp8.torchao.floor, out=", "bf16",
         lambda: qexact.quantize(x_bf16, "mxfp8.torchao.floor", out=mx_out, threads=T)),
        ("E4M3 cast, no scales", "torch .to(float8_e4m3fn)", "bf16", lambda: x_bf16_t.to(torch.float8_e4m3fn)),
        ("E4M3 cast, no scales", "ml_dtypes astype (1 thread)", "bf16",
         lambda: x_bf16.astype(ml_dtypes.float8_e4m3fn)),
        ("Q8_0", "gguf-py quants.quantize (numpy)", "f32",
         lambda: gguf.quants.quantize(x_f32, gguf.GGMLQuantizationType.Q8_0)),
        ("Q8_0", "qexact q8_0.ggml", "f32", lambda: qexact.quantize(x_f32, "q8_0.ggml", threads=T)),
        ("Q8_0", "qexact q8_0.ggml, out=", "f32", lambda: qexact.quantize(x_f32, "q8_0.ggml", out=q8_out, threads=T)),
    ]
    print(f"# {args.elements} elements {shape}, {T} threads (torch {torch.__version__}, "
          f"torchao {__import__('torchao').__version__}, gguf-py, ml_dtypes {ml_dtypes.__version__}, "
          f"qexact {qexact.__version__}); OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; "
          f"median of {args.rounds}; GB/s of input read; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("| format | implementation | in | ms | GB/s |")
    print("|---|---|---|---|---|")
    for fmt, name, dtype, fn in rows:
        seconds = median_seconds(fn, args.rounds)
        in_bytes = args.elements * (2 if dtype == "bf16" else 4)
        print(f"| {fmt} | {name} | {dtype} | {seconds * 1e3:.1f} | {in_bytes / seconds / 1e9:.2f} |", flush=True)


if __name__ == "__main__":
    main()
