#!/usr/bin/env python3
"""Exact check of a `qexact quantize` checkpoint output (stdlib only).

    check-checkpoint.py QEXACT IN.safetensors OUT.safetensors WORKDIR

For every tensor OUT's __metadata__ lists as quantized, writes the input tensor as .npy,
runs `QEXACT quantize` on it with the preset and every parameter recorded in OUT, and requires
<name>.payload and <name>.scale to equal payload.npy and scale.npy byte for byte (and shape).
Every other tensor must be the input's, unchanged. Prints one line per mismatch; exit 1 if any.
"""
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path


def read_safetensors(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    buf = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = (t["dtype"], tuple(t["shape"]), buf[begin:end])
    return meta, tensors


NPY_DESCR = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}  # bf16 as its bit patterns, with --dtype bf16


def write_npy(path, descr, shape, raw):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * ((-(10 + len(header) + 1)) % 64) + "\n"
    Path(path).write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + raw)


def read_npy(path):
    data = Path(path).read_bytes()
    major = data[6]
    (n,) = struct.unpack_from("<H" if major == 1 else "<I", data, 8)
    start = 10 + n if major == 1 else 12 + n
    header = data[start - n:start].decode()
    shape_text = header.split("'shape': (")[1].split(")")[0]
    shape = tuple(int(d) for d in shape_text.split(",") if d.strip())
    return shape, data[start:]


def main():
    qexact, src, out, work = sys.argv[1:5]
    work = Path(work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _, inputs = read_safetensors(src)
    meta, outputs = read_safetensors(out)
    quantized = json.loads(meta["qexact.quantized"])
    params = [f"{k[len('qexact.param.'):]}={v}" for k, v in sorted(meta.items()) if k.startswith("qexact.param.")]
    bad = 0
    checked = 0
    for name, (dtype, shape, raw) in sorted(inputs.items()):
        if name not in quantized:
            if outputs.get(name) != (dtype, shape, raw):
                print(f"{name}: not quantized, but not copied unchanged")
                bad += 1
            continue
        npy = work / "x.npy"
        write_npy(npy, NPY_DESCR[dtype], shape, raw)
        # The reference engine: the checkpoint went through the fast kernels, the check does not.
        args = [qexact, "quantize", "--engine", "reference", "--preset", meta["qexact.preset"], str(npy), "--out", str(work / "q")]
        for p in params:
            args += ["--param", p]
        if dtype == "BF16":
            args += ["--dtype", "bf16"]
        shutil.rmtree(work / "q", ignore_errors=True)
        subprocess.run(args, check=True)
        for part in ("payload", "scale"):
            shape_npy, raw_npy = read_npy(work / "q" / f"{part}.npy")
            _, shape_st, raw_st = outputs[f"{name}.{part}"]
            if shape_npy != shape_st or raw_npy != raw_st:
                differing = sum(a != b for a, b in zip(raw_npy, raw_st)) + abs(len(raw_npy) - len(raw_st))
                print(f"{name}.{part}: {differing} of {len(raw_npy)} bytes differ from quantizing it as .npy")
                bad += 1
        checked += 1
    print(f"checked {checked} quantized tensors byte for byte against `qexact quantize --engine reference` of each as .npy, "
          f"{len(inputs) - checked} copied tensors unchanged: {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
