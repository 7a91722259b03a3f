//! Prints the throughput of each available microkernel on cache-resident
//! panels, and as the driver runs it (Ã streaming from an L2-sized block
//! into tiles of a 2048-wide C): the ceilings for the packed GEMM on this
//! machine.
//!
//! `cargo run --release --example microkernel_peak`

use fastmm::packed::{select_kernel, CpuKernel, PackedKernel};
use fastmm::Element;

fn report<T: Element>(family: CpuKernel) {
    let Ok(kernel): Result<&PackedKernel<T>, _> = select_kernel::<T>(Some(family)) else {
        return;
    };
    for kc in [128, 256, 384] {
        let calls = 2_000_000_000 / (kernel.mr * kernel.nr * kc);
        let best = (0..5)
            .map(|_| kernel.microkernel_gflops(kc, calls))
            .fold(0.0, f64::max);
        println!(
            "{:<4} {:<16} kc={kc:<4} {best:8.1} GFLOP/s",
            T::DTYPE,
            kernel.name
        );
    }
    let blocks = kernel.analytical_blocks();
    let (kc, panels) = (blocks.kc, blocks.mc.div_ceil(kernel.mr));
    let calls = 2_000_000_000 / (kernel.mr * kernel.nr * kc);
    let best = (0..5)
        .map(|_| kernel.streaming_gflops(kc, panels, 2048, calls))
        .fold(0.0, f64::max);
    println!(
        "{:<4} {:<16} kc={kc:<4} {best:8.1} GFLOP/s streaming {panels} panels of Ã",
        T::DTYPE,
        kernel.name
    );
}

fn main() {
    for family in CpuKernel::ALL {
        report::<f32>(family);
        report::<f64>(family);
        report::<i32>(family);
        report::<i64>(family);
    }
}
