//! Prints the throughput of each available microkernel on cache-resident
//! panels, and as the driver runs it: the ceilings for the packed GEMM on
//! this machine.
//!
//! `cargo run --release -p fastmm --features dev --example microkernel_peak`

use fastmm::dev::microkernel_report;
use fastmm::CpuKernel;

fn main() {
    for &family in CpuKernel::ALL {
        for line in microkernel_report::<f32>(family)
            .into_iter()
            .chain(microkernel_report::<f64>(family))
            .chain(microkernel_report::<i32>(family))
            .chain(microkernel_report::<i64>(family))
        {
            println!("{line}");
        }
    }
}
