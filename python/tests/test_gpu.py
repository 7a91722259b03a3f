"""GPU tensors through DLPack, in place; skipped without torch and a GPU."""

import numpy as np
import pytest

import fastmm

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("algo", ["auto", "cublas", "cuda-fast", "strassen", "winograd"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 53, 29), (1025, 700, 513), (2048, 2048, 2048)])
def test_torch_tensors_in_place(dtype, algo, shape):
    m, k, n = shape
    g = torch.Generator(device="cuda").manual_seed(m * k + n)
    if dtype.is_floating_point:
        a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
        b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
    else:
        a = torch.randint(-50, 50, (m, k), device="cuda", dtype=dtype, generator=g)
        b = torch.randint(-50, 50, (k, n), device="cuda", dtype=dtype, generator=g)
    if algo == "cublas" and not dtype.is_floating_point:
        with pytest.raises(TypeError, match="integer"):
            fastmm.matmul(a, b, algo=algo)
        return
    result = fastmm.matmul(a, b, algo=algo)
    assert isinstance(result, fastmm.GpuArray) and result.device == "cuda:0"
    c = torch.from_dlpack(result)
    assert c.device == a.device and c.dtype == dtype and tuple(c.shape) == (m, n)
    ref = (a.double() @ b.double()) if dtype.is_floating_point else (a.cpu() @ b.cpu()).cuda()
    if dtype.is_floating_point:
        bound = a.abs().double() @ b.abs().double()
        u = torch.finfo(dtype).eps / 2
        growth = fastmm.plan((m, k), (k, n), algo=algo, device="cuda", dtype=str(dtype).split(".")[1])["error_growth"]
        assert bool(((c.double() - ref).abs() <= growth * (k + 2) * u * bound + 1e-30).all())
    else:
        assert torch.equal(c, ref)


def test_layouts_and_errors():
    a = torch.randn(300, 200, device="cuda")
    b = torch.randn(300, 100, device="cuda")
    c = torch.from_dlpack(fastmm.matmul(a.t(), b))  # a transposed view, read in place
    torch.testing.assert_close(c, a.t() @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="host memory"):
        fastmm.matmul(a, np.ones((200, 3), np.float32))
    with pytest.raises(TypeError, match="two types"):
        fastmm.matmul(a, torch.randn(200, 3, device="cuda", dtype=torch.float64))
    with pytest.raises(ValueError, match="columns"):
        fastmm.matmul(a, b)
    with pytest.raises(ValueError, match="device"):
        fastmm.matmul(a.t(), b, device="cpu")
    x = fastmm.matmul(a.t(), b)
    assert x.shape == (200, 100) and x.dtype == "float32"
    assert torch.from_dlpack(x).data_ptr() == torch.from_dlpack(x).data_ptr()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("algo", ["auto", "cublas", "emulated", "cuda-fast", "winograd"])
@pytest.mark.parametrize("layout", ["a", "b", "ab", "out", "all"])
def test_transposed_views_in_place(dtype, algo, layout):
    # Transposed (column-major) views of A, B and out, as torch's .mT makes
    # them: read in place by cuBLAS and the emulated product, copied once
    # on the GPU for the others; a transposed out is written as C^T = B^T A^T.
    if algo == "cublas" and not dtype.is_floating_point:
        pytest.skip("cuBLAS has no integer GEMM")
    g = torch.Generator(device="cuda").manual_seed(5)

    def make(*shape):
        if dtype.is_floating_point:
            return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)
        return torch.randint(-50, 50, shape, device="cuda", dtype=dtype, generator=g)

    def view(x, transposed):
        # The same values, stored column-major when transposed.
        return x.mT.contiguous().mT if transposed else x

    for batch, (m, k, n) in [((), (1, 1, 1)), ((), (1, 9, 7)), ((), (33, 17, 65)), ((3,), (65, 130, 31)), ((), (257, 300, 129))]:
        a, b = make(*batch, m, k), make(k, n)
        av, bv = view(a, "a" in layout or layout == "all"), view(b, "b" in layout or layout == "all")
        fill = float("nan") if dtype.is_floating_point else -(2**31)
        out = torch.full((*batch, n, m), fill, device="cuda", dtype=dtype).mT
        if layout not in ("out", "all"):
            out = out.contiguous()
        fastmm.matmul(av, bv, out=out, algo=algo)
        if dtype.is_floating_point:
            ref = a.double() @ b.double()
            bound = a.abs().double() @ b.abs().double()
            u = torch.finfo(dtype).eps / 2
            assert bool(((out.double() - ref).abs() <= 4 * (k + 2) * u * bound + 1e-30).all()), (m, k, n)
        else:
            assert torch.equal(out, (a.cpu() @ b.cpu()).cuda()), (m, k, n)


def test_numpy_arrays_on_the_gpu():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 100))
    c = fastmm.matmul(a, b, device="cuda", algo="strassen")
    assert isinstance(c, np.ndarray)
    np.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)
    c, timing = fastmm.matmul_timed(a, b, device="cuda")
    np.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)
    assert timing["host_copies"] and timing["upload_ms"] > 0 and timing["download_ms"] > 0
    x = torch.from_numpy(a).cuda()
    y = torch.from_numpy(b).cuda()
    result, timing = fastmm.matmul_timed(x, y)
    assert not timing["host_copies"] and timing["compute_ms"] > 0
    torch.testing.assert_close(torch.from_dlpack(result), x @ y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpu_resident_emulated_products_report_their_route(dtype):
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.rand(257, 512, device="cuda", dtype=dtype, generator=g) - 0.5
    b = torch.rand(512, 129, device="cuda", dtype=dtype, generator=g) - 0.5
    result, timing = fastmm.matmul_timed(a, b, algo="emulated")
    route = timing["emulation"]
    assert route["emulated"] + route["native"] == 1
    assert route["emulated"] == 0 or route["moduli"] >= 2
    torch.testing.assert_close(torch.from_dlpack(result), a @ b)
    _, timing = fastmm.matmul_timed(a, b, algo="cublas")
    assert timing["emulation"] is None


def test_cupy_arrays_in_place():
    cupy = pytest.importorskip("cupy")
    a = cupy.random.standard_normal((257, 129), dtype=cupy.float64)
    b = cupy.random.standard_normal((129, 65), dtype=cupy.float64)
    result = fastmm.matmul(a, b, algo="winograd")
    c = cupy.from_dlpack(result)
    assert c.shape == (257, 65) and c.dtype == cupy.float64
    cupy.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)
    # fastmm's result feeds torch too, and torch's result fastmm.
    t = torch.from_dlpack(result)
    assert t.device.type == "cuda"
    again = torch.from_dlpack(fastmm.matmul(t.T.contiguous(), t))
    torch.testing.assert_close(again, t.T @ t)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_host_arrays_over_every_gpu(dtype):
    rng = np.random.default_rng(1)
    for m, k, n in [(1, 1, 1), (37, 53, 29), (1025, 700, 513), (3, 9000, 2)]:
        if np.issubdtype(dtype, np.integer):
            a = rng.integers(-9, 10, (m, k)).astype(dtype)
            b = rng.integers(-9, 10, (k, n)).astype(dtype)
        else:
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
        algo = "cuda-fast" if np.issubdtype(dtype, np.integer) else "cublas"
        c = fastmm.matmul(a, b, device="cuda:all", algo=algo)
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(c, a @ b)
        else:
            tol = 1e-3 if dtype == np.float32 else 1e-10
            np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=tol, atol=tol * np.sqrt(k))
    c, timing = fastmm.matmul_timed(a, b, device="cuda:0,1", algo=algo)
    assert timing["compute_ms"] > 0 and timing["host_copies"]
    assert timing["streamed"]["upload_bytes"] > 0 and timing["streamed"]["products_fraction"] is None


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("device", ["cuda", "cuda:all"])
@pytest.mark.parametrize("algo, accuracy", [("auto", "native"), ("cublas", "native"), ("cublas", "bound"), ("winograd", "bound"), ("emulated", "native")])
def test_complex_host_arrays_on_the_gpu(dtype, device, algo, accuracy):
    # Complex products on a GPU executor (and a team): the library's
    # complex form over the GPU's real products, or on one GPU with
    # `cublas` cuBLAS's own (cgemm/zgemm, 3M forms); Gaussian integers exact.
    rng = np.random.default_rng(1)
    shapes = [(1, 1, 1), (33, 17, 65), (257, 300, 129)]
    if device == "cuda:all":
        # Large enough that a team of several GPUs spreads each real
        # product over them (NCCL between the GPUs).
        shapes.append((1025, 700, 513))
    for m, k, n in shapes:
        a = (rng.integers(-8, 9, (m, k)) + 1j * rng.integers(-8, 9, (m, k))).astype(dtype)
        b = (rng.integers(-8, 9, (k, n)) + 1j * rng.integers(-8, 9, (k, n))).astype(dtype)
        c = fastmm.matmul(a, b, device=device, algo=algo, accuracy=accuracy)
        assert c.dtype == dtype
        np.testing.assert_array_equal(c, a @ b)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("accuracy", ["native", "bound"])
@pytest.mark.parametrize("algo", ["cublas", "emulated", "cuda-fast"])
def test_complex_gpu_tensors_in_place(dtype, accuracy, algo):
    # Complex products of interleaved CUDA tensors: cuBLAS's own
    # (cgemm/zgemm at native, their 3M forms at bound) in place, or
    # fastmm's real products of the parts split on the device (four or
    # three). Gaussian integers exact, row-major and transposed views, a
    # batch sharing B, a strided `out`, and a fresh GpuArray of the
    # complex type.
    gen = torch.Generator().manual_seed(12)
    gauss = lambda *s: torch.complex(*torch.randint(-8, 9, (2, *s), generator=gen).double()).to(dtype).cuda()  # noqa: E731
    for m, k, n in [(1, 1, 1), (1, 9, 7), (33, 17, 65), (257, 300, 129)]:
        a, b = gauss(m, k), gauss(k, n)
        want = (a.cpu().to(torch.complex128) @ b.cpu().to(torch.complex128)).to(dtype)
        result = fastmm.matmul(a, b, algo=algo, accuracy=accuracy)
        assert result.dtype == str(dtype).split(".")[1] and result.shape == (m, n)
        assert torch.equal(torch.from_dlpack(result).cpu(), want)
        # Transposed views of A and B, read in place, and a transposed out.
        at, bt = a.mT.contiguous().mT, b.mT.contiguous().mT
        out = torch.full((n, m), float("nan"), dtype=dtype, device="cuda").mT
        fastmm.matmul(at, bt, out=out, algo=algo, accuracy=accuracy)
        assert torch.equal(out.cpu(), want)
    a, b = gauss(3, 33, 17), gauss(17, 65)
    out = torch.full((3, 33, 130), float("nan"), dtype=dtype, device="cuda")[..., :65]
    fastmm.matmul(a, b, out=out, algo=algo, accuracy=accuracy)
    torch.cuda.synchronize()
    want = a.cpu().to(torch.complex128) @ b.cpu().to(torch.complex128)
    assert torch.equal(out.cpu(), want.to(dtype))
    with pytest.raises(TypeError, match="complex64|complex128"):
        fastmm.matmul(a, b.to(torch.complex128 if dtype == torch.complex64 else torch.complex64), algo=algo)


@pytest.mark.parametrize("algo", ["auto", "cublas", "emulated"])
def test_complex_cupy_arrays(algo):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(5)
    a = (rng.integers(-8, 9, (65, 33)) + 1j * rng.integers(-8, 9, (65, 33))).astype(np.complex64)
    b = (rng.integers(-8, 9, (33, 17)) + 1j * rng.integers(-8, 9, (33, 17))).astype(np.complex64)
    result = fastmm.matmul(cupy.asarray(a), cupy.asarray(b), algo=algo)
    c = cupy.from_dlpack(result)
    assert c.dtype == cupy.complex64
    np.testing.assert_array_equal(cupy.asnumpy(c), a @ b)
