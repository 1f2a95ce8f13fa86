//! bounds: the named limits of a rules evaluation, and the builtins
//! refused (spec/gate.md "Rules").

use std::time::Duration;

/// Most bytes of a rules module.
pub const MAX_RULES_MODULE_BYTES: usize = 256 * 1024;
/// Most VM instructions evaluating one set (`deny`, then `escalate`).
pub const MAX_RULES_INSTRUCTIONS: usize = 20_000_000;
/// The VM's own timer, per set.
pub const RULES_TIME_LIMIT: Duration = Duration::from_secs(2);
/// The parent kills the evaluator process after this long.
pub const RULES_DEADLINE: Duration = Duration::from_secs(5);
/// CPU seconds the evaluator process may use (RLIMIT_CPU).
pub const RULES_CPU_LIMIT_S: u64 = 5;
/// Address space of the evaluator process (RLIMIT_AS).
pub const MAX_RULES_MEMORY_BYTES: u64 = 1024 * 1024 * 1024;
/// Most bytes of one request to the evaluator (the module and its input).
pub const MAX_RULES_REQUEST_BYTES: usize = 32 * 1024 * 1024;
/// Most bytes of the evaluator's answer.
pub const MAX_RULES_ANSWER_BYTES: usize = 1024 * 1024;
/// Most reasons in one set.
pub const MAX_RULE_REASONS: usize = 64;
/// Most bytes of one reason.
pub const MAX_RULE_REASON_BYTES: usize = 64;
/// Builtins regorus has without the outside-world features that are still
/// refused: they would make the result depend on something else than the
/// module and its input.
pub const REFUSED_BUILTINS: &[&str] = &[
    "rand.intn",
    "time.now_ns",
    "http.send",
    "opa.runtime",
    "uuid.rfc4122",
    "uuid.parse",
    "net.lookup_ip_addr",
];
