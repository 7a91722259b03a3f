//! Fills a kernel cache directory with the PTX of every CUDA kernel
//! variant (NVRTC, no GPU needed), so that a GPU machine given it as
//! `FASTMM_KERNEL_CACHE` starts without compiling.
//!
//! `cargo run --release -p fastmm --features dev --example kernel_cache -- DIR [ARCH] [DRIVER]`
//! (ARCH defaults to `sm_90`, DRIVER, the CUDA driver version the GPU
//! reports, to 13000.)

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: kernel_cache DIR [ARCH] [DRIVER]")?;
    let arch: &'static str = match std::env::args().nth(2) {
        Some(arch) => Box::leak(arch.into_boxed_str()),
        None => "sm_90",
    };
    let driver = match std::env::args().nth(3) {
        Some(text) => text.parse()?,
        None => 13000,
    };
    let count = fastmm::dev::warm_kernel_cache(std::path::Path::new(&dir), arch, driver)?;
    println!("{count} kernel variants cached in {dir} for {arch}, driver {driver}");
    Ok(())
}
