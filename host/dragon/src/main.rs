use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    dragon_host::cli::init_logging("warn");
    match dragon_host::cli::Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            match e.downcast_ref::<dragon_host::cli::HookCallsFailed>() {
                Some(_) => ExitCode::from(dragon_host::cli::HookCallsFailed::EXIT_CODE),
                None => ExitCode::FAILURE,
            }
        }
    }
}
