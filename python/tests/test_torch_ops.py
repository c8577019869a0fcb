"""torch.ops.qexact: the custom ops pass torch's own op checks (schema, fake kernels against
real runs, autograd registration), trace under torch.compile(fullgraph=True) and give the eager
bytes; fake quantization is differentiable with a straight-through gradient (saturated elements
included) and trains in a QAT loop."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import FAMILY, QUANTIZE_PRESETS, import_or_fail, make_input

torch = import_or_fail("torch")

import qexact  # noqa: E402
import qexact.torch as qt  # noqa: E402

OPS = ["quantize", "quantize_outputs", "dequantize", "fake_quant", "hif4_pack", "hif4_unpack"]


def bits(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous()
    return (t.view(torch.uint8) if t.element_size() == 1 else t.view({2: torch.int16, 4: torch.int32}[t.element_size()])
            ).numpy().tobytes()


def tensor(preset: str, dtype=torch.float32, **kw) -> torch.Tensor:
    return torch.from_numpy(make_input(preset, **kw)).to(dtype)


def test_the_ops_are_registered():
    for name in OPS:
        assert isinstance(getattr(torch.ops.qexact, name), torch._ops.OpOverloadPacket), name


def op_samples():
    x, h = tensor("mx.ocp"), tensor("hif4", torch.bfloat16)
    p, s = qexact.quantize(x, "mx.ocp.e5m2")
    hs, hv = qexact.hif4_pack(h)
    return [
        ("quantize mx", torch.ops.qexact.quantize.default, (x, "mx.ocp", [], "fast", 0)),
        ("quantize_outputs mx", torch.ops.qexact.quantize_outputs.default, (x, "mx.ocp", [], "fast", 0)),
        ("quantize int8 bf16", torch.ops.qexact.quantize.default,
         (tensor("int8.block.ascend", torch.bfloat16), "int8.block.ascend", [], "fast", 0)),
        # bytes: opcheck computes on its inputs, which torch cannot do on float8 / float4 tensors
        ("dequantize e5m2", torch.ops.qexact.dequantize.default,
         (p.view(torch.uint8), s.view(torch.uint8), None, "mx.ocp.e5m2", [], "fast", 0)),
        ("fake_quant hif4", torch.ops.qexact.fake_quant.default,
         (h.clone().requires_grad_(), "hif4", [], -1, "fast", 0)),
        ("fake_quant mxfp8 qdim 0", torch.ops.qexact.fake_quant.default,
         (x.clone().requires_grad_(), "mxfp8.ascend", ["layout=rowmajor"], 0, "fast", 0)),
        ("hif4_pack", torch.ops.qexact.hif4_pack.default, (h, "fast", 0)),
        ("hif4_unpack", torch.ops.qexact.hif4_unpack.default, (hs, hv, "fast", 0)),
    ]


@pytest.mark.parametrize("name,op,args", op_samples(), ids=[s[0] for s in op_samples()])
def test_torch_opcheck_passes(name, op, args):
    torch.library.opcheck(op, args)


def test_meta_inputs_give_the_shapes_and_dtypes_of_a_real_run():
    for preset in ("mxfp8.te", "mx.ocp.e2m1", "int8.block.sage.cuda", "q8_0.ggml"):
        x = tensor(preset)
        real = torch.ops.qexact.quantize(x, preset, [], "fast", 0)
        meta = torch.ops.qexact.quantize(x.to("meta"), preset, [], "fast", 0)
        assert [(m.device.type, m.shape, m.dtype) for m in meta] == [("meta", r.shape, r.dtype) for r in real]


def test_a_compiled_function_traces_the_ops_in_one_graph_and_gives_the_eager_bytes():
    def f(x, w):
        payload, scale = qexact.quantize(x, "mxfp8.torchao.floor")
        y = qexact.dequantize(payload, scale, "mxfp8.torchao.floor")
        return y @ qt.fake_quant(w, "hif4").T, scale

    x, w = tensor("mx.ocp", shape=(6, 128)), tensor("hif4")
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=False)
    got, want = compiled(x, w), f(x, w)
    assert [bits(t) for t in got] == [bits(t) for t in want]
    assert got[1].dtype == torch.float8_e8m0fnu


def test_dynamic_compilation_specialises_each_shape():
    def f(x):
        return qexact.dequantize(*qexact.quantize(x, "mx.ocp"), "mx.ocp")

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=True)
    for rows in (3, 5):
        x = tensor("mx.ocp", shape=(rows, 64))
        assert bits(compiled(x)) == bits(f(x))


def test_a_compiled_qat_step_gives_the_eager_gradients():
    w0 = tensor("hif4", torch.bfloat16)
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)).bfloat16()

    def forward(w):
        return (x @ qt.fake_quant(w, "hif4").T).float().square().mean()

    w_eager, w_compiled = w0.clone().requires_grad_(), w0.clone().requires_grad_()
    loss = forward(w_eager)
    compiled_loss = torch.compile(forward, fullgraph=True, backend="aot_eager", dynamic=False)(w_compiled)
    loss.backward()
    compiled_loss.backward()
    assert bits(compiled_loss) == bits(loss) and bits(w_compiled.grad) == bits(w_eager.grad)


def reference_fake_quant(x: np.ndarray, preset: str) -> np.ndarray:
    """The numpy route: quantize, dequantize, round once to x's dtype."""
    if FAMILY[preset] == "hif4":
        return qexact.hifloat4_fake_quant(x)
    outputs = qexact.quantize(x, preset)
    tensor_scale = outputs[2] if len(outputs) > 2 else None
    return qexact.dequantize(*outputs[:2], preset, shape=x.shape, tensor_scale_array=tensor_scale).astype(x.dtype)


@pytest.mark.parametrize("preset", QUANTIZE_PRESETS + ["hif4"])
def test_fake_quant_is_quantize_dequantize_with_a_straight_through_gradient(preset):
    x = make_input(preset)
    t = torch.from_numpy(x.copy()).requires_grad_()
    y = qt.fake_quant(t, preset)
    assert y.dtype == t.dtype and bits(y) == reference_fake_quant(x, preset).tobytes()
    upstream = torch.from_numpy(np.random.default_rng(2).standard_normal(x.shape).astype(np.float32))
    y.backward(upstream)
    assert bits(t.grad) == bits(upstream)


def test_saturated_elements_pass_their_gradient_unchanged():
    """MX floor scaling: the block [500, 1, ...] gets scale 2^(8 - 8) = 1 and 500 saturates to
    E4M3's 448; its gradient is the incoming one, as for every other element."""
    x = torch.ones(2, 32)
    x[0, 0], x[1, 7] = 500.0, -500.0
    x.requires_grad_()
    y = qt.fake_quant(x, "mx.ocp")
    assert y[0, 0].item() == 448.0 and y[1, 7].item() == -448.0  # saturated: beyond max_code * scale
    upstream = torch.arange(64, dtype=torch.float32).reshape(2, 32) + 1
    y.backward(upstream)
    assert bits(x.grad) == bits(upstream)


def test_qdim_quantizes_along_another_axis():
    x = tensor("mx.ocp")
    y = qt.fake_quant(x.T, "mx.ocp", qdim=0)
    assert bits(y) == bits(qt.fake_quant(x, "mx.ocp").T)
    h = tensor("hif4")
    assert bits(qt.fake_quant(h.T, "hif4", qdim=0)) == bits(qexact.hifloat4_fake_quant(h.T.contiguous(), qdim=0))


def test_fake_quantize_module_trains_in_a_qat_loop():
    rng = np.random.default_rng(5)
    w = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((16, 64)).astype(np.float32)))
    x = torch.from_numpy(rng.standard_normal((32, 64)).astype(np.float32))
    target = torch.from_numpy(rng.standard_normal((32, 16)).astype(np.float32))
    fq = qt.FakeQuantize("hif4")
    opt = torch.optim.SGD([w], lr=0.05)
    losses = []
    for _ in range(5):
        loss = (x @ fq(w).T - target).square().mean()
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert losses[-1] < losses[0]
    assert repr(fq) == "FakeQuantize('hif4', qdim=-1)"
    assert "scale_rule=rceil" in repr(qt.FakeQuantize("mx.ocp", scale_rule="rceil"))


def test_fake_quantize_refuses_a_bad_contract_when_made():
    with pytest.raises(ValueError, match="unknown preset"):
        qt.FakeQuantize("mxfp9")
    with pytest.raises(ValueError, match="not a quantize contract"):
        qt.fake_quant(torch.ones(2, 4), "pool.mean")


def test_fake_quant_and_fake_quantize_at_the_top_level_without_importing_torch_early():
    assert qexact.fake_quant is qt.fake_quant
    assert qexact.FakeQuantize is qt.FakeQuantize
    assert {"fake_quant", "FakeQuantize"} <= set(dir(qexact))
    with pytest.raises(AttributeError, match="has no attribute 'fake_quantize'"):
        qexact.fake_quantize  # noqa: B018
    # `import qexact` alone leaves torch unimported: the top-level names resolve on first use.
    import subprocess
    import sys
    code = "import sys, qexact; assert 'torch' not in sys.modules; qexact.fake_quant; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    x = tensor("mx.ocp")
    assert bits(qexact.fake_quant(x, "mx.ocp")) == bits(qt.fake_quant(x, "mx.ocp"))


@pytest.mark.parametrize("preset", ["mxfp8.ascend", "nvfp4.torchao", "fp8.ascend.token"])
def test_quantize_outputs_are_not_differentiable(preset):
    x = tensor(preset).requires_grad_(True)
    outs = qt.quantize(x, preset)
    assert outs and all(not o.requires_grad for o in outs)
    eager = qt.quantize(x.detach(), preset)
    assert [bits(o) for o in outs] == [bits(o) for o in eager]
    # A loss through them has nothing to differentiate: torch says so, not "no autograd formula".
    floats = [o for o in outs if o.dtype != torch.float4_e2m1fn_x2]  # float4 has no cast to float
    with pytest.raises(RuntimeError, match="does not require grad"):
        floats[0].float().sum().backward()


def test_hif4_pack_outputs_are_not_differentiable():
    x = tensor("hif4").requires_grad_(True)
    assert all(not o.requires_grad for o in qt.hif4_pack(x))


def test_fake_quant_under_torch_func_and_vmap():
    x = tensor("mxfp8.ascend")
    g = torch.func.grad(lambda t: (qt.fake_quant(t, "mxfp8.ascend") * 3).sum())(x)
    assert torch.equal(g, torch.full_like(x, 3.0))  # straight through
    j = torch.func.jacrev(lambda t: qt.fake_quant(t, "mxfp8.ascend"))(x[:1, :32])
    assert torch.equal(j.reshape(32, 32), torch.eye(32))
    # vmap runs once per sample: a per-tensor scale stays per sample
    xs = torch.stack([tensor("fp8.torchao.tensorwise", seed=s) * 4.0**s for s in range(3)])
    y = torch.vmap(lambda t: qt.fake_quant(t, "fp8.torchao.tensorwise"))(xs)
    assert bits(y) == bits(torch.stack([qt.fake_quant(t, "fp8.torchao.tensorwise") for t in xs]))


@pytest.mark.parametrize("preset", ["mxfp8.ascend", "mx.ocp.e2m1", "nvfp4.torchao",
                                    "fp8.ascend.token"])
def test_quantize_under_vmap_is_quantize_per_sample(preset):
    xs = torch.stack([tensor(preset, seed=s) for s in range(3)])
    got = torch.vmap(lambda t: qt.quantize(t, preset), in_dims=0)(xs)
    want = [qt.quantize(t, preset) for t in xs]
    assert len(got) == len(want[0])
    for k, out in enumerate(got):
        assert out.dtype == want[0][k].dtype and out.shape == (3, *want[0][k].shape)
        assert bits(out) == bits(_stack_bytes([w[k] for w in want]))
    moved = torch.vmap(lambda t: qt.quantize(t, preset), in_dims=1)(xs.movedim(0, 1).contiguous())
    assert [bits(m) for m in moved] == [bits(g) for g in got]


def _stack_bytes(parts):
    if parts[0].element_size() == 1:
        return torch.stack([p.view(torch.uint8) for p in parts])
    return torch.stack(parts)


SHAPES = [(3, 64), (5, 96), (130, 256), (1, 2, 128), (2, 70, 3, 64), (257, 32), (4, 100, 2, 16), (7, 4096)]


@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
def test_symbolic_output_shapes_are_the_cores(preset):
    """The fake kernels' shape arithmetic (kept symbolic under compile) gives the core's shapes."""
    p = qt._params(preset, ())
    checked = 0
    for shape in SHAPES:
        try:
            want = [(n, list(d)) for n, _, d in qexact.outputs(preset, shape)]
        except ValueError:
            continue  # a shape this contract refuses
        assert qt._symbolic_outputs(p, shape) == want, shape
        checked += 1
    assert checked >= 2


def count_compiles(fn, dynamic=None):
    compiles = []

    def backend(gm, example_inputs):
        compiles.append(gm)
        return gm.forward
    return torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic), compiles


@pytest.mark.parametrize("dynamic", ["marked", "compile", None])
@pytest.mark.parametrize("preset", ["mxfp8.ascend", "mx.ocp.e2m1", "nvfp4.torchao", "fp8.ascend.token",
                                    "int8.token.blaze"])
def test_changing_shapes_compile_once(preset, dynamic):
    """quantize then dequantize over 12 batch sizes: one graph (the size marked dynamic, or
    torch.compile(dynamic=True)), or the first static graph and one dynamic one (torch's automatic
    dynamic shapes), with eager's bytes."""
    def f(t):
        outs = qt.quantize(t, preset)
        return outs, qt.dequantize(outs[0], outs[1], preset, tensor_scale_array=outs[2] if len(outs) > 2 else None)

    torch._dynamo.reset()
    compiled, compiles = count_compiles(f, dynamic=True if dynamic == "compile" else None)
    for rows in range(2, 14):
        x = tensor(preset, shape=(rows, 64))
        if dynamic == "marked":
            torch._dynamo.mark_dynamic(x, 0)
        outs, y = compiled(x)
        want_outs, want_y = f(x)
        assert [bits(o) for o in outs] == [bits(o) for o in want_outs] and bits(y) == bits(want_y)
    assert len(compiles) == (1 if dynamic else 2), len(compiles)


@pytest.mark.parametrize("preset", ["mxfp8.ascend", "fp8.torchao.rowwise", "int8.block.ascend"])
def test_changing_sequence_length_compiles_once(preset):
    """(B, T, H) activations (int8.block: (B, S, N, D)) whose sequence length changes: one graph."""
    def f(t):
        return qt.quantize(t, preset)

    torch._dynamo.reset()
    compiled, compiles = count_compiles(f)
    for seq in range(2, 14):
        shape = (2, seq, 3, 16) if preset.startswith("int8.block") else (2, seq, 64)
        x = tensor(preset, shape=shape)
        torch._dynamo.mark_dynamic(x, 1)
        assert [bits(o) for o in compiled(x)] == [bits(o) for o in f(x)]
    assert len(compiles) == 1, len(compiles)
