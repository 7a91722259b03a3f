//! What the commands share: the algorithm options (one set for `run`,
//! `bench`, `multiply` and `tune`), where each algorithm runs, the devices
//! opened for a command, and small parsers and formatters.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fastmm::system::{available_memory_bytes, format_bytes};
use fastmm::{
    Accuracy, Algorithm, BlockSizes, Context, CpuKernel, CpuOptions, CudaKernel, DType, Device,
    DeviceKind, DeviceList, FastOptions, GemmOptions, GpuMemory, GpuOptions, GpuPrecision, Machine,
    SumStores, Variant,
};

/// How a command ended when no input error stopped it.
pub enum Outcome {
    AllCorrect,
    Failures(usize),
}

impl Outcome {
    /// The outcome of a command whose results had `failures` failures.
    pub fn of_failures(failures: usize) -> Outcome {
        match failures {
            0 => Outcome::AllCorrect,
            n => Outcome::Failures(n),
        }
    }
}

/// The options of a product, besides which algorithm: the same for every
/// command that multiplies.
#[derive(Args, Debug, Clone)]
pub struct AlgoArgs {
    /// Where algorithms run: cpu, cuda (GPU 0), cuda:N, a team of GPUs
    /// (cuda:all, or a list such as cuda:0,1), or auto (each on the CPU
    /// where it runs there, else on GPU 0). An algorithm given as
    /// NAME@DEVICE (e.g. strassen@cuda) runs there whatever this says.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Worker threads of the threaded CPU algorithms, at most the hardware
    /// threads (a larger count is capped, with a note; default:
    /// FASTMM_NUM_THREADS, else OMP_NUM_THREADS, else the tuning file's,
    /// else all hardware threads).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Tile edge of tiled, parallel and cuda-tiled; for cuda-fast's SIMT
    /// kernel the micro-tile rows TM (4-byte types: 8 for 8×16, 16 for
    /// 16×8; f64: 4 for 4×4, 8 for 8×4, on sm_90+ 8×8 with mbarriers; i64:
    /// 4 or 8, square; default: chosen per shape).
    #[arg(long)]
    pub tile: Option<usize>,
    /// Microkernel family of packed: avx512, avx2 or generic (default:
    /// FASTMM_CPU_KERNEL, else the fastest this CPU runs).
    #[arg(long, value_name = "KERNEL")]
    pub cpu_kernel: Option<String>,
    /// Cache blocks of packed as MC,KC,NC, or `default` (default:
    /// FASTMM_BLOCKS, else the tuning file's, else derived from the
    /// caches).
    #[arg(long, value_name = "MC,KC,NC")]
    pub blocks: Option<String>,
    /// packed: run products of at least this edge cubed (m·k·n ≥ N³) on
    /// several threads, smaller ones on one (default: the tuning file's
    /// measured crossover, else 160 for 4-byte and 128 for 8-byte types).
    #[arg(long, value_name = "N")]
    pub parallel_from: Option<usize>,
    /// strassen/winograd: recurse while m, k and n are all at least this,
    /// or auto (the measured crossover of the device and type).
    #[arg(long, value_name = "N0|auto", default_value = "auto")]
    pub threshold: String,
    /// strassen/winograd: most recursion levels (default: the accuracy
    /// rule for floats, unlimited for integers).
    #[arg(long)]
    pub depth: Option<usize>,
    /// strassen/winograd memory schedule: temporaries, frugal, fused,
    /// batched, or auto (batched when its temporaries fit: on the CPU in
    /// half the available memory, on a GPU beside A, B and C in its free
    /// memory; else frugal).
    #[arg(long, default_value = "auto")]
    pub variant: String,
    /// strassen/winograd on the CPU with temporaries or frugal: operand
    /// sums of at most this many blocks that feed a base-case product are
    /// formed while packed packs instead of stored (default: 0, none).
    #[arg(long, value_name = "TERMS")]
    pub lazy_sums: Option<usize>,
    /// strassen/winograd on the CPU: how fresh sums are written: auto
    /// (streamed past the caches for passes of at least half the L3),
    /// stream, cached.
    #[arg(long, default_value = "auto")]
    pub sum_stores: String,
    /// strassen/winograd: the classical algorithm of the base case
    /// (default: packed on the CPU; cublas on a GPU, cuda-fast for
    /// integers).
    #[arg(long)]
    pub base: Option<String>,
    /// GPU: where the operands live (device, pitched, managed).
    #[arg(long, default_value = "device")]
    pub gpu_memory: String,
    /// cublas on f32: fp32 (IEEE), or a tensor-core mode: tf32, bf16, f16
    /// (verified against the looser bound of its input precision).
    #[arg(long, default_value = "fp32")]
    pub precision: String,
    /// What the results promise about their error: native (as accurate as
    /// the device's native product: packed, cuBLAS), bound (within the
    /// classical bound; Strassen's levels and fewer moduli allowed), tf32
    /// or bf16 (that bound at TF32's or bfloat16's precision; cuBLAS's
    /// tensor-core modes allowed), or bits:N (the emulated product at N
    /// bits per entry). `auto` takes the fastest product that meets it.
    #[arg(long, default_value = "native")]
    pub accuracy: String,
    /// cuda-fast: kernel family, auto (mma for f64 on sm_90+, else simt),
    /// simt (FMA units) or mma (f64 on the FP64 tensor cores) (default:
    /// FASTMM_CUDA_KERNEL, else auto).
    #[arg(long)]
    pub cuda_kernel: Option<String>,
    /// GPU: stage the host↔device copies in page-locked (pinned) memory
    /// instead of pageable memory.
    #[arg(long)]
    pub pinned: bool,
    /// GPU: the most GPU memory a product may use, e.g. 16G (default: the
    /// free memory). A larger product runs out of core: streamed through
    /// the GPU in tiles, copies overlapping products.
    #[arg(long, value_name = "BYTES")]
    pub max_gpu_memory: Option<String>,
    /// Run out of core even when the product fits: a GPU streams it
    /// through in tiles; `multiply` maps its files and writes C in blocks.
    #[arg(long)]
    pub out_of_core: bool,
}

/// A thread count of at most the hardware threads: more only adds
/// switching between them (10000 threads ran a 256³ product 400× slower),
/// so a larger count is capped, with a note.
fn capped_threads(asked: usize) -> usize {
    let hardware = fastmm::system::available_threads();
    if asked > hardware {
        eprintln!("note: --threads {asked} is more than the {hardware} hardware threads; using {hardware}");
        hardware
    } else {
        asked
    }
}

/// `auto` or a value that parses.
fn auto_or<T: std::str::FromStr<Err = fastmm::Error>>(text: &str) -> Result<Option<T>> {
    match text.trim() {
        auto if auto.eq_ignore_ascii_case("auto") => Ok(None),
        value => Ok(Some(
            value
                .parse::<T>()
                .map_err(|e| anyhow::anyhow!("{e}, or auto"))?,
        )),
    }
}

impl AlgoArgs {
    /// The options these arguments give, for `auto` (each target sets
    /// its algorithm).
    pub fn options(&self) -> Result<GemmOptions> {
        let opts = GemmOptions {
            threads: self.threads.map(capped_threads),
            tile: self.tile,
            accuracy: self.accuracy.parse::<Accuracy>()?,
            cpu: CpuOptions {
                parallel_from: self.parallel_from,
                kernel: self
                    .cpu_kernel
                    .as_deref()
                    .map(str::parse::<CpuKernel>)
                    .transpose()?,
                block_sizes: match self.blocks.as_deref().map(str::trim) {
                    None | Some("default") => None,
                    Some(text) => Some(BlockSizes::parse(text)?),
                },
            },
            fast: FastOptions {
                variant: auto_or::<Variant>(&self.variant)?,
                threshold: match self.threshold.trim() {
                    auto if auto.eq_ignore_ascii_case("auto") => None,
                    text => Some(text.parse::<usize>().map_err(|_| {
                        anyhow::anyhow!("--threshold '{text}' is neither a size nor 'auto'")
                    })?),
                },
                // The first level's size is a plan's to pin.
                start: None,
                depth: self.depth,
                lazy_sums: self.lazy_sums,
                sum_stores: auto_or::<SumStores>(&self.sum_stores)?,
                base: self
                    .base
                    .as_deref()
                    .map(str::parse::<Algorithm>)
                    .transpose()?,
            },
            gpu: GpuOptions {
                memory: Some(self.gpu_memory.parse::<GpuMemory>()?),
                pinned: self.pinned,
                max_memory: self
                    .max_gpu_memory
                    .as_deref()
                    .map(parse_bytes)
                    .transpose()?,
                out_of_core: self.out_of_core,
                precision: Some(self.precision.parse::<GpuPrecision>()?),
                kernel: self
                    .cuda_kernel
                    .as_deref()
                    .map(str::parse::<CudaKernel>)
                    .transpose()?,
            },
            ..GemmOptions::default()
        };
        opts.validate()?;
        Ok(opts)
    }

    /// Where the algorithms without a device of their own run.
    pub fn placement(&self) -> Result<Placement> {
        match self.device.trim() {
            auto if auto.eq_ignore_ascii_case("auto") => Ok(Placement::AUTO),
            text => Placement::on(text),
        }
    }

    /// The targets of an `--algo` list under these arguments' device.
    pub fn targets(&self, algo: &str) -> Result<Vec<Target>> {
        Target::parse_list(algo, self.placement()?)
    }
}

/// The devices `--device` or `@` name: one device, or several GPUs that
/// run each product together (`cuda:0,1`, `cuda:all`), as a set (GPU
/// ordinals below 64) so that targets stay `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSet {
    /// Every GPU of the host.
    all: bool,
    /// The CPU (alone: it joins no GPU).
    cpu: bool,
    /// Bit i: GPU i.
    mask: u64,
}

impl DeviceSet {
    /// The set of a device list.
    pub fn of(list: &DeviceList) -> Result<DeviceSet> {
        let mut set = DeviceSet {
            all: false,
            cpu: false,
            mask: 0,
        };
        match list {
            DeviceList::AllGpus => set.all = true,
            DeviceList::Listed(devices) => {
                for device in devices {
                    match device {
                        Device::Cuda(ordinal) if *ordinal < 64 => set.mask |= 1 << ordinal,
                        Device::Cuda(ordinal) => bail!("GPU ordinal {ordinal} is above 63"),
                        Device::Cpu if devices.len() == 1 => set.cpu = true,
                        Device::Cpu => bail!("a team is GPUs: cpu cannot join one"),
                    }
                }
            }
        }
        Ok(set)
    }

    /// The list it stands for.
    pub fn list(self) -> DeviceList {
        if self.all {
            return DeviceList::AllGpus;
        }
        if self.cpu {
            return DeviceList::Listed(vec![Device::Cpu]);
        }
        DeviceList::Listed(
            (0..64)
                .filter(|i| self.mask >> i & 1 == 1)
                .map(Device::Cuda)
                .collect(),
        )
    }

    /// Whether several devices run each product together.
    pub fn is_team(self) -> bool {
        self.all || self.mask.count_ones() > 1
    }

    /// The device that stands for it where one is needed (its kind, `@`).
    fn first(self) -> Device {
        match (self.cpu, self.all) {
            (true, _) => Device::Cpu,
            (_, true) => Device::Cuda(0),
            _ => Device::Cuda(self.mask.trailing_zeros() as usize),
        }
    }
}

/// Where an algorithm named without a device runs: on the devices named,
/// or (`auto`, none named) on the CPU where it runs there, else on GPU 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement(Option<DeviceSet>);

impl Placement {
    /// `--device auto`.
    pub const AUTO: Placement = Placement(None);

    /// On the devices of `text` (`cpu`, `cuda:1`, `cuda:0,1`, `cuda:all`).
    pub fn on(text: &str) -> Result<Placement> {
        Ok(Placement(Some(DeviceSet::of(
            &text.parse::<DeviceList>()?,
        )?)))
    }

    /// The device `algorithm` runs on (a team's first GPU for a team).
    pub fn device_for(self, algorithm: Algorithm) -> Device {
        self.0.map_or_else(|| home(algorithm), DeviceSet::first)
    }

    /// The team, if it is one.
    fn team(self) -> Option<DeviceSet> {
        self.0.filter(|set| set.is_team())
    }

    /// The kind of device `all` expands over.
    fn kind(self) -> DeviceKind {
        self.0.map_or(DeviceKind::Cpu, |set| set.first().kind())
    }
}

/// Where `auto` runs an algorithm: the CPU where it runs there, else GPU 0.
fn home(algorithm: Algorithm) -> Device {
    if algorithm.runs_on(DeviceKind::Cpu) {
        Device::Cpu
    } else {
        Device::Cuda(0)
    }
}

/// One algorithm on one device or a team: a row of `run`, a series of
/// `bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub algorithm: Algorithm,
    pub device: Device,
    /// The GPUs that run it together (`device` is the first of them).
    pub team: Option<DeviceSet>,
}

impl Target {
    /// Its name in tables: the algorithm's, with `@device` where that is
    /// not where `auto` would run it.
    pub fn label(&self) -> String {
        if let Some(team) = self.team {
            return format!("{}@{}", self.algorithm, team.list());
        }
        if self.device == home(self.algorithm) {
            self.algorithm.to_string()
        } else {
            format!("{}@{}", self.algorithm, self.device)
        }
    }

    /// The devices that run it: its one device, or its team's.
    pub fn list(&self) -> DeviceList {
        match self.team {
            Some(team) => team.list(),
            None => DeviceList::Listed(vec![self.device]),
        }
    }

    /// Parses `NAME` (placed by `placement`) or `NAME@DEVICE`; the
    /// algorithm must run on that device's kind.
    pub fn parse(text: &str, placement: Placement) -> Result<Target> {
        let (algorithm, placement) = match text.split_once('@') {
            Some((name, device)) => (name.parse::<Algorithm>()?, Placement::on(device)?),
            None => (text.parse::<Algorithm>()?, placement),
        };
        let device = placement.device_for(algorithm);
        if !algorithm.runs_on(device.kind()) {
            let kinds: Vec<String> = algorithm.device_kinds().map(|k| k.to_string()).collect();
            bail!(
                "{algorithm} does not run on {device} (it runs on {}); choose --device or write {algorithm}@DEVICE",
                kinds.join(" and ")
            );
        }
        Ok(Target {
            algorithm,
            device,
            team: placement.team(),
        })
    }

    /// Parses a comma list of targets, keeping order; `all` stands for
    /// every algorithm on the placement's device kind.
    pub fn parse_list(list: &str, placement: Placement) -> Result<Vec<Target>> {
        let mut out: Vec<Target> = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let targets = if item.eq_ignore_ascii_case("all") {
                Algorithm::all_on(placement.kind())
                    .map(|algorithm| Target {
                        algorithm,
                        device: placement.device_for(algorithm),
                        team: placement.team(),
                    })
                    .collect()
            } else {
                vec![Target::parse(item, placement)?]
            };
            for target in targets {
                if !out.contains(&target) {
                    out.push(target);
                }
            }
        }
        if out.is_empty() {
            bail!("'{list}' names no algorithm");
        }
        Ok(out)
    }
}

/// The machines a command has opened, each once, on first use: one per
/// device or team its targets name, or, for an MPI job, the job's ranks,
/// which run every target.
#[derive(Default)]
pub struct Devices {
    /// Keyed by the device list a target names.
    opened: Vec<(String, Machine)>,
    /// An MPI job's ranks: every target runs on them.
    ranks: Option<Machine>,
}

impl Devices {
    /// Every target on `machine` (an MPI job's ranks).
    #[cfg(feature = "mpi")]
    pub fn all_on(machine: Machine) -> Devices {
        Devices {
            opened: Vec::new(),
            ranks: Some(machine),
        }
    }

    /// The machine that runs `target`, opened the first time it is asked
    /// for, and the target's name in tables there.
    pub fn machine(&mut self, target: &Target) -> Result<(Machine, String)> {
        if let Some(ranks) = &self.ranks {
            return Ok((
                ranks.clone(),
                format!("{}@{}", target.algorithm, ranks.name()),
            ));
        }
        let list = target.list();
        let key = list.to_string();
        let machine = match self.opened.iter().find(|(k, _)| *k == key) {
            Some((_, machine)) => machine.clone(),
            None => {
                let machine =
                    Machine::open_list(&list).with_context(|| format!("cannot open {list}"))?;
                self.opened.push((key, machine.clone()));
                machine
            }
        };
        Ok((machine, target.label()))
    }

    /// Whether this process receives the products' results (not the
    /// ranks of an MPI job other than 0).
    pub fn holds_results(&self) -> bool {
        self.ranks.as_ref().is_none_or(Machine::holds_results)
    }

    /// The GPUs opened so far, each once.
    pub fn gpus(&self) -> Vec<&Context> {
        let mut gpus: Vec<&Context> = Vec::new();
        for gpu in self.opened.iter().flat_map(|(_, m)| m.gpus()) {
            if gpus.iter().all(|g| g.device() != gpu.device()) {
                gpus.push(gpu);
            }
        }
        gpus
    }
}

/// A rank's failure, `fastmm: rank R of P failed: …`, on stderr in one
/// write: the ranks of a job share the terminal or pipe, and a line
/// written in pieces interleaves with theirs.
#[cfg(feature = "mpi")]
pub fn rank_failed(rank: usize, size: usize, e: &dyn std::fmt::Display) {
    use std::io::Write as _;
    let line = format!("fastmm: rank {rank} of {size} failed: {e}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Bytes from "4096", "512K", "64M", "8G" or "1T" (powers of 1024; a
/// trailing "B" or "iB" is allowed).
pub fn parse_bytes(text: &str) -> Result<u64> {
    let t = text
        .trim()
        .trim_end_matches(['B', 'b'])
        .trim_end_matches('i');
    let (number, scale) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let power = match c.to_ascii_uppercase() {
                'K' => 1,
                'M' => 2,
                'G' => 3,
                'T' => 4,
                _ => bail!("'{text}' is not a size (e.g. 512M, 8G)"),
            };
            (&t[..i], 1024f64.powi(power))
        }
        _ => (t, 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .with_context(|| format!("'{text}' is not a size (e.g. 512M, 8G)"))?;
    if value.is_nan() || value <= 0.0 {
        bail!("'{text}' is not a positive size");
    }
    Ok((value * scale) as u64)
}

/// Element types from a comma list, or `all`.
pub fn parse_dtypes(list: &str) -> Result<Vec<DType>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        if name.eq_ignore_ascii_case("all") {
            out.extend(DType::ALL);
        } else {
            out.push(name.parse()?);
        }
    }
    Ok(out)
}

/// An element type `run` multiplies: a real one, or a complex one with
/// parts of a float type (c64: f32, c128: f64).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunType {
    Real(DType),
    Complex(DType),
}

/// `--dtype`'s list: the real types (`all` is the four) and c64, c128.
pub fn parse_types(list: &str) -> Result<Vec<RunType>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        match name.to_ascii_lowercase().as_str() {
            "c64" | "complex64" => out.push(RunType::Complex(DType::F32)),
            "c128" | "complex128" => out.push(RunType::Complex(DType::F64)),
            real => match parse_dtypes(real) {
                Ok(types) => out.extend(types.into_iter().map(RunType::Real)),
                // The library's own message names the real types only.
                Err(_) => anyhow::bail!(
                    "unknown dtype '{name}' (expected one of: f32, f64, i32, i64, c64, c128, all)"
                ),
            },
        }
    }
    Ok(out)
}

/// Refuses, before allocating anything, a problem whose matrices of
/// `parts` planes (2 for complex) plus the verification's O(m + k + n)
/// vectors would not fit in available memory.
pub fn check_memory(shape: (usize, usize, usize), dtype: DType, parts: u128) -> Result<()> {
    let problem = fastmm::Problem::new(shape, dtype);
    let (m, k, n) = (shape.0 as u128, shape.1 as u128, shape.2 as u128);
    let elements = m * k + k * n + m * n;
    let verification = (m + k + n) * 8 * 4;
    let needed = parts * elements * dtype.size_bytes() as u128 + verification;
    let fits_address_space = usize::try_from(elements).is_ok();
    match available_memory_bytes() {
        Some(available) if needed > available as u128 => bail!(
            "{problem} needs {} for A, B, C and verification, but only {} of memory is available",
            format_bytes(needed),
            format_bytes(available as u128)
        ),
        _ if !fits_address_space => bail!(
            "{problem} needs {}, more than this machine can address",
            format_bytes(needed)
        ),
        _ => Ok(()),
    }
}

/// The median of sorted values.
pub fn median(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Milliseconds with about four significant digits, so microsecond runs
/// do not print as 0.000.
pub fn format_ms(ms: f64) -> String {
    match ms {
        ms if ms >= 100.0 => format!("{ms:.1}"),
        ms if ms >= 1.0 => format!("{ms:.3}"),
        ms => format!("{ms:.5}"),
    }
}

/// 1, 2, 4, … below the hardware threads, and the hardware threads.
pub fn thread_counts() -> Vec<usize> {
    let all = fastmm::system::available_threads();
    let mut counts: Vec<usize> = std::iter::successors(Some(1), |t| Some(t * 2))
        .take_while(|&t| t < all)
        .collect();
    counts.push(all);
    counts
}

/// The machine, for captions: the CPU and every GPU a command opened.
pub fn machine_line<'a>(gpus: impl IntoIterator<Item = &'a Context>) -> String {
    let mut line = Context::cpu().describe();
    for gpu in gpus {
        line += &format!("; {}", gpu.describe());
    }
    line
}

/// Writes a report to stdout in one go; a reader that stops early
/// (`fastmm info | head`) is not an error.
pub fn write_stdout(text: &str) -> Result<()> {
    use std::io::Write as _;
    match std::io::stdout().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// The time now in UTC as "YYYY-MM-DD HH:MM UTC", for reports.
pub fn utc_now() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_lists_take_complex_types_and_an_unknown_name_lists_them_all() {
        let types = parse_types("f32,c128,all").unwrap();
        assert_eq!(
            types[..2],
            [RunType::Real(DType::F32), RunType::Complex(DType::F64)]
        );
        assert_eq!(types.len(), 2 + DType::ALL.len());
        let err = parse_types("f32,c32").unwrap_err().to_string();
        assert!(err.contains("'c32'") && err.contains("c64, c128"), "{err}");
    }

    #[test]
    fn targets_run_where_asked_or_where_auto_puts_them() {
        let auto = Placement::AUTO;
        let list = Target::parse_list("naive,cublas,strassen@cuda:1", auto).unwrap();
        let labels: Vec<String> = list.iter().map(Target::label).collect();
        assert_eq!(labels, ["naive", "cublas", "strassen@cuda:1"]);
        assert_eq!(list[1].device, Device::Cuda(0));
        let on_gpu = Placement::on("cuda:0").unwrap();
        let gpu = Target::parse_list("strassen,cuda-fast", on_gpu).unwrap();
        assert_eq!(gpu[0].label(), "strassen@cuda:0");
        assert_eq!(gpu[1].label(), "cuda-fast");
        let err = Target::parse_list("packed", on_gpu)
            .unwrap_err()
            .to_string();
        assert!(err.contains("packed does not run on cuda:0"), "{err}");
        let all = Target::parse_list("all", auto).unwrap();
        assert!(all.iter().all(|t| t.device == Device::Cpu));
        assert_eq!(Target::parse_list("all", on_gpu).unwrap().len(), 7);
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("1.5K").unwrap(), 1536);
        assert_eq!(parse_bytes("8GiB").unwrap(), 8 << 30);
        for bad in ["", "-1G", "lots", "3Q"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }
}
