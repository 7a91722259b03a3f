//! The GPU backend of the fast algorithms: the same recursion as on the CPU
//! ([`crate::strassen::engine`]) with the classical products on cuBLAS or an
//! own kernel (`--base`), the linear combinations in `kernels/combine.cu`,
//! and the temporaries in device memory, allocated once per product (seed
//! 000 §2.2.1's per-level workspace, or seed 003's few temporaries with
//! `--variant frugal`) and reused by repeated runs of the same product.

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr};

use crate::cuda::compile::{KernelKey, KernelSource};
use crate::cuda::cuda_err;
use crate::cuda::device::Gpu;
use crate::cuda::gemm::{launch_combine, ClassicalGemm, Operand};
use crate::element::Element;
use crate::error::Error;
use crate::strassen::backend::{Backend, Block, Store};
use crate::tunables::CUDA_COMBINE_ROWS_PER_BLOCK;

/// A, B, C and the temporaries of one product on the GPU.
pub(crate) struct CudaBackend<'g, T: Element> {
    gpu: &'g Gpu,
    classical: ClassicalGemm,
    combine: CudaFunction,
    a: Operand,
    b: Operand,
    c: Operand,
    temps: Vec<CudaSlice<T>>,
    temp_ptrs: Vec<u64>,
    capacities: Vec<usize>,
}

impl<'g, T: Element> CudaBackend<'g, T> {
    pub(crate) fn new(
        gpu: &'g Gpu,
        classical: ClassicalGemm,
        (a, b, c): (Operand, Operand, Operand),
    ) -> Result<Self, Error> {
        let combine = gpu.function(KernelKey {
            source: KernelSource::Combine,
            dtype: T::DTYPE,
            tile: CUDA_COMBINE_ROWS_PER_BLOCK,
        })?;
        Ok(CudaBackend {
            gpu,
            classical,
            combine,
            a,
            b,
            c,
            temps: Vec::new(),
            temp_ptrs: Vec::new(),
            capacities: Vec::new(),
        })
    }

    /// Address and leading dimension of a block.
    fn operand(&self, block: Block) -> Operand {
        let store = match block.store {
            Store::A => self.a,
            Store::B => self.b,
            Store::C => self.c,
            Store::Temp { id, ld } => Operand {
                ptr: self.temp_ptrs[id],
                ld,
            },
        };
        store.at::<T>(block.row, block.col)
    }
}

impl<T: Element> Backend<T> for CudaBackend<'_, T> {
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
        // The same product asks for the same capacities every run: keep them.
        if self.capacities == capacities {
            return Ok(());
        }
        let (free, _) = self.gpu.memory_info()?;
        let bytes: usize = capacities.iter().sum::<usize>() * std::mem::size_of::<T>();
        if bytes > free {
            return Err(Error::Cuda(format!(
                "the fast algorithm's temporaries need {bytes} bytes but only {free} are free on the GPU"
            )));
        }
        self.temps.clear();
        for &capacity in capacities {
            // SAFETY: every schedule writes a temporary before reading it.
            let slice = unsafe { self.gpu.stream.alloc::<T>(capacity.max(1)) }
                .map_err(|e| cuda_err("cannot allocate a temporary", e))?;
            self.temps.push(slice);
        }
        self.temp_ptrs = self
            .temps
            .iter()
            .map(|t| t.device_ptr(&self.gpu.stream).0)
            .collect();
        self.capacities = capacities.to_vec();
        Ok(())
    }

    fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
        if a.cols == 0 {
            return self.combine(beta, c, &[]);
        }
        let (oa, ob, oc) = (self.operand(a), self.operand(b), self.operand(c));
        self.classical
            .run(self.gpu, (a.rows, a.cols, b.cols), alpha, oa, ob, beta, oc)
    }

    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        let sources: Vec<(T, Operand)> = terms.iter().map(|&(w, t)| (w, self.operand(t))).collect();
        // SAFETY: the engine gives blocks inside A, B, C or a temporary of
        // the capacity the dry run sized, all rows×cols, the destination
        // overlapping no source.
        unsafe {
            launch_combine(
                self.gpu,
                &self.combine,
                keep,
                self.operand(dst),
                (dst.rows, dst.cols),
                &sources,
            )
        }
    }
}
