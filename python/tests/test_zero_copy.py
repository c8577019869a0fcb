"""Inputs are read in place: the memory the C++ core reads is the caller's (numpy arrays,
ml_dtypes bfloat16 arrays, strided views, DLPack producers, PyTorch tensors when installed),
and strided views quantize exactly as their contiguous copies do."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qexact
from qexact import _arrays, _core
from conftest import import_or_fail, make_input


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def pointer_seen(x) -> int:
    """The address the core reads for x, by the route every qexact function takes."""
    data, _ = _arrays.as_input(x)
    return _core.data_pointer(data)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


class DLPackOnly:
    """An object that offers nothing but the DLPack protocol, as a foreign framework would."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=lambda t: np.dtype(t).name)
def test_numpy_arrays_are_read_in_place(dtype):
    x = make_input("mx.ocp", dtype)
    assert pointer_seen(x) == address(x)
    before = x.tobytes()
    qexact.quantize(x, "mx.ocp")
    assert x.tobytes() == before


@pytest.mark.parametrize("view", ["columns", "reversed", "transposed", "readonly"])
def test_strided_views_are_read_in_place_and_match_their_copies(view):
    base = make_input("int8.token.blaze", shape=(8, 64))
    x = {"columns": base[:, ::2], "reversed": base[::-1], "transposed": base.T,
         "readonly": base.copy()}[view]
    if view == "readonly":
        x.setflags(write=False)
    else:
        assert not x.flags.c_contiguous
    assert pointer_seen(x) == address(x)
    for preset in ("int8.token.blaze", "mx.ocp", "mxfp8.ascend"):
        got = qexact.quantize(x, preset)
        want = qexact.quantize(np.ascontiguousarray(x), preset)
        assert same_bytes(got[0].view(np.uint8), want[0].view(np.uint8)), preset
        assert same_bytes(got[1], want[1]), preset


def test_a_dlpack_producer_is_read_in_place():
    x = make_input("mx.ocp")
    producer = DLPackOnly(x)
    assert pointer_seen(producer) == address(x)
    got, want = qexact.quantize(producer, "mx.ocp"), qexact.quantize(x, "mx.ocp")
    assert same_bytes(got[0], want[0]) and same_bytes(got[1], want[1])
    y = qexact.dequantize(DLPackOnly(got[0].view(np.uint8)), DLPackOnly(got[1]), "mx.ocp")
    assert same_bytes(y, qexact.dequantize(*want, "mx.ocp"))
    assert qexact.compare(producer, "mx.ocp", "mxfp8.torchao.floor").elements == x.size


def test_a_bfloat16_dlpack_tensor_is_read_in_place():
    """A producer labelling its data bfloat16 (PyTorch's route) needs no ml_dtypes."""
    x = make_input("mxfp8.ascend", ml_dtypes.bfloat16)
    tensor = _core.relabel_as_bfloat16(x.view(np.uint16))
    assert pointer_seen(tensor) == address(x)
    assert _core.input_dtype(tensor, False) == "bf16"
    got, want = qexact.quantize(tensor, "mxfp8.ascend"), qexact.quantize(x, "mxfp8.ascend")
    assert same_bytes(got[0], want[0]) and same_bytes(got[1], want[1])
    y = qexact.hifloat4_fake_quant(_core.relabel_as_bfloat16(make_input("hif4", ml_dtypes.bfloat16).view(np.uint16)))
    assert y.dtype == ml_dtypes.bfloat16


def test_outputs_are_numpy_arrays_owning_their_bytes():
    payload, scale = qexact.quantize(make_input("mx.ocp"), "mx.ocp")
    for a in (payload, scale):
        assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable
    del payload
    assert scale.sum() >= 0  # still valid after its sibling is gone


def test_pytorch_tensors_are_read_in_place():
    torch = import_or_fail("torch")
    x = make_input("mxfp8.ascend")
    for t, reference in ((torch.from_numpy(x), x),
                         (torch.from_numpy(x).to(torch.bfloat16), x.astype(ml_dtypes.bfloat16)),
                         (torch.from_numpy(x)[:, ::2], x[:, ::2])):
        assert pointer_seen(t) == t.data_ptr()
        got, want = qexact.quantize(t, "mx.ocp"), qexact.quantize(reference, "mx.ocp")
        # tensors in, tensors out (test_torch_io.py checks their dtypes)
        assert same_bytes(got[0].view(torch.uint8).numpy(), want[0].view(np.uint8))
        assert same_bytes(got[1].view(torch.uint8).numpy(), want[1])
