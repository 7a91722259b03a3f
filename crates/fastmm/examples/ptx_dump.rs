//! Writes the PTX of every CUDA kernel variant fastmm compiles (NVRTC, no
//! GPU needed) into a directory, for `ptxas -arch=sm_90 -v` resource
//! reports (scripts/ptxas-report.sh).
//!
//! `cargo run --release -p fastmm --features dev --example ptx_dump -- DIR [ARCH] [ONLY]`
//! (ARCH, e.g. `sm_75`, defaults to `sm_90`; ONLY keeps the kernels whose
//! entry name contains it, as compiling all of them takes minutes.)

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: ptx_dump DIR [ARCH] [ONLY]")?;
    let arch: &'static str = match std::env::args().nth(2) {
        Some(arch) => Box::leak(arch.into_boxed_str()),
        None => "sm_90",
    };
    let only = std::env::args().nth(3).unwrap_or_default();
    for path in fastmm::dev::ptx_dump(std::path::Path::new(&dir), arch, &only)? {
        println!("{}", path.display());
    }
    Ok(())
}
