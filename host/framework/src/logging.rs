//! Log set-up shared by both binaries (`dragon`, `dragon-scheduler`).

/// Logs to stderr, filtered by `$DRAGON_LOG` (else `default`), with colour
/// codes only when stderr is a terminal (a file or a pipe gets plain text).
pub fn init(default: &str) {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DRAGON_LOG")
                .unwrap_or_else(|_| default.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
