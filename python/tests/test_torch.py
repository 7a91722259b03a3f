"""fastmm.torch: the operator fastmm::matmul in models. Skipped where
torch is not installed; the CUDA cases where no GPU is."""

import numpy as np
import pytest

import fastmm

torch = pytest.importorskip("torch")
ft = pytest.importorskip("fastmm.torch")

CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
FLOATS = [torch.float32, torch.float64]
INTEGERS = [torch.int32, torch.int64]

# Shapes (a, b) by numpy's rules: 0, 1, tile edges, primes, rectangles,
# vectors and broadcast batches.
SHAPES = [
    ((0, 5), (5, 3)),
    ((4, 0), (0, 3)),
    ((1, 1), (1, 1)),
    ((7,), (7, 3)),
    ((5, 7), (7,)),
    ((7,), (7,)),
    ((17, 33), (33, 65)),
    ((31, 127), (127, 63)),
    ((129, 64), (64, 1)),
    ((3, 5, 7), (7, 2)),
    ((2, 1, 5, 7), (3, 7, 4)),
    ((6, 7), (2, 7, 3)),
    ((4, 37, 41), (4, 41, 29)),
]


def operand(shape, dtype, device, gen):
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, generator=gen).to(device)
    return torch.randint(-50, 50, shape, dtype=dtype, generator=gen).to(device)


def assert_matches(c, a, b):
    """c == a @ b: integers exactly, floats within the componentwise
    rounding bound (k+2)·u·|a||b| of the device's own product."""
    ref = torch.matmul(a.cpu(), b.cpu())
    assert isinstance(c, torch.Tensor) and c.device == a.device and c.dtype == a.dtype
    assert c.shape == ref.shape, (c.shape, ref.shape)
    if not a.dtype.is_floating_point:
        assert torch.equal(c.cpu(), ref)
        return
    exact = torch.matmul(a.cpu().double(), b.cpu().double())
    bound = torch.matmul(a.cpu().double().abs(), b.cpu().double().abs())
    k = a.shape[-1]
    u = torch.finfo(a.dtype).eps / 2
    error = (c.cpu().double() - exact).abs()
    assert bool((error <= (k + 2) * u * bound + 1e-300).all()), float((error / (bound + 1e-300)).max())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS + INTEGERS)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_forward_matches_torch(device, dtype, shapes):
    gen = torch.Generator().manual_seed(sum(map(sum, shapes)))
    a, b = (operand(s, dtype, device, gen) for s in shapes)
    assert_matches(ft.matmul(a, b), a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("view", ["transposed-a", "transposed-b", "both", "sliced", "batch-slice", "expanded"])
def test_strided_views(device, dtype, view):
    gen = torch.Generator().manual_seed(7)
    big_a = operand((3, 50, 40), dtype, device, gen)
    big_b = operand((3, 40, 60), dtype, device, gen)
    a, b = big_a[0, :33, :29], big_b[0, :29, :31]
    if view == "transposed-a":
        a = operand((29, 33), dtype, device, gen).mT
    elif view == "transposed-b":
        b = operand((31, 29), dtype, device, gen).mT
    elif view == "both":
        a, b = operand((29, 33), dtype, device, gen).mT, operand((31, 29), dtype, device, gen).mT
    elif view == "batch-slice":
        a, b = big_a[::2, 3:40, 1:30], big_b[::2, 1:30, 5:]
    elif view == "expanded":
        a = operand((1, 33, 29), dtype, device, gen).expand(4, 33, 29)
    before = (a.clone(), b.clone())
    assert_matches(ft.matmul(a, b), a, b)
    assert torch.equal(a, before[0]) and torch.equal(b, before[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [
    ((5, 7), (7, 3)),
    ((7,), (7, 3)),
    ((5, 7), (7,)),
    ((7,), (7,)),
    ((4, 5, 7), (7, 3)),
    ((5, 7), (2, 7, 3)),
    ((2, 1, 5, 7), (3, 7, 4)),
], ids=str)
def test_gradcheck(device, shapes):
    gen = torch.Generator().manual_seed(3)
    a, b = (torch.randn(s, dtype=torch.float64, generator=gen).to(device).requires_grad_() for s in shapes)
    assert torch.autograd.gradcheck(lambda x, y: ft.matmul(x, y), (a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("accuracy", ["native", "bound"])
@pytest.mark.parametrize("shapes", [SHAPES[0], SHAPES[2], SHAPES[3], SHAPES[7], SHAPES[10], SHAPES[12]], ids=str)
@pytest.mark.parametrize("algo", ["auto", "cublas", "emulated"])
def test_complex_products(device, dtype, accuracy, shapes, algo):
    # Gaussian integers: every real product of the parts, and their sums,
    # are exact at both levels; then random values within the classical
    # complex bound (native) or 3M's normwise one (bound). On CUDA tensors
    # `cublas` is cuBLAS's own complex product (cgemm/zgemm, 3M forms), and
    # `emulated` real products of the parts split on the device.
    if algo != "auto" and device == "cpu":
        pytest.skip(f"{algo} runs here on CUDA tensors")
    gen = torch.Generator().manual_seed(9)
    parts = lambda s: torch.randint(-40, 40, (2, *s), generator=gen)  # noqa: E731
    a, b = (torch.complex(*parts(s).double(), ).to(dtype).to(device) for s in shapes)
    c = ft.matmul(a, b, algo=algo, accuracy=accuracy)
    assert c.dtype == dtype and c.device == a.device
    assert torch.equal(c.cpu(), torch.matmul(a.cpu(), b.cpu()))
    a, b = (torch.randn(s, dtype=dtype, generator=gen).to(device) for s in shapes)
    c = ft.matmul(a, b, algo=algo, accuracy=accuracy).cpu().to(torch.complex128)
    exact = torch.matmul(a.cpu().to(torch.complex128), b.cpu().to(torch.complex128))
    u = torch.finfo(torch.float32 if dtype == torch.complex64 else torch.float64).eps / 2
    k = a.shape[-1]
    if accuracy == "native":
        # Componentwise: each part within (k+2)u of its |·| sums.
        ar, ai, br, bi = (x.cpu().to(torch.complex128) for x in (a.real, a.imag, b.real, b.imag))
        bound_re = (ar.abs() @ br.abs() + ai.abs() @ bi.abs()).real
        bound_im = (ar.abs() @ bi.abs() + ai.abs() @ br.abs()).real
        assert bool(((c - exact).real.abs() <= (k + 2) * u * bound_re + 1e-300).all())
        assert bool(((c - exact).imag.abs() <= (k + 2) * u * bound_im + 1e-300).all())
    else:
        scale = torch.matmul(a.cpu().abs().double(), b.cpu().abs().double())
        assert bool(((c - exact).abs() <= 4 * (k + 4) * u * scale + 1e-300).all())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("algo", ["auto", "cublas", "emulated"])
def test_complex_gradcheck(device, algo):
    if algo != "auto" and device == "cpu":
        pytest.skip(f"{algo} runs here on CUDA tensors")
    gen = torch.Generator().manual_seed(6)
    a = torch.randn(2, 5, 7, dtype=torch.complex128, generator=gen).to(device).requires_grad_()
    b = torch.randn(7, 3, dtype=torch.complex128, generator=gen).to(device).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: ft.matmul(x, y, algo=algo), (a, b))
    a_h = a[0].mH.detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: ft.matmul(x.mH, y, algo=algo), (a_h, b))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_transposed_inputs(device):
    gen = torch.Generator().manual_seed(4)
    a = torch.randn(7, 5, dtype=torch.float64, generator=gen).to(device).requires_grad_()
    b = torch.randn(3, 7, dtype=torch.float64, generator=gen).to(device).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: ft.matmul(x.mT, y.mT), (a, b))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_only_where_asked(device):
    a = torch.randn(6, 4, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, device=device)
    ft.matmul(a, b).sum().backward()
    assert b.grad is None
    torch.testing.assert_close(a.grad, torch.ones(6, 5, dtype=torch.float64, device=device) @ b.mT)


@pytest.mark.parametrize("device", DEVICES)
def test_integers_are_forward_only(device):
    a = torch.randint(-9, 9, (4, 6), dtype=torch.int32, device=device)
    b = torch.randint(-9, 9, (6, 3), dtype=torch.int32, device=device)
    assert torch.equal(ft.matmul(a, b).cpu(), a.cpu() @ b.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_errors_are_torchs(device):
    a = torch.randn(3, 4, device=device)
    with pytest.raises(RuntimeError, match="columns must equal"):
        ft.matmul(a, torch.randn(5, 6, device=device))
    with pytest.raises(RuntimeError, match="one dtype"):
        ft.matmul(a, torch.randn(4, 6, dtype=torch.float64, device=device))
    with pytest.raises(RuntimeError, match="float32, float64, int32"):
        ft.matmul(a.half(), torch.randn(4, 6, device=device).half())
    with pytest.raises(RuntimeError, match="do not broadcast"):
        ft.matmul(torch.randn(2, 3, 4, device=device), torch.randn(3, 4, 5, device=device))
    if device == "cuda":
        with pytest.raises(RuntimeError, match="one device"):
            ft.matmul(a, torch.randn(4, 6))


def test_linear_is_nn_linear():
    torch.manual_seed(0)
    ours = ft.Linear(12, 5, dtype=torch.float64)
    theirs = torch.nn.Linear(12, 5, dtype=torch.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(8, 3, 12, dtype=torch.float64)
    torch.testing.assert_close(ours(x), theirs(x))
    ours(x).square().sum().backward()
    theirs(x).square().sum().backward()
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad)
    torch.testing.assert_close(ours.bias.grad, theirs.bias.grad)
    no_bias = ft.Linear(12, 5, bias=False)
    assert no_bias.bias is None and no_bias(torch.randn(2, 12)).shape == (2, 5)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_mlp(device):
    torch.manual_seed(1)
    torch._dynamo.reset()
    model = torch.nn.Sequential(
        ft.Linear(32, 64), torch.nn.ReLU(), ft.Linear(64, 16)
    ).to(device=device, dtype=torch.float64)
    x = torch.randn(20, 32, dtype=torch.float64, device=device)
    compiled = torch.compile(model, fullgraph=True)
    eager_out = model(x)
    eager_out.square().sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled_out = compiled(x)
    compiled_out.square().sum().backward()
    torch.testing.assert_close(compiled_out, eager_out)
    for ours, theirs in zip(eager_grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(ours, theirs)


def test_fake_tensors_propagate():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(2, 1, 5, 7)
        b = torch.empty(3, 7, 4, dtype=torch.float32)
        c = ft.matmul(a, b)
    assert c.shape == (2, 3, 5, 4) and c.dtype == torch.float32


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_side_stream_without_device_synchronisation():
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        # Work queued on the side stream produces the operands; the product
        # must be ordered after it, and later work on the stream after it.
        x = torch.randn(2048, 2048, device="cuda")
        a = x @ x
        b = torch.randn(2048, 512, device="cuda") * 2
        c = ft.matmul(a, b)
        check = (c.double() - a.double() @ b.double()).abs().max() / (
            a.double().abs() @ b.double().abs()
        ).max()
        worst = check.to("cpu", non_blocking=False)
    assert float(worst) < 1e-5
    assert c.device.type == "cuda"


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("algo", ["cublas", "emulated", "auto"])
@pytest.mark.parametrize("on_side", [False, True])
def test_current_stream_waits_for_the_product(algo, on_side):
    # The call may return before its product is done: the current stream
    # must wait for it, so that overwriting the operands and reading the
    # result right after, on that stream, see the product whole.
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(16, 1024, 1024, device="cuda", generator=gen)
    b = torch.randn(16, 1024, 1024, device="cuda", generator=gen)
    expected = torch.matmul(a.double(), b.double())
    scale = torch.matmul(a.double().abs(), b.double().abs())
    torch.cuda.synchronize()
    stream = torch.cuda.Stream() if on_side else torch.cuda.current_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        c = ft.matmul(a, b, algo=algo)
        a.fill_(float("nan"))
        b.fill_(float("nan"))
        worst = ((c.double() - expected).abs() / scale).max().to("cpu")
    assert float(worst) < 1e-5


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("algo", ["auto", "cublas", "emulated", "cuda-fast"])
def test_batched_gpu_products(algo):
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn(6, 129, 257, device="cuda", generator=gen)
    b = torch.randn(6, 257, 65, device="cuda", generator=gen)
    assert_matches(ft.matmul(a, b, algo=algo), a, b)
    shared = torch.randn(257, 65, device="cuda", generator=gen)
    assert_matches(ft.matmul(a, shared, algo=algo), a, shared)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("count", [16, 15])
def test_auto_on_strided_batches_follows_the_batch_rule(count):
    # From 16 products of 2048³ auto runs the emulated product (one launch
    # per step over the batch), below them cuBLAS; the plan says the same.
    gen = torch.Generator(device="cuda").manual_seed(count)
    a = torch.randn(count, 2048, 2048, device="cuda", generator=gen)
    b = torch.randn(count, 2048, 2048, device="cuda", generator=gen)
    named = "emulated" if count >= 16 else "cublas"
    other = "cublas" if named == "emulated" else "emulated"
    auto, forced, apart = (ft.matmul(a, b, algo=algo) for algo in ("auto", named, other))
    assert torch.equal(auto, forced) and not torch.equal(auto, apart)
    plan = fastmm.plan(tuple(a.shape), tuple(b.shape), device="cuda", dtype="float32")
    assert plan["algorithm"] == named and plan["batch"] == count
    assert_matches(auto[::5], a[::5], b[::5])


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_gpu_out_argument():
    a = torch.randn(3, 40, 50, device="cuda")
    b = torch.randn(50, 30, device="cuda")
    out = torch.full((3, 40, 30), float("nan"), device="cuda")
    assert fastmm.matmul(a, b, out=out) is out
    assert_matches(out, a, b)
    with pytest.raises(ValueError, match="shares memory"):
        fastmm.matmul(a, b, out=a[:, :, :30])
    with pytest.raises(ValueError, match="shape"):
        fastmm.matmul(a, b, out=torch.empty(3, 40, 31, device="cuda"))
    with pytest.raises(ValueError, match="overlapping"):
        fastmm.matmul(a, b, out=torch.empty(1, 40, 30, device="cuda").expand(3, 40, 30))
    g = fastmm.matmul(a, b)
    assert isinstance(g, fastmm.GpuArray) and g.shape == (3, 40, 30)
    assert_matches(torch.from_dlpack(g), a, b)
