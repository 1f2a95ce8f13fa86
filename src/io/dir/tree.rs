//! The walk of [`Dir::remove_tree`]: a tree emptied depth first without
//! recursion, coming back up by `..` checked against the directory left.

use super::{Dir, DirError, MAX_TREE_DEPTH, dir_flags, io_err};
use crate::io::FileKind;
use rustix::fs::{AtFlags, Mode};
use std::ffi::OsString;
use std::path::Path;

/// Remove everything inside `top` (depth first, without recursion):
/// files and links are unlinked where they are met; a subdirectory is
/// entered (opened `O_NOFOLLOW`), emptied, and removed from its parent,
/// reopened by `..` and checked to be the directory left.
pub(super) fn empty_tree(top: Dir) -> Result<(), DirError> {
    // One frame per directory entered below `top`: the identity of the
    // directory it is in, and its name there.
    let mut frames: Vec<((u64, u64), OsString)> = Vec::new();
    let mut cur = top;
    loop {
        if let Some(sub) = clear_files(&cur)? {
            if frames.len() >= MAX_TREE_DEPTH {
                return Err(DirError::TooDeep { path: cur.path });
            }
            let next = cur.child(&sub)?;
            frames.push((cur.identity()?, sub));
            cur = next;
            continue;
        }
        let Some((id, name)) = frames.pop() else {
            return Ok(());
        };
        let parent_path = cur.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let fd = rustix::fs::openat(&cur.fd, "..", dir_flags(), Mode::empty())
            .map_err(io_err("open the directory", &parent_path))?;
        let up = Dir {
            fd,
            path: parent_path,
        };
        if up.identity()? != id {
            return Err(DirError::Moved { path: up.path });
        }
        match rustix::fs::unlinkat(&up.fd, name.as_os_str(), AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(io_err("remove", &up.join(&name))(e)),
        }
        cur = up;
    }
}

/// Unlink every entry of `dir` that is not a directory; the first
/// subdirectory met, if any (the walk goes into it before the rest).
fn clear_files(dir: &Dir) -> Result<Option<OsString>, DirError> {
    for name in dir.names()? {
        match dir.kind(&name)? {
            None => {}
            Some(FileKind::Directory) => return Ok(Some(name)),
            Some(_) => {
                dir.remove_file(&name)?;
            }
        }
    }
    Ok(None)
}
