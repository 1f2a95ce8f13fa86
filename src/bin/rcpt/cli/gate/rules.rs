//! `rcpt gate rules`: evaluate a rules module against an input, exactly as
//! the gate does (spec/gate.md "Rules"); and, hidden, the confined
//! evaluator process the gate starts (`--evaluator`).

use super::RulesArgs;
use crate::cli::{EXIT_NOT_EVALUATED, EXIT_OK, UsageError, read_input};
use anyhow::Context as _;
use rcpt::gate::rules::{self, Evaluator, Rules, RulesError};
use rcpt::io::Source;
use std::io::Write as _;

/// The evaluator the gate starts: this very program, `gate rules --evaluator`.
pub(super) fn evaluator() -> anyhow::Result<Evaluator> {
    let exe = std::env::current_exe().context("finding this program (to run the rules)")?;
    Ok(Evaluator::new(
        exe,
        vec!["gate".into(), "rules".into(), "--evaluator".into()],
    ))
}

pub(super) fn run(args: &RulesArgs) -> anyhow::Result<u8> {
    if args.evaluator {
        return serve();
    }
    let (Some(module), Some(input)) = (&args.rules, &args.input) else {
        let msg = "give the module and its input: rcpt gate rules RULES.rego --input INPUT.json";
        return Err(UsageError(msg.into()).into());
    };
    let rules = Rules::load(module, evaluator()?).map_err(usage_if_refused)?;
    let bytes = read_input(input, rules::MAX_RULES_REQUEST_BYTES, "input")?;
    let input = rcpt::receipt::canonical::json::from_json(&bytes)
        .map_err(|e| crate::cli::usage(format!("the input {}", display(&args.input)), e))?;
    let outcome = rules.evaluate(&input).map_err(usage_if_refused)?;
    let doc = serde_json::json!({"deny": outcome.deny, "escalate": outcome.escalate});
    writeln!(std::io::stdout().lock(), "{doc}")?;
    Ok(EXIT_OK)
}

fn display(source: &Option<Source>) -> String {
    source.as_ref().map(ToString::to_string).unwrap_or_default()
}

/// A refused module is a bad invocation (exit 2); anything else is no
/// result (exit 3, by the caller's mapping of [`RulesError`]).
fn usage_if_refused(e: RulesError) -> anyhow::Error {
    if e.is_refused() {
        UsageError(format!("{:#}", anyhow::Error::new(e))).into()
    } else {
        anyhow::Error::new(rcpt::gate::GateError::Rules(e))
    }
}

/// The evaluator process: confine this process, read its module and its
/// input on standard input, write the answer on standard output.
fn serve() -> anyhow::Result<u8> {
    if let Err(e) = rules::sandbox::confine() {
        eprintln!("rcpt: the rules evaluator cannot limit itself: {e}");
        return Ok(EXIT_NOT_EVALUATED);
    }
    rules::sandbox::serve(std::io::stdin().lock(), &mut std::io::stdout().lock())
        .context("answering the gate")?;
    Ok(EXIT_OK)
}
