//! The CUDA kernels compile with NVRTC for Hopper (sm_90) in every variant
//! the library can ask for. NVRTC needs no GPU; CI installs it from the
//! `nvidia-cuda-nvrtc` wheel and sets FASTMM_REQUIRE_NVRTC=1, so a missing
//! library fails there instead of skipping.
#![cfg(feature = "cuda")]

use fastmm::cuda::compile::{
    cached_ptx, compile, nvrtc_available, KernelKey, KernelSource, KERNEL_CACHE_ENV,
};
use fastmm::cuda::libraries;
use fastmm::{gemm, Algorithm, DType, Error, GemmOptions, Matrix};

fn nvrtc_or_skip() -> bool {
    if nvrtc_available() {
        return true;
    }
    assert!(
        std::env::var("FASTMM_REQUIRE_NVRTC").as_deref() != Ok("1"),
        "FASTMM_REQUIRE_NVRTC=1 but libnvrtc is not on the loader path"
    );
    eprintln!("skipped: libnvrtc not found (set LD_LIBRARY_PATH to an NVRTC 13 install)");
    false
}

#[test]
fn every_kernel_compiles_for_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    for source in KernelSource::ALL {
        let tiles: &[usize] = match source {
            KernelSource::Naive => &[fastmm::tunables::CUDA_NAIVE_BLOCK],
            KernelSource::Tiled => &[1, 2, 3, 8, 16, 31, 32],
            KernelSource::Combine | KernelSource::CombineGroup => {
                &[fastmm::tunables::CUDA_COMBINE_ROWS_PER_BLOCK]
            }
            KernelSource::Convert => &[0, 1],
            // Every TM of some type; each type builds its own.
            source if source.is_simt() => &[4, 8, 16],
            KernelSource::FastMma => &[2, 3],
            KernelSource::FastMbar => &[fastmm::cuda::gemm::MBAR_MICRO_TILE.0],
            _ => unreachable!("every SIMT source is matched above"),
        };
        for dtype in DType::ALL.into_iter().filter(|&d| source.supports(d)) {
            for &tile in tiles {
                if source.is_simt() && !fastmm::cuda::gemm::simt_micro_tiles(dtype).contains(&tile)
                {
                    continue;
                }
                let key = KernelKey {
                    source,
                    dtype,
                    tile,
                };
                // fast.cu stages B with cp.async from sm_80 and through
                // registers before, fast_ring.cu copies synchronously
                // before sm_80 (and in a two-stage ring): both paths must
                // build.
                let archs: &[&'static str] = if source.is_simt() {
                    &["sm_90", "sm_75"]
                } else {
                    &["sm_90"]
                };
                for &arch in archs {
                    let ptx = compile(key, arch)
                        .unwrap_or_else(|e| panic!("{source:?} {dtype} tile {tile} {arch}: {e}"));
                    let text = ptx.to_src();
                    assert!(
                        text.contains(&format!(".entry {}", source.entry())),
                        "{source:?} {dtype} tile {tile} {arch}: no entry point in the PTX"
                    );
                    if source == KernelSource::FastStream {
                        assert!(
                            text.contains(&format!(".entry {}", KernelSource::STREAM_FIXUP_ENTRY)),
                            "{dtype} tile {tile} {arch}: no stream-K fix-up in the PTX"
                        );
                    }
                    assert!(
                        text.contains(&format!(".target {arch}")),
                        "PTX not built for {arch}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_kernel_that_does_not_compile_is_a_typed_error() {
    if !nvrtc_or_skip() {
        return;
    }
    // A tile of 0 makes the shared arrays zero-sized: NVRTC rejects it.
    let key = KernelKey {
        source: KernelSource::Tiled,
        dtype: DType::F32,
        tile: 0,
    };
    match compile(key, "sm_90") {
        Err(Error::Cuda(message)) => assert!(message.contains("gemm_tiled"), "{message}"),
        other => panic!("expected a compile error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn without_a_driver_gpu_algorithms_are_a_typed_error() {
    let driver_present = libraries()[0].1;
    if driver_present {
        eprintln!("skipped: a CUDA driver is present (selftest covers the GPU)");
        return;
    }
    let a = Matrix::<f32>::from_fn(3, 4, |i, j| (i + j) as f32);
    let b = Matrix::<f32>::from_fn(4, 2, |i, j| (i * j) as f32);
    for algorithm in Algorithm::all_on(fastmm::Device::Cuda) {
        let mut c = Matrix::filled(3, 2, f32::NAN);
        let err = gemm(
            1.0,
            a.as_ref(),
            b.as_ref(),
            0.0,
            c.as_mut(),
            &GemmOptions::new(algorithm),
        )
        .expect_err("no GPU here");
        assert!(
            matches!(err, Error::CudaUnavailable(ref m) if m.contains("libcuda")),
            "{algorithm}: {err}"
        );
    }
}

#[test]
fn compiled_ptx_is_cached_on_disk_per_variant() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fastmm-kernel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The only test in this binary that reads the variable.
    std::env::set_var(KERNEL_CACHE_ENV, &dir);
    let key = KernelKey {
        source: KernelSource::Tiled,
        dtype: DType::I64,
        tile: 8,
    };
    let first = cached_ptx(key, "sm_90", 13000).expect("compiles");
    let files: Vec<_> = std::fs::read_dir(&dir).expect("cache dir made").collect();
    assert_eq!(files.len(), 1, "one file per variant");
    let second = cached_ptx(key, "sm_90", 13000).expect("read back");
    assert_eq!(first.to_src(), second.to_src());
    // Another driver version or tile is another file.
    cached_ptx(key, "sm_90", 13010).expect("compiles");
    cached_ptx(KernelKey { tile: 16, ..key }, "sm_90", 13000).expect("compiles");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
    std::env::remove_var(KERNEL_CACHE_ENV);
    let _ = std::fs::remove_dir_all(&dir);
}
