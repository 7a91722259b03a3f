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
                rows.extend(fastmm::selftest::run_team_selected(&team, only.as_deref())?);
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
        rows.extend(fastmm::selftest::run_selected(&ctx, only.as_deref())?);
    }
    println!("{:<52} {:>6} {:>6}  verdict", "check", "passed", "failed");
    for row in &rows {
        println!(
            "{:<52} {:>6} {:>6}  {}",
            row.what,
            row.passed,
            row.failures.len(),
            if row.ok() { "ok" } else { "FAIL" }
        );
        for failure in &row.failures {
            println!("    {failure}");
        }
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
