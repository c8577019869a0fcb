"""qexact.compare on synthetic "device" outputs made by altered contracts, whose differences are
known in advance: counts, deltas, locations and the diagnosis (the C++ compare's signature, the
same that `qexact compare` prints) each cause must produce."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qexact
from conftest import QUANTIZE_PRESETS, SEED, make_input


def bf16_exact(shape: tuple[int, ...], seed: int = SEED) -> np.ndarray:
    """fp32 values that are bf16 values already, so a bf16 pre-rounding leaves them alone."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, shape).astype(ml_dtypes.bfloat16).astype(np.float32)


def test_scales_one_binade_below_when_amax_is_taken_on_fp32():
    """mxfp8.ascend rounds fp32 input to bf16 before taking amax: 255.99 becomes 256. A device
    skipping that rounding (prequant_round=none) gets a scale one power of two lower."""
    x = bf16_exact((16, 128))
    crafted = [(0, 0), (3, 2), (7, 1), (7, 3), (15, 0)]  # (row, group)
    for row, group in crafted:
        x[row, group * 32 + 5] = np.float32(255.99)
    device = qexact.quantize(x, "mxfp8.ascend", prequant_round="none")
    report = qexact.compare(x, "mxfp8.ascend", device)

    assert report.scales == 64 and report.scales_differing == len(crafted)
    assert report.scale_delta_histogram == {-1: len(crafted)}
    assert report.max_scale_delta == 1 and report.scale_delta_unit == "E8M0 steps"
    assert report.first_scale_difference == (0, 0)
    assert report.scale_bytes == 64 and report.scale_bytes_differing == len(crafted)  # pairs layout, no padding
    assert 0 < report.elements_differing <= 32 * len(crafted)
    (d,) = report.diagnoses
    assert (d.signature, d.confirmed) == ("amax_fp32_not_bf16", True)
    assert d.explanation.startswith(f"all {len(crafted)} differing scale bytes are exactly one binade low")
    assert d.evidence["payload_elements_following_scale"] == report.elements_differing  # they follow the scale


def test_scales_one_binade_above_when_the_device_rounds_up():
    x = bf16_exact((4, 64))
    x[1, 3] = np.float32(300.0)  # floor: 2^8 -> byte 127; rceil of 300/448 rounds up to 2^0 -> byte 127 too
    x[2, 40] = np.float32(500.0)  # floor gives byte 127; rceil of 500/448 gives 2^1 -> byte 128
    report = qexact.compare(x, "mx.ocp", qexact.quantize(x, "mx.ocp", scale_rule="rceil"))
    assert report.scale_delta_histogram and set(report.scale_delta_histogram) == {1}
    (d,) = report.diagnoses
    assert (d.signature, d.confirmed) == ("scale_rule", True)
    assert "scale_rule=rceil" in d.explanation and d.evidence["scale_groups_explained"] == report.scales_differing


@pytest.mark.parametrize("input_dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_payload_differences_only_at_exact_ties(input_dtype):
    """A device rounding half away from zero differs from the contract's round-to-even exactly at
    the midpoints whose lower neighbour is even."""
    x = bf16_exact((2, 32))
    x[:, 0] = 256.0  # amax 256: scale byte 127 (2^0), elements keep their values
    ties = {1: 1.0625, 2: -1.0625, 3: 1.1875, 4: 0.53125, 5: 2.125, 6: 272.0}  # column: value
    expect_differ = {1, 2, 4, 5, 6}  # 1.1875 lies between 1.125 and 1.25 (even): both round up
    for column, value in ties.items():
        x[0, column] = value
    x = x.astype(input_dtype)
    device = qexact.quantize(x, "mxfp8.ascend", rounding="half_away")
    report = qexact.compare(x, "mxfp8.ascend", device)
    assert report.scales_differing == 0
    differing = {c for r, c in np.argwhere(device[0].view(np.uint8) != qexact.quantize(x, "mxfp8.ascend")[0].view(np.uint8))
                 if r == 0}
    assert differing >= expect_differ  # the crafted ties (the random rest may hold more)
    (d,) = report.diagnoses
    assert (d.signature, d.confirmed) == ("rounding_mode", True)
    assert d.evidence == {"payload_errors": report.elements_differing, "exact_ties": report.elements_differing,
                          "off_tie": 0}
    assert "rounding=half_away gives: the device rounds half_away, not rne" in d.explanation


def test_int8_ties():
    x = np.zeros((3, 16), dtype=np.float32)
    x[:, 0] = 127.0  # scale exactly 1.0 under int8.token.blaze (amax / 127)
    x[0, 1:5] = [0.5, 2.5, -4.5, 1.5]  # 1.5 rounds to 2 both ways
    x[1, 1] = 0.25
    report = qexact.compare(x, "int8.token.blaze", qexact.quantize(x, "int8.token.blaze", int_rounding="half_away"))
    assert (report.elements_differing, report.scales_differing) == (3, 0)
    assert report.first_element_difference == (0, 1)
    (d,) = report.diagnoses
    assert (d.signature, d.confirmed) == ("rounding_mode", True)
    assert d.evidence == {"payload_errors": 3, "exact_ties": 3, "off_tie": 0}
    assert "int_rounding=half_away gives: the device rounds half_away, not rne" in d.explanation


def test_a_non_tie_difference_rules_out_the_rounding_diagnosis():
    x = bf16_exact((2, 32))
    x[:, 0] = 256.0
    x[0, 1] = 1.0625
    expected_payload, scale = qexact.quantize(x, "mxfp8.ascend")
    payload = qexact.quantize(x, "mxfp8.ascend", rounding="half_away")[0].view(np.uint8).copy()
    payload[1, 7] ^= 0x01  # not a tie
    report = qexact.compare(x, "mxfp8.ascend", (payload, scale))
    assert report.elements_differing > 0 and "rounding_mode" not in report.signatures


def test_differences_in_the_partial_tail_block():
    x = make_input("mx.ocp", shape=(8, 48))
    altered = x.copy()
    altered[:, 40:] *= np.float32(1.5)  # a device that reads the tail differently
    expected = qexact.quantize(x, "mx.ocp")
    tail_payload = qexact.quantize(altered, "mx.ocp")[0].view(np.uint8)
    payload = expected[0].view(np.uint8).copy()
    payload[:, 32:] = tail_payload[:, 32:]
    report = qexact.compare(x, "mx.ocp", (payload, expected[1]))
    assert report.elements_differing > 0 and report.scales_differing == 0
    (d,) = report.diagnoses
    assert d.signature == "tail_rule" and not d.confirmed
    assert d.evidence == {"scale_groups_differing": 0, "payload_errors": report.elements_differing, "tail_groups": 8}
    assert d.explanation.startswith("every difference is in the partial last block of its row")


def test_int8_block_tail_and_no_tail_claim_for_whole_blocks():
    x = make_input("int8.block.ascend", shape=(1, 100, 2, 8))
    altered = x.copy()
    altered[:, 64:] *= np.float32(3.0)
    payload, scale = qexact.quantize(x, "int8.block.ascend")
    alt_payload, alt_scale = qexact.quantize(altered, "int8.block.ascend")
    payload, scale = payload.copy(), scale.copy()
    payload[:, 64:], scale[..., 1] = alt_payload[:, 64:], alt_scale[..., 1]
    report = qexact.compare(x, "int8.block.ascend", (payload, scale))
    assert report.scale_delta_unit == "ulps of f32" and report.scales_differing == 2
    assert report.signatures == ["tail_rule"]
    assert report.diagnoses[0].evidence["tail_groups"] == 2  # (b, head) pairs, one partial token block each

    whole = make_input("mx.ocp", shape=(4, 64))
    expected = qexact.quantize(whole, "mx.ocp")
    changed = expected[0].view(np.uint8).copy()
    changed[:, 60] ^= 0x01
    report = qexact.compare(whole, "mx.ocp", (changed, expected[1]))
    assert report.elements_differing == 4 and "tail_rule" not in report.signatures


def test_contracts_differing_in_byte0_and_nonfinite_rules():
    """The README's example: mxfp8.ascend flushes groups with scale byte 0 and zeroes non-finite
    groups; torchao 0.18's FLOOR quantizes the former against 2^-126 and gives an inf group byte
    247 (inf's exponent field), saturating the inf and keeping the sign of negative zeros."""
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((4, 64)).astype(ml_dtypes.bfloat16)
    x[1, :32] *= ml_dtypes.bfloat16(2.0**-125)
    x[2, 5] = np.inf
    report = qexact.compare(x, "mxfp8.ascend", "mxfp8.torchao.floor")
    assert report.actual == "mxfp8.torchao.floor"
    assert report.scales_differing == 1 and report.scale_bytes == 8  # pairs vs rowmajor: the logical grid
    assert report.scale_delta_histogram == {-8: 1}  # 255 -> 247: inf's exponent field
    assert report.signatures == ["nonfinite_rule", "nonfinite_rule", "flush_rule"]
    assert all(d.confirmed for d in report.diagnoses)
    assert "follow nonfinite=torchao, not zero" in report.diagnoses[0].explanation
    in_inf_group = report.elements_differing - 32  # the group of inf: those not zero in both
    assert 0 < in_inf_group < 32
    assert report.diagnoses[1].evidence == {"payload_errors_in_group_class": in_inf_group}
    assert "nonfinite=torchao gives, not zero" in report.diagnoses[1].explanation
    assert report.diagnoses[2].evidence == {"payload_errors_in_group_class": 32}
    assert "byte0=min_normal gives, not flush" in report.diagnoses[2].explanation
    assert report.first_element_difference == (1, 0)
    assert "diagnoses:" in str(report) and "flush_rule (confirmed by a re-run)" in str(report)


@pytest.mark.parametrize("layout", ["padded", "swizzled"])
def test_scale_layouts_compare_on_the_logical_grid(layout):
    """The same scales stored in two layouts are the same scales: rows past one 128-row tile and
    a group count that is not a multiple of 4 reach every part of the layouts."""
    x = make_input("mx.ocp", shape=(130, 160))
    report = qexact.compare(x, "mx.ocp", "mx.ocp", actual_params={"layout": layout, "tail": "reject"})
    assert report.identical and report.scales == 130 * 5 and report.diagnoses == []
    assert report.actual == f"mx.ocp (layout={layout}, tail=reject)"
    report = qexact.compare(x, "mx.ocp", "mx.ocp", actual_params={"layout": layout, "tail": "reject",
                                                                   "scale_rule": "rceil"})
    assert report.scales_differing > 0
    assert set(report.scale_delta_histogram) == {1}
    assert report.signatures == ["scale_rule"] and report.diagnoses[0].confirmed


def test_float_scale_deltas_in_ulps():
    x = make_input("int8.token.blaze")
    payload, scale = qexact.quantize(x, "int8.token.blaze")
    scale = scale.copy()
    scale[1] = np.nextafter(scale[1], np.float32(np.inf))
    scale[3] = np.nextafter(np.nextafter(scale[3], np.float32(0)), np.float32(0))
    report = qexact.compare(x, "int8.token.blaze", (payload, scale))
    assert report.scale_delta_histogram == {-2: 1, 1: 1} and report.max_scale_delta == 2
    assert report.scale_delta_unit == "ulps of f32" and report.first_scale_difference == (1,)
    assert report.payload_bytes_differing == 0 and report.scale_bytes_differing >= 2


@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
def test_a_contract_is_identical_to_itself(preset):
    x = make_input(preset)
    report = qexact.compare(x, preset, preset)
    assert report.identical and report.diagnoses == [] and report.elements == x.size
    assert "identical" in str(report)
    assert qexact.compare(x, preset, qexact.quantize(x, preset)).identical


def test_compare_rejects_what_it_cannot_compare():
    x = make_input("mx.ocp")
    with pytest.raises(ValueError, match=r"cannot compare mx.ocp \(family mx\) with int8.token.blaze"):
        qexact.compare(x, "mx.ocp", "int8.token.blaze")
    with pytest.raises(ValueError, match="element=e4m3 vs element=e5m2"):
        qexact.compare(x, "mx.ocp", "mx.ocp.e5m2")
    payload, scale = qexact.quantize(x, "mx.ocp")
    # The C++ compare's own words (those of `qexact compare`), the other side called the device.
    with pytest.raises(ValueError, match=r"the device's payload has shape \(6, 95\), the contract gives \(6, 96\)"):
        qexact.compare(x, "mx.ocp", (payload[:, :95], scale))
    with pytest.raises(ValueError, match="the device's scale holds f32 values, the contract gives u8"):
        qexact.compare(x, "mx.ocp", (payload, scale.astype(np.float32)))
    with pytest.raises(ValueError, match=r"scale has shape \(6, 1\), the contract gives \(6, 3\), and no other block"):
        qexact.compare(x, "mx.ocp", (payload, scale[:, :1]))
    with pytest.raises(ValueError, match="the device's payload holds f64 values, the contract gives u8"):
        qexact.compare(x, "mx.ocp", (payload.astype(np.float64), scale))
    with pytest.raises(TypeError, match="pair of arrays or a preset name"):
        qexact.compare(x, "mx.ocp", payload)
    with pytest.raises(TypeError, match="actual_params applies only"):
        qexact.compare(x, "mx.ocp", (payload, scale), actual_params={"rounding": "rne"})
    with pytest.raises(ValueError, match="hif4 has no quantize"):
        qexact.compare(make_input("hif4"), "hif4", "hif4")
