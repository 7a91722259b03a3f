//! `fastmm`: run, verify and time matrix products from the shell.

mod accuracy;
mod bench;
mod common;
mod demo;
mod exec;
mod info;
mod interrupt;
mod measurement;
mod multiply;
mod run;
mod selftest;
mod tune;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use common::Outcome;

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
    /// fastmm's point in seconds: the CPU ladder at 512, then packed
    /// against Strassen and Winograd at 4096, every product verified.
    Demo(demo::DemoArgs),
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
    /// The accuracy audit: products × levels × input classes on one
    /// device, each product's errors against the exact product beside
    /// the native product's; exits non-zero where a level is not met.
    Accuracy(Box<accuracy::AccuracyArgs>),
    /// Search block sizes, tiles, thread counts and Strassen thresholds
    /// for this machine and save them where `auto` reads them.
    Tune(tune::TuneArgs),
    /// Run an unchanged program with libfastmm_blas preloaded, so that its
    /// BLAS matrix products (numpy's `a @ b`, `dgemm_`) run on fastmm.
    Exec(exec::ExecArgs),
}

/// One line from clap's rendering of a usage error: its message, with the
/// arguments it names (those clap lists on the following lines, such as
/// the missing required ones), and where to read more.
fn usage_error(rendered: &str) -> String {
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|line| !line.is_empty())
        .collect();
    let text = match message.split_first() {
        Some((first, rest)) if !rest.is_empty() => format!("{first} {}", rest.join(", ")),
        Some((first, _)) => first.to_string(),
        None => "error: invalid arguments".to_string(),
    };
    format!("{text} (see 'fastmm --help')")
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
            eprintln!("{}", usage_error(&e.render().to_string()));
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    // A tuning file that cannot be read would silently change nothing:
    // the commands that measure refuse it; `info` shows it, `tune`
    // replaces it.
    let config = fastmm::config::Config::get();
    if let fastmm::config::TuningState::Invalid(e) = config.tuning() {
        if !matches!(cli.command, Command::Info(_) | Command::Tune(_)) {
            eprintln!(
                "error: {e} (fix or delete it, or set {}=off)",
                fastmm::config::TUNING_ENV
            );
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    for ignored in config.ignored() {
        eprintln!("note: ignoring {ignored}");
    }
    interrupt::install();
    let outcome = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Info(args) => info::run(&args).map(|()| Outcome::AllCorrect),
        Command::Tune(args) => tune::run(&args),
        Command::Accuracy(args) => accuracy::run(&args),
        Command::Multiply(args) => multiply::run(&args),
        Command::Exec(args) => exec::run(&args),
        Command::Selftest(args) => match selftest::run(&args) {
            Ok(true) => Ok(Outcome::AllCorrect),
            Ok(false) => Ok(Outcome::Failures(1)),
            Err(e) => Err(e),
        },
    };
    match outcome {
        Ok(Outcome::AllCorrect) => ExitCode::SUCCESS,
        Ok(Outcome::Failures(n)) => {
            eprintln!("error: {n} result(s) failed verification");
            ExitCode::from(EXIT_WRONG_RESULT)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_name_the_missing_arguments() {
        let rendered = "error: the following required arguments were not provided:\n  --output <C>\n\nUsage: fastmm multiply --output <C> <A> <B>\n";
        assert_eq!(
            usage_error(rendered),
            "error: the following required arguments were not provided: --output <C> (see 'fastmm --help')"
        );
        assert_eq!(
            usage_error("error: unexpected argument '--sise' found\n\nUsage: x\n"),
            "error: unexpected argument '--sise' found (see 'fastmm --help')"
        );
    }
}
