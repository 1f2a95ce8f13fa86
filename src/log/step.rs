//! step: the steps of an append, in order (`spec/log.md`, "The append
//! protocol"). Each step's doc says what it makes true, which function of
//! the writer does it, and what a crash right after it leaves; the
//! writer's repair (at open, and after a failed append) undoes or
//! completes that. Step 1 (the truth) is read at open; step 9 (the
//! report) is the caller's.

/// One step of an append, in protocol order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Step 2, `integrate`: leaf hashes, dedup, the new indexes. A crash
    /// after it leaves nothing new.
    Integrate,
    /// Step 3, `build_tiles`: the new leaves pushed onto a copy of the tree
    /// edge; every entry bundle and hash tile they touch built whole, in
    /// memory. A crash after it leaves nothing new.
    Tiles,
    /// Step 4, `write`: every tile durable under its name, create-only
    /// (in groups: all files written, all fdatasynced, all renamed; then
    /// each directory that gained a name fsynced once); at the same time
    /// the new dedup run and the new signed checkpoint durable, unnamed. A
    /// crash after it leaves tiles past the checkpoint and staged files:
    /// repair removes both.
    Write,
    /// Step 5, `Index::install`: the dedup run named. A crash after it
    /// leaves a run ending past the checkpoint beside the runs it
    /// absorbed: repair removes it.
    Index,
    /// Step 6, `keep`: the new checkpoint (signed and synced in step 4)
    /// named `.rcpt/checkpoints/<size>`. A crash after it leaves a kept
    /// checkpoint past the published one: `check` reports it, repair
    /// removes it.
    Keep,
    /// Step 7, `publish`: the checkpoint replaced by compare-and-swap; the
    /// batch is published, and everything it names is durable. A crash
    /// after it leaves the runs the new one absorbed: repair removes them.
    Publish,
    /// Step 8, `Index::retire`: the absorbed runs removed. A crash after
    /// it (before the caller reports) leaves a published batch nobody was
    /// told of: appending the same entries again returns their indexes.
    Retire,
}
