//! `fastmm selftest`: the library's self-test of a device (every algorithm
//! over the shape matrix, outputs poisoned first, each result checked; on
//! a GPU also the memory kinds, round trips and schedules), printed as a
//! table. This is how GPU correctness is proven on a GPU machine.

use anyhow::{Context as _, Result};
use clap::Args;
use fastmm::selftest::Check;
use fastmm::{Algorithm, Context, Device, DeviceList, Team};

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// cpu, cuda, cuda:N, all (the CPU and GPU 0), or several GPUs as one
    /// team: cuda:0,1,… or cuda:all (every product distributed over them).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Only these algorithms (comma list, e.g. `emulated,cublas`); the
    /// checks of no one algorithm (round trips, schedules, out of core, a
    /// team's distributed operands) run only without it.
    #[arg(long)]
    algo: Option<String>,
}

/// A printer of the table's rows, each as its check completes (a GPU's
/// self-test takes minutes), with the seconds it took.
fn row_printer() -> impl FnMut(&Check) {
    let mut last = std::time::Instant::now();
    move |row| {
        print_row(row, last.elapsed().as_secs_f64());
        last = std::time::Instant::now();
    }
}

fn print_row(row: &Check, seconds: f64) {
    use std::io::Write as _;
    println!(
        "{:<52} {:>6} {:>6}  {:<7} {seconds:>7.1}",
        row.what,
        row.passed,
        row.failures.len(),
        if row.ok() { "ok" } else { "FAIL" }
    );
    for failure in &row.failures {
        println!("    {failure}");
    }
    let _ = std::io::stdout().flush();
}

fn print_header() {
    println!(
        "{:<52} {:>6} {:>6}  {:<7} {:>7}",
        "check", "passed", "failed", "verdict", "seconds"
    );
}

pub fn run(args: &SelftestArgs) -> Result<bool> {
    let mut rows: Vec<Check> = Vec::new();
    let devices: Vec<Device> = match args.device.trim() {
        all if all.eq_ignore_ascii_case("all") => vec![Device::Cpu, Device::Cuda(0)],
        text => match text.parse::<DeviceList>()? {
            list if list.is_team() => {
                let team = Team::open_list(&list).with_context(|| format!("cannot open {list}"))?;
                println!("{}", team.describe());
                let only = match &args.algo {
                    Some(list) => Some(Algorithm::parse_list(list, team.devices()[0].kind())?),
                    None => None,
                };
                print_header();
                rows.extend(fastmm::selftest::run_team_reporting(
                    &team,
                    only.as_deref(),
                    &mut row_printer(),
                )?);
                vec![]
            }
            _ => vec![text.parse::<Device>()?],
        },
    };
    for device in devices {
        let ctx = Context::open(device).with_context(|| format!("cannot open {device}"))?;
        println!("{}", ctx.describe());
        let only = match &args.algo {
            Some(list) => Some(Algorithm::parse_list(list, device.kind())?),
            None => None,
        };
        print_header();
        rows.extend(fastmm::selftest::run_reporting(
            &ctx,
            only.as_deref(),
            &mut row_printer(),
        )?);
    }
    let all_ok = rows.iter().all(Check::ok);
    println!(
        "selftest: {} checks, {}",
        rows.iter()
            .map(|r| r.passed + r.failures.len())
            .sum::<usize>(),
        if all_ok { "all passed" } else { "FAILURES" }
    );
    Ok(all_ok)
}
