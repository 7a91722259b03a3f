//! `fastmm`: run, verify and time matrix products from the shell.

mod bench;
mod info;
mod multiply;
mod run;
mod selftest;
mod tune;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Fast, verified dense matrix multiplication C = A·B.
#[derive(Parser)]
#[command(name = "fastmm", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Multiply random matrices with one or more algorithms, verify every
    /// result and print timings.
    Run(Box<run::RunArgs>),
    /// Run every algorithm of a device over the shape matrix (outputs
    /// poisoned first) and check each result; exits non-zero on a failure.
    Selftest(selftest::SelftestArgs),
    /// Sweep sizes × algorithms × dtypes × thread counts, each point
    /// measured and verified; a Markdown table, and CSV/JSON with --out.
    Bench(Box<bench::BenchArgs>),
    /// Show the CPU, its caches and kernels, the block sizes and `auto`
    /// rules in use, the tuning file, and the GPU (or what is missing).
    Info(info::InfoArgs),
    /// Multiply the matrices in two files (.npy, .mtx, .csv, .tsv, raw)
    /// and write C to a third; --check verifies it first.
    Multiply(Box<multiply::MultiplyArgs>),
    /// Search block sizes, tiles, thread counts and Strassen thresholds
    /// for this machine and save them where `auto` reads them.
    Tune(tune::TuneArgs),
}

/// Writes a report to stdout in one go; a reader that stops early
/// (`fastmm info | head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// The time now in UTC as "YYYY-MM-DD HH:MM UTC", for reports.
fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
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

/// Exit status for input the tool cannot use.
const EXIT_BAD_INPUT: u8 = 2;
/// Exit status when a computed product fails verification.
const EXIT_WRONG_RESULT: u8 = 1;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: print them as clap formats them.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let first = rendered
                .lines()
                .next()
                .unwrap_or("error: invalid arguments");
            eprintln!("{first} (see 'fastmm --help')");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    // A tuning file that cannot be read would silently change nothing:
    // the commands that measure refuse it; `info` shows it, `tune`
    // replaces it.
    if let fastmm::tuning::TuningState::Invalid(e) = &fastmm::tuning::source().state {
        if !matches!(cli.command, Command::Info(_) | Command::Tune(_)) {
            eprintln!(
                "error: {e} (fix or delete it, or set {}=off)",
                fastmm::tuning::TUNING_ENV
            );
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    let outcome = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Info(args) => info::run(&args).map(|()| run::Outcome::AllCorrect),
        Command::Tune(args) => tune::run(&args),
        Command::Multiply(args) => multiply::run(&args),
        Command::Selftest(args) => match selftest::run(&args) {
            Ok(true) => Ok(run::Outcome::AllCorrect),
            Ok(false) => Ok(run::Outcome::Failures(1)),
            Err(e) => Err(e),
        },
    };
    match outcome {
        Ok(run::Outcome::AllCorrect) => ExitCode::SUCCESS,
        Ok(run::Outcome::Failures(n)) => {
            eprintln!("error: {n} result(s) failed verification");
            ExitCode::from(EXIT_WRONG_RESULT)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}
