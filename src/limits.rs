//! limits: every size and count bound `rcpt` enforces, named in one place.
//!
//! Each limit is checked before the work it guards (a parser looks at the
//! length before it decodes). Input over a limit is malformed: the verifier
//! reports it as a failure, the issuer and the log refuse it.

/// The check a parser makes first: `bytes` are at most `limit` long, or
/// the caller's error `too_large(size, limit)`.
pub fn check_size<E>(
    bytes: &[u8],
    limit: usize,
    too_large: impl FnOnce(usize, usize) -> E,
) -> Result<(), E> {
    if bytes.len() > limit {
        return Err(too_large(bytes.len(), limit));
    }
    Ok(())
}

/// Largest bundle file `rcpt verify` reads (bytes).
pub const MAX_BUNDLE_BYTES: usize = 256 * 1024;
/// Largest DSSE envelope JSON accepted anywhere (bytes).
pub const MAX_ENVELOPE_BYTES: usize = 128 * 1024;
/// Largest receipt payload (the DAG-CBOR bytes inside the envelope).
/// Chosen so that any envelope that passes fits in one log entry.
pub const MAX_PAYLOAD_BYTES: usize = 60 * 1024;
/// Largest payload JSON accepted by `rcpt receipt issue` (bytes).
pub const MAX_PAYLOAD_JSON_BYTES: usize = 256 * 1024;
/// Largest log entry: the entry bundle stores each entry behind a
/// big-endian uint16 length (C2SP tlog-tiles).
pub const MAX_ENTRY_BYTES: usize = u16::MAX as usize;
/// Most signatures on one DSSE envelope.
pub const MAX_ENVELOPE_SIGNATURES: usize = 16;
/// Most signature lines on one signed note (spec/checkpoint.md "Signed note": more is malformed).
pub const MAX_NOTE_SIGNATURES: usize = 100;
/// Largest signed note (checkpoint) text, signatures included (bytes).
pub const MAX_NOTE_BYTES: usize = 16 * 1024;
/// Most hashes in an inclusion or consistency proof: a tree of at most
/// 2^63 leaves never needs more.
pub const MAX_PROOF_HASHES: usize = 63;
/// Deepest nesting of arrays and maps in a receipt value (JSON or CBOR).
pub const MAX_VALUE_DEPTH: usize = 16;
/// Deepest nesting in any JSON document `rcpt` reads (bundles, trust files).
pub const MAX_JSON_DEPTH: usize = 32;
/// Most items in a receipt's `read_set`.
pub const MAX_READ_SET_ITEMS: usize = 4096;
/// Most reasons in a `deny` verdict.
pub const MAX_DENY_REASONS: usize = 256;
/// Longest text string in a receipt value (bytes).
pub const MAX_TEXT_BYTES: usize = 8 * 1024;
/// Largest key, verifier-key or trust file read (bytes).
pub const MAX_KEY_FILE_BYTES: usize = 64 * 1024;
/// Largest consistency-proof JSON file read by `rcpt verify --consistency`.
pub const MAX_PROOF_FILE_BYTES: usize = 64 * 1024;
/// Largest corpus manifest read by `rcpt verify --corpus`.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;
/// Largest file named in a corpus's `SHA256SUMS` (hashed as a stream, so
/// this bounds time, not memory).
pub const MAX_CORPUS_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Largest line read from `rcpt log append -` (JSON Lines on stdin).
pub const MAX_STDIN_LINE_BYTES: usize = MAX_ENVELOPE_BYTES;
/// Largest tree a log may hold (RFC 9162 proofs stay within 63 hashes).
pub const MAX_TREE_SIZE: u64 = 1 << 62;
/// Most entries in one log append batch (`rcpt log append` splits larger
/// inputs into batches of this many): memory is bounded by the batch.
pub const MAX_APPEND_BATCH_ENTRIES: usize = 100_000;
/// Most entry bytes in one log append batch (the CLI starts a new batch first).
pub const MAX_APPEND_BATCH_BYTES: usize = 256 * 1024 * 1024;
/// Largest entry bundle file: 256 entries, each behind a 2-byte length
/// (C2SP tlog-tiles); a reader refuses a larger file before decoding it.
pub const MAX_ENTRY_BUNDLE_BYTES: usize = 256 * (2 + MAX_ENTRY_BYTES);
/// Most full hash tiles a log reader keeps expanded in memory for proofs
/// (16 KiB each: 16 MiB at most).
pub const MAX_CACHED_TILES: usize = 1024;
/// Largest tlog-policy file read (bytes).
pub const MAX_POLICY_BYTES: usize = 256 * 1024;
/// Most `log` lines in a policy (tlog-policy recommends supporting at least 32).
pub const MAX_POLICY_LOGS: usize = 256;
/// Most `witness` lines in a policy (at least 32 recommended).
pub const MAX_POLICY_WITNESSES: usize = 256;
/// Most `group` lines in a policy (at least 32 recommended).
pub const MAX_POLICY_GROUPS: usize = 256;
/// Most consistency proof lines in an `add-checkpoint` request
/// (tlog-witness: "The client MUST NOT send more than 63").
pub const MAX_ADD_CHECKPOINT_PROOF_LINES: usize = 63;
/// Largest `add-checkpoint` request body: the old size line (at most
/// `old ` + 20 digits + newline), 63 proof lines of 45 bytes, the blank
/// line, and a checkpoint note.
pub const MAX_ADD_CHECKPOINT_BYTES: usize =
    26 + MAX_ADD_CHECKPOINT_PROOF_LINES * 45 + 1 + MAX_NOTE_BYTES;
/// Largest extra data in a tlog-proof (`rcpt` puts one log entry there).
pub const MAX_TLOG_PROOF_EXTRA_BYTES: usize = MAX_ENTRY_BYTES;
/// Largest tlog-proof file: header, `extra` line (base64 of the extra
/// data), `index` line, 63 proof lines, blank line, checkpoint note.
pub const MAX_TLOG_PROOF_BYTES: usize = 23
    + (6 + MAX_TLOG_PROOF_EXTRA_BYTES.div_ceil(3) * 4 + 1)
    + 27
    + MAX_PROOF_HASHES * 45
    + 1
    + MAX_NOTE_BYTES;
/// Times a witness re-reads its state and decides again when a concurrent
/// request for the same origin changed it between read and write.
pub const MAX_WITNESS_CAS_RETRIES: usize = 8;

// --- The gate (spec/gate.md "Limits").

/// Largest gate policy file read (bytes).
pub const MAX_GATE_POLICY_BYTES: usize = 64 * 1024;
/// Most checks in one gate policy.
pub const MAX_GATE_CHECKS: usize = 64;
/// Most arguments of one check's `run`.
pub const MAX_GATE_ARGV: usize = 256;
/// Longest timeout a check may ask for (seconds): one day.
pub const MAX_GATE_TIMEOUT_S: i64 = 86_400;
/// Largest output `git` may give the gate (status, diff, ls-files) before
/// the change is refused as too large to read (bytes).
pub const MAX_GIT_OUTPUT_BYTES: usize = 64 * 1024 * 1024;
/// Most files in one change (each is a line of the change record and an
/// item of the receipt's read set).
pub const MAX_CHANGE_FILES: usize = 4000;
/// Largest changed file copied into the clean copy (bytes): it is
/// read whole, hashed, compared with the change and written.
pub const MAX_CHANGE_FILE_BYTES: usize = 256 * 1024 * 1024;
/// Largest stdout or stderr of one check kept as evidence (bytes); a check
/// that writes more is stopped and not evaluated.
pub const MAX_CHECK_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// Largest object read back from a gate store (bytes).
pub const MAX_STORE_OBJECT_BYTES: usize = 256 * 1024 * 1024;
/// Largest evidence record or other structured store record (bytes).
pub const MAX_STORE_RECORD_BYTES: usize = 1024 * 1024;
/// Largest patch `rcpt gate apply` reads.
pub const MAX_GATE_PATCH_BYTES: usize = 64 * 1024 * 1024;
/// Largest pre-image `rcpt gate apply` keeps in its store (a file the
/// change replaces or deletes); a larger one makes the change refused, or
/// irreversible where the policy allows it.
pub const MAX_GATE_PREIMAGE_BYTES: usize = 32 * 1024 * 1024;
/// Most bytes the gate store's objects may take, with the ones an apply adds.
pub const MAX_GATE_STORE_BYTES: u64 = 4 * 1024 * 1024 * 1024;

// --- The monitor (spec/monitor.md).

/// Largest monitor watch file read (bytes).
pub const MAX_WATCH_FILE_BYTES: usize = 1024 * 1024;
/// Largest authorized list a watch file names (one receipt id a line:
/// about 220,000 ids).
pub const MAX_AUTHORIZED_FILE_BYTES: usize = 16 * 1024 * 1024;
/// `verify --mirror`: tree roots at distinct sizes the mirror keeps in
/// memory (32 bytes and a size each); beyond it, a root is computed from
/// the tiles again for each bundle.
pub const MAX_MIRROR_ROOTS: usize = 4096;
/// Largest per-origin monitor state file (a checkpoint note and a count).
pub const MAX_MONITOR_STATE_BYTES: usize = 2 * MAX_NOTE_BYTES + 4096;
/// Most refusal lines `log append` prints on stderr; the rest are counted
/// by reason in one summary line (100 MB of garbage on standard input is
/// then a screenful, not 400,000 lines).
pub const MAX_REFUSAL_LINES: u64 = 20;
