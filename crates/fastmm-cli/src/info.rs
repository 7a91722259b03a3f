//! `fastmm info`: the library's report of this machine (the CPU, its
//! caches and kernels, the blocks and `auto` rules in use, the tuning file,
//! the environment, and the GPUs or what is missing for one), as text or
//! JSON.

use std::fmt::Write as _;

use anyhow::Result;
use clap::Args;
use fastmm::info::MachineInfo;
use fastmm::system::format_bytes;

use crate::common::write_stdout;

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// One JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &InfoArgs) -> Result<()> {
    let report = fastmm::info::report()?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        text(&report)?
    };
    write_stdout(&text)
}

fn text(r: &MachineInfo) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    let c = &r.cpu;
    writeln!(out, "CPU: {} ({} hardware threads)", c.model, c.threads)?;
    if let Some(bytes) = c.available_memory_bytes {
        writeln!(out, "memory available: {}", format_bytes(bytes as u128))?;
    }
    let l3 = if c.l3_bytes < c.l3_total_bytes {
        format!(
            "{} (blocks count {}, the share of its CPUs)",
            format_bytes(c.l3_total_bytes as u128),
            format_bytes(c.l3_bytes as u128)
        )
    } else {
        format_bytes(c.l3_bytes as u128)
    };
    writeln!(
        out,
        "caches: L1d {}, L2 {}, L3 {l3}",
        format_bytes(c.l1d_bytes as u128),
        format_bytes(c.l2_bytes as u128),
    )?;
    let kernels: Vec<String> = c
        .kernels
        .iter()
        .map(|(name, ok)| format!("{name} {}", if *ok { "yes" } else { "no" }))
        .collect();
    writeln!(out, "CPU kernels: {}", kernels.join(", "))?;
    writeln!(
        out,
        "packed uses: {} ({})",
        c.kernel_in_use, c.kernel_source
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<6} {:<22} {:>6} {:>14} {:>22} {:>13}",
        "dtype", "microkernel", "MR×NR", "MC/KC/NC", "C larger than L2", "threads from"
    )?;
    let blocks = |b: [usize; 3]| format!("{}/{}/{}", b[0], b[1], b[2]);
    for p in &r.packed {
        writeln!(
            out,
            "{:<6} {:<22} {:>6} {:>14} {:>22} {:>13}",
            p.dtype.name(),
            p.kernel,
            format!("{}×{}", p.mr, p.nr),
            blocks(p.blocks),
            blocks(p.blocks_large_c),
            format!("{}³", p.parallel_from)
        )?;
    }
    writeln!(out)?;
    writeln!(out, "strassen/winograd --threshold auto:")?;
    writeln!(
        out,
        "{:<7} {:<6} {:>10} {:>11} {:>11}",
        "device", "dtype", "recurse ≥", "first from", "max levels"
    )?;
    for a in &r.strassen_auto {
        writeln!(
            out,
            "{:<7} {:<6} {:>10} {:>11} {:>11}",
            a.device.to_string(),
            a.dtype.name(),
            a.threshold,
            a.start,
            a.max_levels
        )?;
    }
    let streams = match r.sum_stream_from_bytes {
        Some(bytes) => format!(
            "non-temporal stores for passes writing at least {} (half the L3)",
            format_bytes(bytes as u128)
        ),
        None => "never streamed".to_string(),
    };
    writeln!(out, "cpu sums (--sum-stores auto): {streams}")?;
    writeln!(out)?;
    let libs: Vec<String> = r
        .cuda_libraries
        .iter()
        .map(|(name, ok)| format!("{name} {}", if *ok { "found" } else { "missing" }))
        .collect();
    if !libs.is_empty() {
        writeln!(out, "CUDA libraries: {}", libs.join(", "))?;
    }
    for gpu in &r.gpus {
        let d = &gpu.info;
        writeln!(
            out,
            "GPU cuda:{}: {} ({}, {} SMs, {}, driver {})",
            d.ordinal,
            d.name,
            gpu.arch,
            d.multiprocessors,
            format_bytes(d.total_memory as u128),
            d.driver_version
        )?;
        for (dtype, kernel) in &gpu.cuda_fast {
            writeln!(out, "  cuda-fast {}: {kernel}", dtype.name())?;
        }
    }
    match (&r.gpus[..], &r.gpu_unavailable) {
        ([], Some(why)) => writeln!(out, "GPU: none ({why})")?,
        ([], None) => writeln!(out, "GPU: none")?,
        (_, Some(why)) => writeln!(out, "GPU: {why}")?,
        _ => {}
    }
    writeln!(out)?;
    writeln!(out, "tuning: {}", r.tuning)?;
    for ignored in &r.ignored_variables {
        writeln!(out, "ignored: {ignored}")?;
    }
    Ok(out)
}
