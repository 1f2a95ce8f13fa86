//! `rcpt verify`: offline verification of bundles. STUB (lead).

use clap::Args;

#[derive(Args)]
pub struct VerifyArgs {
    /// Bundle files.
    pub bundles: Vec<std::path::PathBuf>,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("not implemented")
}
