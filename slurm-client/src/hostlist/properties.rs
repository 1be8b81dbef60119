//! Property tests of the hostlist parser (proptest, run by the normal test build): `expand`
//! undoes `compress`, and `expand` never panics and stays within its budgets, on arbitrary
//! strings and on strings built from hostlist-ish pieces.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{MAX_EXPANSION, MAX_EXPANSION_BYTES, compress, expand, expand_within};

/// A node name `compress` can write: no `[`, `]`, `,` or ASCII blank, not empty; a mix of
/// letters, digits, `-`, non-ASCII letters and zero-padded numbers.
fn name() -> impl Strategy<Value = String> {
    let stem = "[a-z\u{e9}\u{3b1}\u{a0}_.-]{1,6}";
    prop_oneof![
        stem.prop_map(String::from),
        (stem, 0u64..2_000).prop_map(|(s, n)| format!("{s}{n}")),
        (stem, 0u64..200, 1usize..5).prop_map(|(s, n, w)| format!("{s}{n:0w$}")),
        (stem, 0u64..50, stem).prop_map(|(a, n, b)| format!("{a}{n}{b}")),
        "[0-9]{1,20}".prop_map(String::from),
    ]
}

/// Text from the pieces hostlists are made of, in any order: brackets, ranges, separators,
/// digits, letters, non-ASCII (multi-byte blanks among them).
fn hostlistish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("-".to_owned()),
        Just(",".to_owned()),
        Just(" ".to_owned()),
        Just("\u{a0}".to_owned()),
        Just("é".to_owned()),
        Just("\u{1f600}".to_owned()),
        "[0-9]{1,20}".prop_map(String::from),
        "[a-z]{1,4}".prop_map(String::from),
        (0u64..20_000, 0u64..20_000).prop_map(|(a, b)| format!("[{a}-{b}]")),
        Just("[0-99999999999]".to_owned()),
        (0u64..100, 0u64..100).prop_map(|(a, b)| format!("[{a:03}-{b},{b}]")),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// `expand` answers (names within the budgets, or an error quoting a short part).
fn check_bounded(text: &str, max_names: usize, max_bytes: usize) -> Result<(), TestCaseError> {
    match expand_within(text, max_names, max_bytes) {
        Ok(names) => {
            prop_assert!(names.len() <= max_names);
            prop_assert!(names.iter().map(String::len).sum::<usize>() <= max_bytes);
            prop_assert!(names.iter().all(|n| !n.is_empty()));
        }
        Err(e) => {
            prop_assert!(e.part().len() <= 203, "{}", e.part().len());
            prop_assert!(!e.reason().is_empty());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn expand_undoes_compress(names in prop::collection::vec(name(), 0..60)) {
        let text = compress(&names);
        let back: BTreeSet<String> = expand(&text)
            .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?
            .into_iter()
            .collect();
        let want: BTreeSet<String> = names.into_iter().collect();
        prop_assert_eq!(back, want, "{:?}", text);
    }

    #[test]
    fn expand_never_panics_on_any_string(text in any::<String>()) {
        check_bounded(&text, MAX_EXPANSION, MAX_EXPANSION_BYTES)?;
    }

    #[test]
    fn expand_never_panics_on_hostlistish_text(text in hostlistish()) {
        check_bounded(&text, MAX_EXPANSION, MAX_EXPANSION_BYTES)?;
    }

    #[test]
    fn expand_stays_within_small_budgets(
        text in hostlistish(),
        max_names in 0usize..300,
        max_bytes in 0usize..3_000,
    ) {
        check_bounded(&text, max_names, max_bytes)?;
    }
}
