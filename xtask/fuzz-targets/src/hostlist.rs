//! Hostlist expressions (`slurm_client::hostlist`): `expand` answers within its budgets, and
//! what it expands `compress`es back to the same set of names.

use std::collections::BTreeSet;

use slurm_client::hostlist::{MAX_EXPANSION, MAX_EXPANSION_BYTES, compress, expand};

/// Expands `data` (as text; invalid UTF-8 is replaced, as a lossy reader would); on success
/// checks the budgets and the round trip through `compress`.
pub fn hostlist(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(names) = expand(&text) else { return };
    assert!(names.len() <= MAX_EXPANSION);
    assert!(names.iter().map(String::len).sum::<usize>() <= MAX_EXPANSION_BYTES);
    let compressed = compress(&names);
    let back: BTreeSet<String> = match expand(&compressed) {
        Ok(back) => back.into_iter().collect(),
        Err(e) => panic!("{text:?} compressed to {compressed:?}, which fails: {e}"),
    };
    let want: BTreeSet<String> = names.into_iter().collect();
    assert_eq!(back, want, "{text:?} compressed to {compressed:?}");
}
