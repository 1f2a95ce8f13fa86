//! entry: a log entry with its leaf hash, hashed once where its bytes are.

use crate::tlog::merkle::{self, Hash};

/// A log entry with its RFC 6962 leaf hash, computed here and only here
/// from the entry bytes: a caller that already walks each entry (in
/// parallel, while its bytes are in cache) hashes it there, and
/// [`LogWriter::append_hashed`] cannot be handed a hash of other bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashedEntry {
    entry: Box<[u8]>,
    leaf: Hash,
}

impl HashedEntry {
    /// The entry and its leaf hash. The bytes are kept in an allocation of
    /// their exact length (an encoder's buffer may hold more; shrunk in
    /// place, not copied), since a batch holds 100,000 of them.
    pub fn new(entry: Vec<u8>) -> HashedEntry {
        let leaf = merkle::leaf_hash(&entry);
        let entry = entry.into_boxed_slice();
        HashedEntry { entry, leaf }
    }

    /// The entry bytes.
    pub fn entry(&self) -> &[u8] {
        &self.entry
    }

    /// Its leaf hash.
    pub fn leaf(&self) -> &Hash {
        &self.leaf
    }
}

impl AsRef<[u8]> for HashedEntry {
    fn as_ref(&self) -> &[u8] {
        &self.entry
    }
}
