//! vm: one evaluation of a rules module by regorus, bounded inside this
//! process: the module's size ([`MAX_RULES_MODULE_BYTES`]), the bytecode
//! VM's instruction budget per set ([`MAX_RULES_INSTRUCTIONS`]) and its
//! execution timer ([`RULES_TIME_LIMIT`]).
//!
//! What no in-process bound covers (memory, a stack overflow, a crash in
//! the interpreter) is why the gate runs this in a confined child process
//! ([`super::sandbox`]); this file is what that child runs.

use super::bounds::{
    MAX_RULES_INSTRUCTIONS, MAX_RULES_MODULE_BYTES, REFUSED_BUILTINS, RULES_TIME_LIMIT,
};
use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
use regorus::rvm::vm::RegoVM;
use regorus::utils::limits::{ExecutionTimerConfig, PolicyLengthConfig};
use regorus::{Engine, Rc, Value};
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;

/// The module's name inside the engine (messages point into it).
const SOURCE: &str = "rules.rego";

/// The two sets, or why there are none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The members of `deny` and `escalate`, sorted, as the module gave
    /// them (the caller checks them as reasons).
    Sets {
        /// `data.rcpt.deny`.
        deny: Vec<String>,
        /// `data.rcpt.escalate`.
        escalate: Vec<String>,
    },
    /// The module is refused as written: it does not parse or compile, is
    /// not `package rcpt`, defines neither set, or calls a builtin that
    /// reaches outside the input.
    Refused(String),
    /// The module was loaded but its evaluation did not finish: an error,
    /// the instruction budget, the timer, a set that is not a set of texts.
    NotEvaluated(String),
}

/// A module parsed and compiled, ready to evaluate.
pub struct Loaded {
    program: Arc<Program>,
    names: Vec<&'static str>,
}

/// Load `module`, evaluate `deny` and `escalate` against `input_json`.
pub fn evaluate_here(module: &str, input_json: &str) -> Answer {
    match compile(module) {
        Ok(loaded) => loaded.evaluate(input_json),
        Err(refused) => refused,
    }
}

/// Parse and compile `module`, or why it is refused ([`Answer::Refused`]).
pub fn compile(module: &str) -> Result<Loaded, Answer> {
    load(module)
        .map(|(program, names)| Loaded { program, names })
        .map_err(Answer::Refused)
}

impl Loaded {
    /// Evaluate `deny` and `escalate` against `input_json`.
    pub fn evaluate(&self, input_json: &str) -> Answer {
        let input = match Value::from_json_str(input_json) {
            Ok(v) => v,
            Err(e) => return Answer::NotEvaluated(format!("the input is not JSON: {e}")),
        };
        let mut vm = RegoVM::new();
        vm.load_program(Arc::clone(&self.program));
        vm.set_max_instructions(MAX_RULES_INSTRUCTIONS);
        vm.set_execution_timer_config(Some(ExecutionTimerConfig {
            limit: RULES_TIME_LIMIT,
            check_interval: NonZeroU32::MIN.saturating_add(255),
        }));
        vm.set_input(input);
        let mut sets = [Vec::new(), Vec::new()];
        for (name, set) in ["deny", "escalate"].iter().zip(sets.iter_mut()) {
            if !self.names.iter().any(|n| n == name) {
                continue;
            }
            let value = match vm.execute_entry_point_by_name(&format!("data.rcpt.{name}")) {
                Ok(v) => v,
                Err(e) => return Answer::NotEvaluated(format!("evaluating {name}: {e}")),
            };
            match members(name, &value) {
                Ok(m) => *set = m,
                Err(why) => return Answer::NotEvaluated(format!("{name}: {why}")),
            }
        }
        let [deny, escalate] = sets;
        Answer::Sets { deny, escalate }
    }
}

/// The members of a set of texts (an undefined set is empty).
fn members(name: &str, value: &Value) -> Result<Vec<String>, String> {
    let set = match value {
        Value::Undefined => return Ok(Vec::new()),
        Value::Set(s) => s,
        other => {
            return Err(format!(
                "is {}, not a set (write `{name} contains REASON if {{ ... }}`)",
                shown(other)
            ));
        }
    };
    set.iter()
        .map(|m| match m {
            Value::String(s) => Ok(s.to_string()),
            other => Err(format!("holds {}, not a text", shown(other))),
        })
        .collect()
}

/// The start of `value` as JSON, for a message.
fn shown(value: &Value) -> String {
    value
        .to_json_str()
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect()
}

/// Parse and compile `module` to bytecode; the sets it declares.
fn load(module: &str) -> Result<(Arc<Program>, Vec<&'static str>), String> {
    let mut engine = Engine::new();
    engine.set_policy_length_config(PolicyLengthConfig {
        max_file_bytes: NonZeroUsize::new(MAX_RULES_MODULE_BYTES).unwrap_or(NonZeroUsize::MIN),
        ..PolicyLengthConfig::default()
    });
    let package = engine
        .add_policy(SOURCE.to_string(), module.to_string())
        .map_err(|e| e.to_string().trim().to_string())?;
    if package != "data.rcpt" {
        return Err(format!(
            "the module is {package}; the gate reads `package rcpt`"
        ));
    }
    let mut names = Vec::new();
    for name in ["deny", "escalate"] {
        if engine
            .has_declared_rule_rooted_at(SOURCE, name)
            .map_err(|e| e.to_string().trim().to_string())?
        {
            names.push(name);
        }
    }
    let first = names
        .first()
        .ok_or("the module defines neither `deny` nor `escalate`")?;
    let compiled = engine
        .compile_with_entrypoint(&Rc::from(format!("data.rcpt.{first}").as_str()))
        .map_err(|e| e.to_string().trim().to_string())?;
    let entries: Vec<String> = names.iter().map(|n| format!("data.rcpt.{n}")).collect();
    let entries: Vec<&str> = entries.iter().map(String::as_str).collect();
    let program = Compiler::compile_from_policy(&compiled, &entries)
        .map_err(|e| e.to_string().trim().to_string())?;
    if let Some(b) = program
        .builtin_info_table
        .iter()
        .find(|b| REFUSED_BUILTINS.contains(&b.name.as_str()))
    {
        return Err(format!(
            "the module calls {}: rules are deterministic (no randomness, no clock but \
             input.now, nothing outside the input)",
            b.name
        ));
    }
    Ok((program, names))
}
