//! `fastmm demo`: fastmm's point in seconds, honestly. The seeds' CPU
//! ladder at 512 (every algorithm, where Strassen and Winograd apply no
//! level and say so), then `packed` against Strassen and Winograd at 4096,
//! where they do; every product verified.

use anyhow::Result;
use clap::Args;

use crate::common::{Devices, Outcome};
use crate::measurement::print_table;
use crate::run::{measure, RunArgs};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// The larger problem's size, where Strassen and Winograd recurse.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    large: usize,
}

pub fn run(args: &DemoArgs) -> Result<Outcome> {
    let large = args.large.to_string();
    let problems = [
        RunArgs::from_argv(&["--size", "512"])?,
        RunArgs::from_argv(&["--size", &large, "--algo", "packed,strassen,winograd"])?,
    ];
    let mut devices = Devices::default();
    let mut failures = 0;
    for (i, problem) in problems.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let (shape, records) = measure(problem, &mut devices)?;
        print_table(&problem.inputs(), shape, &records, &devices);
        failures += records.iter().filter(|r| !r.ok).count();
    }
    Ok(Outcome::of_failures(failures))
}
