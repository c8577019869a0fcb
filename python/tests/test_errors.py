"""Bad inputs raise ValueError (a bad preset, parameter, shape or value) or TypeError (an
unsupported dtype or object), each naming the problem and, where there is one, the first
offending index."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qexact


def ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype=dtype)


def with_value(x, index, value):
    x = x.copy()
    x[index] = value
    return x


CASES = [
    # (id, call, exception, message pattern)
    ("unknown preset", lambda: qexact.quantize(ones(2, 32), "nope"), ValueError,
     r"^unknown preset 'nope' \(see `qexact presets`\)$"),
    ("preset typo", lambda: qexact.quantize(ones(2, 32), "mxfp8.torchao.flor"), ValueError,
     r"^unknown preset 'mxfp8.torchao.flor': did you mean 'mxfp8.torchao.floor'\? \(see `qexact presets`\)$"),
    ("parameter typo", lambda: qexact.params("mx.ocp", blok=16), ValueError,
     r"^unknown parameter 'blok': did you mean 'block'\? \(this contract takes: "),
    ("value typo", lambda: qexact.params("mx.ocp", layout="rowmjaor"), ValueError,
     r"^parameter layout: unknown value 'rowmjaor': did you mean 'rowmajor'\? \("),
    ("unknown parameter", lambda: qexact.params("mx.ocp", scale_mode="before"), ValueError,
     r"^parameter 'scale_mode' does not apply to the mx family of preset 'mx.ocp'$"),
    ("bad parameter value", lambda: qexact.quantize(ones(2, 32), "mx.ocp", block=20), ValueError,
     r"^invalid contract: block must be 16 or 32, got 20$"),
    ("parameter of no parameter type", lambda: qexact.params("mx.ocp", block=[32]), TypeError,
     r"^parameter block: list is not a parameter value"),
    ("NaN in a finite-only contract", lambda: qexact.quantize(with_value(ones(3, 40), (1, 17), np.nan),
                                                              "int8.token.blaze"), ValueError,
     r"^int8.token takes finite inputs only: NaN at \(row 1, column 17\)$"),
    ("inf in int8.block", lambda: qexact.quantize(with_value(ones(1, 4, 2, 8), (0, 3, 1, 5), -np.inf),
                                                  "int8.block.ascend"), ValueError,
     r"-inf at \(b 0, s 3, n 1, d 5\)"),
    ("wrong rank", lambda: qexact.quantize(ones(4, 8), "int8.block.ascend"), ValueError,
     r"int8.block needs a \(B, S, N, D\) tensor, got shape \(4, 8\)"),
    ("partial group under tail=reject", lambda: qexact.quantize(ones(2, 48), "mxfp8.te"), ValueError,
     r"^last dimension 48 of shape \(2, 48\) is not a multiple of the block 32 \(this contract has tail=reject\)$"),
    ("float64 input", lambda: qexact.quantize(ones(2, 32, dtype=np.float64), "mx.ocp"), TypeError,
     r"^x holds float64 values; it must be float32, float16 or bfloat16"),
    ("integer input", lambda: qexact.hifloat4_fake_quant(ones(2, 64, dtype=np.int32)), TypeError,
     r"^x holds int32 values"),
    ("float8 input", lambda: qexact.quantize(ones(2, 32).astype(ml_dtypes.float8_e4m3fn), "mx.ocp"), TypeError,
     r"^x holds float8_e4m3fn values; it must be float32, float16 or bfloat16"),
    ("E8M0 scales as float8_e8m0fnu", lambda: qexact.dequantize(ones(2, 32, dtype=np.uint8),
                                                                ones(2, 1).astype(ml_dtypes.float8_e8m0fnu), "mx.ocp"),
     TypeError, r"^scale holds float8_e8m0fnu values; it must be uint8, int8, float32 or float16"),
    ("a list", lambda: qexact.quantize([[1.0] * 32], "mx.ocp"), TypeError,
     r"^x must be a numpy array or a CPU tensor that supports DLPack"),
    ("big-endian input", lambda: qexact.quantize(ones(2, 32, dtype=">f4"), "mx.ocp"), TypeError,
     r"^x is big-endian \(>f4\)"),
    ("unknown engine", lambda: qexact.quantize(ones(2, 32), "mx.ocp", engine="gpu"), ValueError,
     r"^unknown engine 'gpu' \(fast, reference\)$"),
    ("negative threads", lambda: qexact.quantize(ones(2, 32), "mx.ocp", threads=-1), ValueError,
     r"^threads must be >= 0"),
    ("quantize under hif4", lambda: qexact.quantize(ones(2, 64), "hif4"), ValueError,
     r"^hif4 has no quantize"),
    ("hif4_pack on a partial block", lambda: qexact.hif4_pack(ones(2, 48)), ValueError,
     r"not a multiple of the HiF4 block 64"),
    ("hif4_unpack of floats", lambda: qexact.hif4_unpack(ones(2, 1, 4), ones(2, 32, dtype=np.uint8)), TypeError,
     r"^scale holds float32 values; it must be uint8$"),
    ("dequantize payload dtype", lambda: qexact.dequantize(ones(2, 32), ones(2, 1, dtype=np.uint8), "mx.ocp"),
     TypeError, r"^payload holds float32 values; it must be uint8$"),
    ("dequantize scale dtype", lambda: qexact.dequantize(ones(2, 32, dtype=np.int8), ones(2), "q8_0.ggml",
                                                         shape=(2, 32)), TypeError,
     r"^scale holds float32 values; it must be float16$"),
    ("dequantize payload shape", lambda: qexact.dequantize(ones(2, 31, dtype=np.int8), ones(2), "int8.token.blaze",
                                                           shape=(2, 32)), ValueError,
     r"^payload shape \(2, 31\) does not match \(2, 32\) expected for input shape \(2, 32\)$"),
    ("pool size 0", lambda: qexact.pooled_block_mean(ones(2, 5, 3), 0), ValueError,
     r"pool size must be >= 1, got 0"),
    ("NaN in the pooled mean", lambda: qexact.pooled_block_mean(with_value(ones(2, 5, 3), (1, 2, 0), np.nan), 2),
     ValueError, r"NaN at"),
    ("pooled mean output dtype", lambda: qexact.pooled_block_mean(ones(2, 5, 3), 2, out=np.int8), TypeError,
     r"^unsupported output dtype"),
    ("sharded mean divisor", lambda: qexact.pooled_block_mean_sharded([ones(2, 5, 3)], 2, divisor="median"),
     ValueError, r"^unknown divisor 'median' \(true_length, uniform\)$"),
    ("cast to a format without inf", lambda: qexact.cast(ones(4), "e4m3", overflow="inf"), ValueError,
     r"^overflow=inf is impossible for e4m3$"),
    ("cast to an unknown format", lambda: qexact.cast(ones(4), "e9m9"), ValueError,
     r"^unknown element format 'e9m9'"),
    ("decode of a code too wide", lambda: qexact.decode(np.array([1, 16], dtype=np.uint8), "e2m1"), ValueError,
     r"^codes: 16 at flat index 1 is not a code of e2m1 \(4 bits\)$"),
]


@pytest.mark.parametrize("call,exception,pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, exception, pattern):
    with pytest.raises(exception, match=pattern):
        call()


def test_nothing_is_read_past_a_rejected_argument():
    """Arguments are checked before any kernel runs: a bad engine is reported even for an input
    the kernel would also reject."""
    with pytest.raises(ValueError, match="unknown engine"):
        qexact.quantize(with_value(ones(3, 40), (0, 0), np.nan), "int8.token.blaze", engine="gpu")
