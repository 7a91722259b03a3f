//! The fused Strassen primitive on the GPU (`kernels/fused.cu`): a group of
//! products of one shape, each **M = (Σ wᵢAᵢ)(Σ vⱼBⱼ), C_d ← β·C_d +
//! γ_d·α·M**, in one launch whose grid's z index picks the product. The
//! operand sums are formed while the kernel stages its tiles and the tile
//! is added into every destination, so nothing is stored between the
//! products (Huang, Yu and van de Geijn, "Strassen's algorithm reloaded on
//! GPUs", ACM TOMS 2020). The inner loops and tiles are `cuda-fast`'s SIMT
//! ones ([`FastConfig`]); the group's destinations are pairwise disjoint,
//! so its products run concurrently without atomics.

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::gemm::fast::{simt_micro_tile, FastConfig};
use crate::cuda::kernels::gemm::to_i32;
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::options::{CudaKernel, GemmOptions, GpuOptions};

/// Most products of one launch (`GROUP_PRODUCTS` in `kernels/fused.cu`).
const GROUP_PRODUCTS: usize = 8;
/// Most terms (A, B and C together) of one launch (`GROUP_TERMS`).
const GROUP_TERMS: usize = 96;
/// Terms per operand staged through shared memory (`STAGED_TERMS`).
const STAGED_TERMS: usize = 2;
/// Threads per block (`THREADS`).
const THREADS: usize = 256;

/// The kernel's `FusedGroup`, field for field.
#[repr(C)]
#[derive(Clone, Copy)]
struct GroupArgs<T> {
    ptr: [u64; GROUP_TERMS],
    weight: [T; GROUP_TERMS],
    first: [[i32; 3]; GROUP_PRODUCTS],
    count: [[i32; 3]; GROUP_PRODUCTS],
}

// SAFETY: a #[repr(C)] struct of u64, T (f32, f64, i32 or i64) and i32
// arrays in the order and types of the kernel's `FusedGroup` (pointers as
// unsigned long long, ELEM as T, int as i32); GROUP_TERMS is a multiple of
// 4, so no padding differs between the two.
unsafe impl<T: Element> DeviceRepr for GroupArgs<T> {}

/// One product of a group on the GPU: weighted device addresses of its A
/// terms, B terms and destinations. All A terms share one leading
/// dimension, as do all B terms and all destinations.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FusedProduct<T> {
    pub a: Vec<(T, u64)>,
    pub b: Vec<(T, u64)>,
    pub c: Vec<(T, u64)>,
}

impl<T> FusedProduct<T> {
    fn terms(&self) -> usize {
        self.a.len() + self.b.len() + self.c.len()
    }
}

/// Bytes of dynamic shared memory `kernels/fused.cu` takes for `dtype` and
/// micro-tile rows `tm`: its `TILE_BYTES + RAW_BYTES`.
pub fn shared_bytes(dtype: DType, tm: usize) -> usize {
    let (tm, tn) = simt_micro_tile(dtype, tm);
    let size = dtype.size_bytes();
    let (bm, bn) = (16 * tm, 16 * tn);
    let bk = if tm * tn > 64 { 16 } else { 8 };
    let lanes = 16 / size;
    let vectors = (bm * bk + bn * bk) / lanes / THREADS;
    2 * bk * (bm + bn) * size + STAGED_TERMS * vectors * THREADS * 16
}

/// The fused kernel compiled for each tile configuration it may pick.
#[derive(Clone)]
pub(crate) struct FusedKernel {
    configs: Vec<FastConfig>,
    functions: Vec<CudaFunction>,
    shared: Vec<usize>,
}

impl FusedKernel {
    /// Compiles the kernel for T in the SIMT tile configurations of
    /// `cuda-fast` (`opts.tile` picks one) and lets it use its shared
    /// memory; refuses a device with too little.
    pub fn resolve<T: Element>(gpu: &Gpu, opts: &GemmOptions) -> Result<FusedKernel, Error> {
        let simt = GemmOptions {
            gpu: GpuOptions {
                kernel: Some(CudaKernel::Simt),
                ..opts.gpu
            },
            ..*opts
        };
        // fused.cu has the block-barrier tiles of every TM; the mbarrier
        // kernel's 8×8 is cuda-fast's own.
        let configs: Vec<FastConfig> = FastConfig::candidates(&simt, T::DTYPE, gpu)?
            .into_iter()
            .map(|config| FastConfig {
                mbarriers: false,
                ..config
            })
            .collect();
        let mut functions = Vec::new();
        let mut shared = Vec::new();
        for config in &configs {
            let bytes = shared_bytes(T::DTYPE, config.tm);
            let function = gpu.function_with_shared(
                KernelKey {
                    source: KernelSource::Fused,
                    dtype: T::DTYPE,
                    tile: config.tm,
                },
                bytes,
                "the fused variant",
            )?;
            functions.push(function);
            shared.push(bytes);
        }
        Ok(FusedKernel {
            configs,
            functions,
            shared,
        })
    }

    /// Of the configurations (smallest block tile first), the last whose
    /// tiles of `products` m×n products fill every SM, else the first.
    fn pick(&self, (m, n): (usize, usize), products: usize, sms: usize) -> usize {
        self.configs
            .iter()
            .rposition(|config| {
                let (rows, cols) = config.block_shape();
                m.div_ceil(rows) * n.div_ceil(cols) * products >= sms
            })
            .unwrap_or(0)
    }

    /// Runs `group` (products of one m×k×n shape with pairwise disjoint
    /// destinations; leading dimensions `lds` of the A terms, the B terms
    /// and the destinations) in as few launches as the kernel's argument
    /// block holds, queued on the GPU's stream. β = 0 never reads C.
    ///
    /// A product with more than a third of the block's terms in one operand
    /// (deep Winograd levels) runs as several: M is bilinear, so the sums
    /// are cut into chunks and every pair of an A chunk and a B chunk is
    /// added into each chunk of the destinations, in rounds, the first
    /// applying β and the later ones adding.
    pub fn run<T: Element>(
        &self,
        gpu: &Gpu,
        (m, k, n): (usize, usize, usize),
        (alpha, beta): (T, T),
        group: &[FusedProduct<T>],
        lds: (usize, usize, usize),
    ) -> Result<(), Error> {
        if m == 0 || n == 0 || group.is_empty() {
            return Ok(());
        }
        for (round, products) in rounds(group).iter().enumerate() {
            let beta = if round == 0 { beta } else { T::ONE };
            self.launch_all(gpu, (m, k, n), (alpha, beta), products, lds)?;
        }
        Ok(())
    }

    /// Launches `group` (each product within the argument block's limits)
    /// in as few launches as that block holds.
    fn launch_all<T: Element>(
        &self,
        gpu: &Gpu,
        (m, k, n): (usize, usize, usize),
        (alpha, beta): (T, T),
        group: &[FusedProduct<T>],
        (lda, ldb, ldc): (usize, usize, usize),
    ) -> Result<(), Error> {
        let chosen = self.pick((m, n), group.len(), gpu.info().multiprocessors);
        let (block_rows, block_cols) = self.configs[chosen].block_shape();
        let grid_y = m.div_ceil(block_rows);
        if grid_y > gpu.info().max_grid_y {
            return Err(Error::Unsupported {
                algorithm: "the fused variant on the GPU",
                what: format!("{m} rows in blocks of {block_rows}"),
            });
        }
        let lanes = 16 / std::mem::size_of::<T>();
        let vec_ok = (lda % lanes == 0
            && ldb % lanes == 0
            && group
                .iter()
                .flat_map(|p| p.a.iter().chain(&p.b))
                .all(|&(_, ptr)| ptr % 16 == 0)) as i32;
        let (mi, ki, ni) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
        let (lda, ldb, ldc) = (lda as i64, ldb as i64, ldc as i64);
        let mut start = 0;
        while start < group.len() {
            // As many products as the argument block holds.
            let mut end = start;
            let mut terms = 0;
            while end < group.len()
                && end - start < GROUP_PRODUCTS
                && terms + group[end].terms() <= GROUP_TERMS
            {
                terms += group[end].terms();
                end += 1;
            }
            let launch_group = &group[start..end];
            let mut args = GroupArgs {
                ptr: [0; GROUP_TERMS],
                weight: [T::ZERO; GROUP_TERMS],
                first: [[0; 3]; GROUP_PRODUCTS],
                count: [[0; 3]; GROUP_PRODUCTS],
            };
            let mut next = 0;
            for (z, product) in launch_group.iter().enumerate() {
                for (operand, terms) in [&product.a, &product.b, &product.c].into_iter().enumerate()
                {
                    args.first[z][operand] = next as i32;
                    args.count[z][operand] = terms.len() as i32;
                    for &(weight, ptr) in terms {
                        args.ptr[next] = ptr;
                        args.weight[next] = weight;
                        next += 1;
                    }
                }
            }
            let config = LaunchConfig {
                grid_dim: (
                    n.div_ceil(block_cols) as u32,
                    grid_y as u32,
                    launch_group.len() as u32,
                ),
                block_dim: (THREADS as u32, 1, 1),
                shared_mem_bytes: self.shared[chosen] as u32,
            };
            let mut launch = gpu.stream.launch_builder(&self.functions[chosen]);
            launch
                .arg(&mi)
                .arg(&ni)
                .arg(&ki)
                .arg(&alpha)
                .arg(&lda)
                .arg(&ldb)
                .arg(&beta)
                .arg(&ldc)
                .arg(&args)
                .arg(&vec_ok);
            // SAFETY: the arguments match `gemm_fused(int m, int n, int k,
            // ELEM alpha, long long lda, long long ldb, ELEM beta, long long
            // ldc, FusedGroup, int vec_ok)`; every pointer the group names
            // addresses an m×k (A), k×n (B) or m×n (C) row-major block with
            // the given leading dimension (the caller's contract); vec_ok is
            // set only when every A and B term starts 16-byte aligned and
            // its rows stay so; the destinations of different products are
            // disjoint and none is a source, so no block's writes race; the
            // dynamic shared memory is the size the kernel lays out, which
            // `resolve` allowed on this function.
            unsafe { launch.launch(config) }
                .map_err(|e| cuda_err("fused kernel launch failed", e))?;
            start = end;
        }
        Ok(())
    }
}

/// Most terms of one operand (A, B or the destinations) of a product in
/// one launch.
const OPERAND_TERMS: usize = GROUP_TERMS / 3;

/// The group as rounds of launchable products: a product within
/// [`OPERAND_TERMS`] per operand is itself, in round 0; a larger one is cut
/// into chunks, and round r holds its r-th (A chunk, B chunk) pair for
/// every chunk of its destinations. Products of one round have disjoint
/// destinations, and each destination meets each pair of chunks once.
fn rounds<T: Copy>(group: &[FusedProduct<T>]) -> Vec<Vec<FusedProduct<T>>> {
    let mut rounds: Vec<Vec<FusedProduct<T>>> = Vec::new();
    for product in group {
        let (a, b, c) = (
            product.a.chunks(OPERAND_TERMS),
            product.b.chunks(OPERAND_TERMS),
            product.c.chunks(OPERAND_TERMS),
        );
        let pairs = a.flat_map(|a| b.clone().map(move |b| (a, b)));
        for (round, (a, b)) in pairs.enumerate() {
            if rounds.len() == round {
                rounds.push(Vec::new());
            }
            for c in c.clone() {
                rounds[round].push(FusedProduct {
                    a: a.to_vec(),
                    b: b.to_vec(),
                    c: c.to_vec(),
                });
            }
        }
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_product_runs_in_rounds_that_cover_each_pair_of_terms_once() {
        let terms = |n: usize, base: u64| -> Vec<(i64, u64)> {
            (0..n as u64).map(|i| (1, base + i)).collect()
        };
        let small = FusedProduct {
            a: terms(2, 0),
            b: terms(2, 100),
            c: terms(2, 200),
        };
        // 70 A terms (3 chunks), 33 B terms (2), 40 destinations (2).
        let large = FusedProduct {
            a: terms(70, 1000),
            b: terms(33, 2000),
            c: terms(40, 3000),
        };
        let rounds = rounds(&[small.clone(), large.clone()]);
        assert_eq!(rounds.len(), 6);
        assert_eq!(rounds[0][0], small);
        let mut seen = std::collections::HashSet::new();
        for round in &rounds {
            for product in round {
                assert!(product.terms() <= GROUP_TERMS);
                for &(_, a) in &product.a {
                    for &(_, b) in &product.b {
                        for &(_, c) in &product.c {
                            assert!(seen.insert((a, b, c)), "({a}, {b}, {c}) twice");
                        }
                    }
                }
            }
            // Disjoint destinations within a round.
            let dests: Vec<u64> = round
                .iter()
                .flat_map(|p| p.c.iter().map(|&(_, c)| c))
                .collect();
            let unique: std::collections::HashSet<_> = dests.iter().collect();
            assert_eq!(unique.len(), dests.len());
        }
        assert_eq!(seen.len(), 2 * 2 * 2 + 70 * 33 * 40);
    }

    #[test]
    fn shared_memory_covers_the_tiles_and_the_staged_terms() {
        // f32 8×16: tiles 2·16·(128 + 256)·4 = 48 KiB; 6 vectors per
        // thread per term, 2 terms: 48 KiB.
        assert_eq!(shared_bytes(DType::F32, 8), 48 * 1024 + 48 * 1024);
        // f64 8×4 (128×64, BK 8): tiles 24 KiB, 3 vectors per thread.
        assert_eq!(shared_bytes(DType::F64, 8), 24 * 1024 + 24 * 1024);
        // f64 4×4 (64×64): tiles 16 KiB, 2 vectors per thread.
        assert_eq!(shared_bytes(DType::F64, 4), 16 * 1024 + 16 * 1024);
    }
}
