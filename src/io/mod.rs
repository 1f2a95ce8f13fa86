//! io: the one capped reader and the one atomic writer for the files a user
//! names (spec/security.md "Inputs and outputs").
//!
//! Reading. Every input `rcpt` is given (bundle, envelope, payload, trust
//! file, key, checkpoint, consistency proof, manifest, a corpus file) is read
//! by [`read_capped`]: at most `limit + 1` bytes are ever read, so a file
//! over the limit is told apart without reading it whole, and nothing is
//! sized first and read uncapped after. A path must name a regular file: it
//! is opened non-blocking and checked with `fstat` on the opened file, so a
//! FIFO, a device or a directory is refused at once, never waited on or read
//! forever. Standard input, named `-` ([`Source::Stdin`]), is the one
//! exception, and it is capped the same way. Large files are hashed as a
//! stream ([`sha256_capped`]); JSON Lines are read by [`LineReader`], one
//! capped line at a time.
//!
//! Writing. Every output file (`-o`) goes through [`write_output`]: `-`
//! ([`Target::Stdout`]) is the caller's standard output; a path that does
//! not exist or is a regular file is written to a temporary file created
//! exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`) in the same directory, synced,
//! renamed over the path, and the directory synced; the temporary file is
//! removed on failure. A path that exists and is not a regular file is never
//! replaced: a FIFO or a character device (a terminal, `/dev/null`) is
//! written through; anything else (a directory, a block device, a socket, a
//! symbolic link to a regular file) is refused with a message that says so.
//!
//! The library never chooses standard input or output itself: the caller
//! passes them in.

mod batch;
mod dir;
mod lines;
mod read;
mod write;

pub use batch::Batch;
pub use dir::{Dir, DirError, MAX_TREE_DEPTH, PRIVATE_DIR_MODE, is_plain_name, remove_tree_at};
pub use lines::{Line, LineReader};
pub use read::*;
pub use write::*;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// An error and its sources, joined by ": " (for details in reports, where
/// no error chain is printed).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        text.push_str(": ");
        text.push_str(&e.to_string());
        next = e.source();
    }
    text
}

/// Where an input comes from: a path, or standard input (`-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Standard input, spelled `-` on the command line.
    Stdin,
    /// A file path (a file literally named `-` is spelled `./-`).
    Path(PathBuf),
}

impl From<OsString> for Source {
    fn from(arg: OsString) -> Source {
        if arg == "-" {
            Source::Stdin
        } else {
            Source::Path(PathBuf::from(arg))
        }
    }
}

impl From<&Path> for Source {
    fn from(path: &Path) -> Source {
        Source::from(path.as_os_str().to_owned())
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Stdin => f.write_str("-"),
            Source::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Where an output goes: a path, or standard output (`-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Standard output, spelled `-` on the command line.
    Stdout,
    /// A file path (a file literally named `-` is spelled `./-`).
    Path(PathBuf),
}

impl From<OsString> for Target {
    fn from(arg: OsString) -> Target {
        if arg == "-" {
            Target::Stdout
        } else {
            Target::Path(PathBuf::from(arg))
        }
    }
}

/// Fill `buf` from the operating system's randomness; its failure as an
/// [`std::io::Error`] (the OS error where there is one), so a cause is kept
/// as a typed source (getrandom's own type is no std error here).
pub fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    getrandom::fill(buf).map_err(|e| {
        e.raw_os_error().map_or_else(
            || std::io::Error::other(e.to_string()),
            std::io::Error::from_raw_os_error,
        )
    })
}
