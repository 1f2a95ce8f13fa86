//! `rcpt log mirror`: copy a served log's public files, checked, into a directory or s3://.

use super::serve::*;
use crate::cli::{EXIT_OK, UsageError};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Example:
  rcpt log mirror http://log.example/ mirror/ --log-key-file log.vkey && rcpt log check mirror/
  rcpt log mirror http://log.example/ s3://bucket/mirror --endpoint http://127.0.0.1:9000 --log-key-file log.vkey")]
pub struct MirrorArgs {
    /// The log's URL (http://HOST[:PORT][/PREFIX]).
    url: String,
    /// The mirror: a directory (created), or s3://BUCKET/PREFIX in object
    /// storage; later runs bring it up to date.
    dir: PathBuf,
    /// For a mirror at s3://BUCKET/PREFIX: the S3 endpoint, http://HOST:PORT
    /// (default: $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL); credentials
    /// and region from the AWS_* variables, as for the log commands.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// The log's verifier key as text (NAME+HASH+KEY; never read as a file name).
    #[arg(
        long,
        value_name = "VKEY",
        required_unless_present = "log_key_file",
        conflicts_with = "log_key_file"
    )]
    log_key: Option<String>,
    /// A file holding the log's verifier key.
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
}

pub fn mirror(args: MirrorArgs) -> anyhow::Result<u8> {
    let key = parse_log_key(args.log_key.as_deref(), args.log_key_file.as_deref())?;
    let client =
        rcpt::net::client::Client::new(&args.url).map_err(|e| UsageError(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = if args.dir.to_str().is_some_and(|d| d.starts_with("s3://")) {
        // Object storage: fetched files are staged in a local temporary
        // directory (spec/storage.md "Mirroring into object storage").
        let store = super::store::store_at(
            &args.dir,
            args.endpoint.as_deref(),
            super::args::READ_LEASE_TTL,
        )?;
        // Never resumed: a new private directory each run (removed below).
        let stage =
            rcpt::io::create_temp_dir(&std::env::temp_dir(), "rcpt-mirror").map_err(|e| {
                anyhow::anyhow!(
                    "cannot make a staging directory in {}: {e}",
                    std::env::temp_dir().display()
                )
            })?;
        // `store` outlives the runtime's work: its client's own runtime is
        // dropped here, outside `block_on`.
        let mirrored = runtime.block_on(rcpt::net::client::mirror::mirror_into(
            &client, &store, &stage, &key,
        ));
        // The runtime first: a failed fetch leaves its siblings' blocking
        // writes running, and dropping the runtime waits for them, so
        // nothing is written into the stage after it is removed.
        drop(runtime);
        let _ = rcpt::io::remove_tree_at(&stage);
        mirrored?
    } else {
        if args.endpoint.is_some() {
            return Err(UsageError(format!(
                "--endpoint is for a mirror at s3://BUCKET/PREFIX, not the directory {}",
                args.dir.display()
            ))
            .into());
        }
        runtime.block_on(rcpt::net::client::mirror::mirror(&client, &args.dir, &key))?
    };
    use base64::Engine;
    let root = base64::engine::general_purpose::STANDARD.encode(report.root);
    use crate::cli::units::count;
    if report.new_size == report.old_size {
        println!(
            "up to date: {}, root {root}",
            count(report.new_size, "entry", "entries")
        );
    } else {
        println!(
            "mirrored {} (was {}), fetched {}, root {root}",
            count(report.new_size, "entry", "entries"),
            report.old_size,
            count(report.fetched as u64, "file", "files")
        );
    }
    Ok(EXIT_OK)
}
