//! The content hashes put on pod templates so that a change to a referenced object rolls the pods.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// sha256 of `bytes`, lowercase hex.
pub fn checksum(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// Slinky's map hash: the values concatenated in key order, hashed; `""` when there is nothing
/// to hash (missing object or empty data), so an absent Secret gives a stable annotation.
pub fn checksum_map<V: AsRef<[u8]>>(map: &BTreeMap<String, V>) -> String {
    checksum_values(map.values())
}

/// Like [`checksum_map`], over values already in key order (e.g. several maps one after another).
pub fn checksum_values<V: AsRef<[u8]>>(values: impl IntoIterator<Item = V>) -> String {
    let mut hasher = Sha256::new();
    let mut empty = true;
    for v in values {
        let v = v.as_ref();
        empty &= v.is_empty();
        hasher.update(v);
    }
    if empty {
        return String::new();
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_hash_is_values_in_key_order() {
        let m = BTreeMap::from([("b".to_owned(), "2"), ("a".to_owned(), "1")]);
        assert_eq!(checksum_map(&m), checksum("12"));
        assert_eq!(
            checksum("12"),
            "6b51d431df5d7f141cbececcf79edf3dd861c3b4069f0b11661a3eefacbba918"
        );
    }

    #[test]
    fn empty_map_hashes_to_empty_string() {
        assert_eq!(checksum_map::<String>(&BTreeMap::new()), "");
        assert_eq!(checksum_map(&BTreeMap::from([("a".to_owned(), "")])), "");
    }
}
