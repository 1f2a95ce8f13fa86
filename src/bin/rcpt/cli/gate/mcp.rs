//! `rcpt gate mcp`: receipts for an agent's tool calls (spec/gate-mcp.md).
//!
//! `rcpt gate mcp --policy P --key K --store DIR --root DIR -- SERVER...`
//! runs the proxy on standard streams; `rcpt gate mcp pin -- SERVER...`
//! writes the tool table from the server's list; `rcpt gate undo RECEIPT
//! --store DIR --root DIR` puts a step's files back.

use super::{IssueArgs, LogTarget, ServiceKey, UndoArgs, log_target_of, publish, verdict_line};
use crate::cli::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError, read_input, write_target};
use anyhow::Context as _;
use rcpt::gate::store::GateStore;
use rcpt::gate::{self, GateError, Signer};
use rcpt::io::Target;
use rcpt::limits::MAX_BUNDLE_BYTES;
use rcpt::log::intake::Intake;
use rcpt::mcp::contract::{Contracts, DEFAULT_MAX_AGE};
use rcpt::mcp::contracted::{Contracted, Recorded, Recording};
use rcpt::mcp::files::Root;
use rcpt::mcp::sink::{Finisher, ReceiptLog, SinkError};
use rcpt::mcp::{Gate, GateParts, Relay, RulesDecider, TableDecider, ToolPolicy};
use rcpt::receipt::dsse::Envelope;
use rcpt::text::Escaped;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `rcpt gate mcp`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct McpArgs {
    #[command(subcommand)]
    action: Option<McpAction>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand)]
enum McpAction {
    /// Write the pinned tool table from the server's tools/list, for review.
    #[command(
        after_help = "Example:\n  rcpt gate mcp pin -o tools.json -- npx @modelcontextprotocol/server-filesystem /work"
    )]
    Pin {
        /// Write the table here ('-' or nothing: standard output).
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: Option<Target>,
        /// The server: its program and arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
}

/// How the proxy runs.
#[derive(clap::Args)]
struct RunArgs {
    /// The tool-proxy policy (JSON) with its pinned tool table.
    #[arg(long, value_name = "FILE", required = true)]
    policy: Option<PathBuf>,
    /// The gate store (pre-images, evidence, receipts, pending steps); outside every root.
    #[arg(long, value_name = "DIR", required = true)]
    store: Option<PathBuf>,
    /// A directory the steps' files must lie under (repeatable).
    #[arg(long, value_name = "DIR")]
    root: Vec<PathBuf>,
    #[command(flatten)]
    key: KeyArgs,
    /// Streamable HTTP instead of stdio: listen here (a loopback address).
    #[arg(
        long,
        value_name = "127.0.0.1:PORT",
        requires = "upstream",
        conflicts_with = "command"
    )]
    listen: Option<std::net::SocketAddr>,
    /// The server's MCP endpoint (http://HOST:PORT/PATH), with --listen.
    #[arg(long, value_name = "URL", requires = "listen")]
    upstream: Option<String>,
    /// An Origin allowed besides the loopback ones (repeatable), with --listen.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "listen")]
    allow_origin: Vec<String>,
    /// Enforce the contracts of this directory (spec/gate-mcp.md "Contracts").
    #[arg(long, value_name = "DIR")]
    contracts: Option<PathBuf>,
    /// Record this session's steps as the contract NAME (written when the session ends).
    #[arg(long, value_name = "NAME", requires = "contracts")]
    record: Option<String>,
    /// With --record: seconds a read counts as fresh (default 60).
    #[arg(long = "max-age", value_name = "SECONDS", requires = "record")]
    max_age: Option<u64>,
    /// The server: its program and arguments.
    #[arg(
        last = true,
        required_unless_present = "listen",
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
struct KeyArgs {
    /// The gate's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "GATE.key", required = true)]
    key: Option<PathBuf>,
    /// The issuer name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    issuer: Option<String>,
    /// Log every receipt: a log directory, s3://BUCKET/PREFIX, or a log service URL.
    #[arg(long, value_name = "DIR|S3|URL")]
    log: Option<String>,
    #[command(flatten)]
    service: ServiceKey,
}

/// The store a `gate mcp` command uses (for the gate's recovery).
pub fn store_of(args: &McpArgs) -> Option<PathBuf> {
    args.run.store.clone()
}

pub fn run(args: McpArgs) -> anyhow::Result<u8> {
    match args.action {
        Some(McpAction::Pin { out, command }) => pin(out.as_ref(), &command),
        None => proxy(&args.run),
    }
}

fn pin(out: Option<&Target>, command: &[OsString]) -> anyhow::Result<u8> {
    let listed = rcpt::mcp::pin::list_tools(command)?;
    let table = rcpt::mcp::table::pin_table(&listed.tools);
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "rcpt gate mcp pin: {} tools ({:?} era); review each before use:",
        listed.tools.len(),
        listed.era
    )?;
    for t in &listed.tools {
        let kind = table
            .get("tools")
            .and_then(|all| all.get(&t.name))
            .and_then(|e| e.get("kind"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let why = if kind == "read" {
            "readOnlyHint true"
        } else {
            "not read-only"
        };
        writeln!(
            err,
            "  {}: {kind} ({why}, from the server: untrusted){}",
            Escaped(&t.name),
            if kind == "step" {
                "; name the files it writes as JSON Pointers in \"files\""
            } else {
                ""
            }
        )?;
    }
    drop(err);
    let text = format!("{}\n", serde_json::to_string_pretty(&table)?);
    write_target(out.unwrap_or(&Target::Stdout), text.as_bytes())?;
    Ok(EXIT_OK)
}

fn key_of(k: &KeyArgs) -> anyhow::Result<(rcpt::keys::SigningKey, String)> {
    let path = k.key.clone().context("--key is required")?;
    let pem = rcpt::keys::read_key_file(&path)
        .with_context(|| format!("reading the gate key {}", path.display()))
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let key = rcpt::keys::signing_key_from_pem(&pem)
        .map_err(|e| crate::cli::usage(format!("the gate key {}", path.display()), e))?;
    let issuer = gate::issuer_name(&path, &key, k.issuer.as_deref())
        .map_err(|e| UsageError(format!("{:#}", anyhow::Error::new(e))))?;
    Ok((key, issuer))
}

/// The roots, canonical, and the store outside every one of them.
fn roots_and_store(roots: &[PathBuf], store: &Path) -> anyhow::Result<(Vec<Root>, GateStore)> {
    let cwd = super::here()?;
    let roots = roots
        .iter()
        .map(|r| Root::new(r, &cwd).map_err(|e| crate::cli::usage(e.to_string(), e)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let store = GateStore::open(&cwd.join(store)).map_err(GateError::from)?;
    let canonical =
        std::fs::canonicalize(store.dir()).unwrap_or_else(|_| store.dir().to_path_buf());
    if let Some(r) = roots.iter().find(|r| canonical.starts_with(&r.canonical)) {
        return Err(UsageError(format!(
            "the store {} is inside the root {}: the server could rewrite the pre-images and the \
             pending steps; put it outside every --root",
            store.dir().display(),
            r.given.display()
        ))
        .into());
    }
    Ok((roots, store))
}

fn proxy(args: &RunArgs) -> anyhow::Result<u8> {
    let policy_path = args.policy.clone().context("--policy is required")?;
    let policy = ToolPolicy::read(&policy_path)
        .map_err(|e| UsageError(format!("{:#}", anyhow::Error::new(e))))?;
    let (key, issuer) = key_of(&args.key)?;
    let store_dir = args.store.clone().context("--store is required")?;
    let (roots, store) = roots_and_store(&args.root, &store_dir)?;
    let log = receipt_log(&args.key)?;
    let report = pending_report();
    let (decider, recording) = contracted(args, &policy, decider_of(&policy, &store)?)?;
    let server = policy.server.clone();
    let finisher = Finisher::start(store.clone(), log, report);
    let gate = Gate::new(GateParts {
        policy,
        roots,
        cwd: super::here()?,
        store,
        key,
        issuer,
        decider,
        finisher,
    });
    let not_evaluated = |e: &dyn std::error::Error| {
        eprintln!("rcpt: not evaluated: {}", rcpt::io::error_chain(e));
        Ok(EXIT_NOT_EVALUATED)
    };
    let gate = match gate {
        Ok(g) => g,
        Err(e) => return not_evaluated(&e),
    };
    let recovered = match gate.recover() {
        Ok(n) => n,
        Err(e) => return not_evaluated(&e),
    };
    if recovered > 0 {
        eprintln!(
            "rcpt gate mcp: finished {recovered} steps an earlier proxy of this store left pending"
        );
    }
    let relay = Relay::new(
        gate,
        Box::new(|note: &str| eprintln!("rcpt gate mcp: {}", Escaped(note))),
    );
    if let Some(listen) = args.listen {
        let served = serve_http(relay, listen, args);
        let code = recorded(args, recording.as_deref(), &server)?;
        return served.map(|c| if c == EXIT_OK { code } else { c });
    }
    let ended = rcpt::mcp::stdio::run(relay, &args.command, std::io::stdin(), std::io::stdout())
        .map_err(|e| UsageError(rcpt::io::error_chain(&e)));
    let recorded = recorded(args, recording.as_deref(), &server);
    let ended = ended?;
    let code = recorded?;
    Ok(if code != EXIT_OK {
        code
    } else if ended.by_client || ended.code == Some(0) {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// What the finisher says of a batch it could not store or log.
fn pending_report() -> rcpt::mcp::sink::Report {
    Box::new(|r: Result<usize, &SinkError>| {
        if let Err(e) = r {
            eprintln!(
                "rcpt gate mcp: receipts not yet stored or logged ({}); they stay pending and \
                 the next start finishes them",
                rcpt::io::error_chain(e)
            );
        }
    })
}

/// The policy's decider: its rules when it has any, else its table.
fn decider_of(policy: &ToolPolicy, store: &GateStore) -> anyhow::Result<BoxedDecider> {
    Ok(
        match RulesDecider::new(policy, super::rules::evaluator()?, store.clone()) {
            Some(d) => Box::new(d),
            None => Box::new(TableDecider),
        },
    )
}

type BoxedDecider = Box<dyn rcpt::mcp::Decider>;

/// The policy's decider with the contracts of `--contracts` in front, and
/// the recording of `--record`.
fn contracted(
    args: &RunArgs,
    policy: &ToolPolicy,
    decider: Box<dyn rcpt::mcp::Decider>,
) -> anyhow::Result<(BoxedDecider, Option<Arc<Recording>>)> {
    let Some(dir) = &args.contracts else {
        return Ok((decider, None));
    };
    let contracts = Contracts::open(dir)?;
    let recording = match &args.record {
        Some(name) => Some(Arc::new(Recording::start(
            &contracts,
            name,
            args.max_age.unwrap_or(DEFAULT_MAX_AGE),
        )?)),
        None => None,
    };
    let note = Box::new(|note: &str| eprintln!("rcpt gate mcp: {}", Escaped(note)));
    let wrapped = Contracted::new(decider, contracts, &policy.server, recording.clone(), note);
    Ok((Box::new(wrapped), recording))
}

/// The session ended: the recording's contract written (exit 1 when none).
fn recorded(args: &RunArgs, recording: Option<&Recording>, server: &str) -> anyhow::Result<u8> {
    let (Some(r), Some(dir)) = (recording, &args.contracts) else {
        return Ok(EXIT_OK);
    };
    let contracts = Contracts::open(dir)?;
    match r.finish(&contracts, server) {
        Ok(Recorded::Written(c)) => {
            eprintln!(
                "rcpt gate mcp: contract {} v{} written ({} calls) to {}",
                Escaped(&c.name),
                c.version,
                c.calls.len(),
                Escaped(&contracts.path(&c.name).display().to_string())
            );
            for (i, call) in c.calls.iter().enumerate() {
                eprintln!(
                    "  call {i}: {} arguments {} after {} reads",
                    Escaped(&call.tool),
                    call.arguments_digest,
                    call.reads.len()
                );
            }
            Ok(EXIT_OK)
        }
        Ok(Recorded::Cancelled) => {
            eprintln!(
                "rcpt gate mcp: the recording of {} was cancelled: nothing written",
                Escaped(r.name())
            );
            Ok(EXIT_OK)
        }
        Err(why) => {
            let why = rcpt::io::error_chain(&why);
            eprintln!("rcpt gate mcp: {}", Escaped(&why));
            Ok(EXIT_FAILED)
        }
    }
}

/// The proxy on Streamable HTTP until SIGINT or SIGTERM.
#[cfg(feature = "net")]
fn serve_http(relay: Relay, listen: std::net::SocketAddr, args: &RunArgs) -> anyhow::Result<u8> {
    if !listen.ip().is_loopback() {
        relay.close();
        return Err(UsageError(format!(
            "--listen {listen}: the proxy listens on a loopback address only"
        ))
        .into());
    }
    let upstream = args.upstream.clone().unwrap_or_default();
    if !upstream.starts_with("http://") {
        relay.close();
        return Err(UsageError(format!(
            "--upstream {upstream:?}: an http:// URL (this build has no TLS)"
        ))
        .into());
    }
    let proxy = std::sync::Arc::new(rcpt::mcp::http::HttpProxy::new(
        relay,
        upstream,
        args.allow_origin.clone(),
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| crate::cli::usage(format!("cannot listen on {listen}"), e))?;
        println!("listening on {}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let serving = tokio::spawn(std::sync::Arc::clone(&proxy).serve(listener, stopped));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        let _ = stop.send(true);
        let _ = serving.await;
        anyhow::Ok(())
    });
    proxy.relay().close();
    served.map(|()| EXIT_OK)
}

#[cfg(not(feature = "net"))]
fn serve_http(relay: Relay, _: std::net::SocketAddr, _: &RunArgs) -> anyhow::Result<u8> {
    relay.close();
    Err(UsageError("this rcpt is built without feature `net`: no Streamable HTTP".into()).into())
}

/// The log receipts go to: a directory or bucket (through its intake,
/// with the log's own key, in batches), or a service (submitted).
fn receipt_log(k: &KeyArgs) -> anyhow::Result<Option<Box<dyn ReceiptLog>>> {
    let Some(target) = log_target_of(&k.log, &k.service)? else {
        return Ok(None);
    };
    match target {
        LogTarget::Store(store) => {
            let intake = Intake::open(store, rcpt::log::intake::Options::recorded(true))?;
            Ok(Some(Box::new(intake)))
        }
        #[cfg(feature = "net")]
        service @ LogTarget::Url(..) => Ok(Some(Box::new(ServiceLog(service)))),
    }
}

/// A log service: each receipt submitted, its bundle checked against the log key.
#[cfg(feature = "net")]
struct ServiceLog(LogTarget);

#[cfg(feature = "net")]
impl ReceiptLog for ServiceLog {
    fn append(&mut self, envelopes: &[&str]) -> Result<(), SinkError> {
        for e in envelopes {
            let env = Envelope::from_json(e.as_bytes()).map_err(|e| SinkError::Remote(e.into()))?;
            publish(&self.0, &env).map_err(|e| SinkError::Remote(e.into()))?;
        }
        Ok(())
    }
}

/// Whether `gate undo` is of a tool-proxy receipt (`--root` given, or
/// the receipt says so).
pub fn is_tool_proxy_undo(args: &UndoArgs) -> bool {
    !args.root.is_empty()
        || read_envelope(args).is_ok_and(|e| {
            rcpt::receipt::receipt_from_cbor(&e.payload)
                .is_ok_and(|(r, _)| r.substrate == rcpt::receipt::Substrate::ToolProxy)
        })
}

fn read_envelope(args: &UndoArgs) -> anyhow::Result<Envelope> {
    let bytes = read_input(&args.receipt, MAX_BUNDLE_BYTES, "receipt")?;
    Ok(match rcpt::bundle::RawBundle::parse(&bytes) {
        Ok(b) => Envelope::from_json(b.envelope.get().as_bytes())?,
        Err(_) => Envelope::from_json(&bytes)
            .with_context(|| format!("{} is neither a bundle nor an envelope", args.receipt))?,
    })
}

/// `rcpt gate undo RECEIPT --store DIR --root DIR` of a tool-proxy step.
pub fn undo(args: &UndoArgs) -> anyhow::Result<u8> {
    let issue: &IssueArgs = &args.issue;
    let store = issue.store.clone().ok_or_else(|| {
        UsageError(
            "a tool-proxy receipt is undone with --store DIR (the proxy's) and --root DIR".into(),
        )
    })?;
    if args.root.is_empty() {
        return Err(UsageError(
            "a tool-proxy receipt is undone with --root DIR (the roots its files lie under)".into(),
        )
        .into());
    }
    let (roots, _) = roots_and_store(&args.root, &store)?;
    let (key, issuer) = key_of(&KeyArgs {
        key: Some(issue.key.clone()),
        issuer: issue.issuer.clone(),
        log: None,
        service: ServiceKey::default(),
    })?;
    let log = log_target_of(&issue.log, &issue.service)?;
    let envelope = read_envelope(args)?;
    let signer = Signer {
        key: &key,
        issuer: &issuer,
        now: rcpt::mcp::step::now(),
    };
    let undone = rcpt::mcp::undo::undo(&envelope, &store, &roots, &signer)?;
    let mut err = std::io::stderr().lock();
    let receipt = &undone.signed.valid;
    for t in &undone.record.files {
        let word = match t.post {
            None => "remove",
            Some(_) => "restore",
        };
        writeln!(err, "{word} /{}", Escaped(&t.path.to_string()))?;
    }
    writeln!(err, "verdict: {}", verdict_line(&receipt.receipt.verdict))?;
    writeln!(err, "receipt_id: {}", receipt.id)?;
    drop(err);
    let text = match &log {
        None => format!("{}\n", undone.signed.envelope.to_json()),
        Some(target) => publish(target, &undone.signed.envelope)
            .context("the undo's receipt was issued (it is in the store) but not logged")?,
    };
    if let Some(out) = &issue.out {
        write_target(out, text.as_bytes())?;
    }
    Ok(EXIT_OK)
}
