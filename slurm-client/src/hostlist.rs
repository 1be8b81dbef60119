//! Slurm hostlist expressions: `node[1-3,5]` ⇄ `node1 node2 node3 node5`.
//!
//! Slurm names sets of nodes compactly: a job's `nodes`, a reservation's or a partition's
//! node list, `scontrol update nodename=…`. [`expand`] turns such an expression into the
//! node names; [`compress`] does the reverse.
//!
//! The syntax accepted by [`expand`]:
//! - items separated by commas or ASCII blanks (space, tab, CR, LF) outside brackets: `a1,b2`;
//! - an item is literal text with any number of bracket groups; the groups multiply, the
//!   first varying slowest: `rack[1-2]-n[1-2]` → `rack1-n1 rack1-n2 rack2-n1 rack2-n2`;
//! - a bracket holds numbers and ranges separated by commas: `n[1-3,5]`;
//! - a range's width is the width of its low bound, so zero padding is kept:
//!   `n[008-010]` → `n008 n009 n010`, while `n[8-10]` → `n8 n9 n10`.
//!
//! Literal text may be any UTF-8 but `[`, `]`, `,` and those blanks (other Unicode
//! whitespace, such as a no-break space, is literal text). Inside brackets only ASCII digits,
//! `-` and `,` are accepted; anything else there, nested or unbalanced brackets, empty
//! brackets and numbers of more than 18 digits are refused with a [`HostlistError`].
//!
//! Expansion is bounded twice: at most [`MAX_EXPANSION`] names and [`MAX_EXPANSION_BYTES`]
//! bytes of names (or the limits given to [`expand_limited`] and [`expand_within`]). Both are
//! computed from the parsed expression before anything is allocated, so `n[0-99999999999]`,
//! or a short expression of long names, is an error, not gigabytes of memory. Parsing and
//! expansion are iterative, so no input, however deep its brackets, can exhaust the stack.
//!
//! ```
//! use slurm_client::hostlist;
//! assert_eq!(hostlist::expand("n[1-3,5]").unwrap(), ["n1", "n2", "n3", "n5"]);
//! assert_eq!(hostlist::compress(["n3", "n1", "n2", "n5"]), "n[1-3,5]");
//! assert!(hostlist::expand("n[1-").unwrap_err().to_string().contains("n[1-"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The most names [`expand`] produces from one expression (about a million).
pub const MAX_EXPANSION: usize = 1 << 20;

/// The most bytes of names (their text, summed) [`expand`] produces from one expression:
/// 32 MiB.
///
/// The count cap alone let 268 bytes (`"x"×256 + "[1-1048576]"`) ask for ~270 MB of text.
/// 32 MiB is a full [`MAX_EXPANSION`] of names averaging 32 bytes, far above any real
/// cluster (a hundred thousand nodes of 32-byte names is 3.2 MB), and keeps one expansion,
/// with the `String` headers of a million names (24 MiB), under ~60 MB: an operator or a
/// bridge with a memory limit of a few hundred MB survives any answer slurmrestd gives.
pub const MAX_EXPANSION_BYTES: usize = 32 << 20;

/// Bound digits beyond this many are refused (keeps every number inside `u64`).
const MAX_DIGITS: usize = 18;

/// The longest part an error quotes; longer ones are cut (at a character boundary) and end
/// with `…`, so that a hostile megabyte of input does not become a megabyte of log line.
const MAX_PART: usize = 200;

/// A malformed hostlist expression, or one that expands beyond the limit. The message
/// names the offending part of the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hostlist {part:?}: {reason}")]
pub struct HostlistError {
    part: String,
    reason: String,
}

impl HostlistError {
    fn new(part: &str, reason: impl Into<String>) -> Self {
        let part = if part.len() > MAX_PART {
            let mut cut = MAX_PART;
            while !part.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}…", &part[..cut])
        } else {
            part.to_owned()
        };
        HostlistError {
            part,
            reason: reason.into(),
        }
    }

    /// The part of the input that is wrong (an item, or the whole expression), cut to its
    /// first 200 bytes and `…` when longer.
    pub fn part(&self) -> &str {
        &self.part
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Expands a hostlist expression into node names, in the expression's order (duplicates
/// kept). An empty or blank expression gives no names. At most [`MAX_EXPANSION`] names and
/// [`MAX_EXPANSION_BYTES`] bytes of names.
pub fn expand(expression: &str) -> Result<Vec<String>, HostlistError> {
    expand_within(expression, MAX_EXPANSION, MAX_EXPANSION_BYTES)
}

/// [`expand`] with a custom cap on the number of names (the byte cap stays
/// [`MAX_EXPANSION_BYTES`]).
pub fn expand_limited(expression: &str, limit: usize) -> Result<Vec<String>, HostlistError> {
    expand_within(expression, limit, MAX_EXPANSION_BYTES)
}

/// [`expand`] with custom caps on the number of names and on their bytes (the lengths of
/// the names, summed). Both are checked before anything is allocated; exceeding either is
/// a [`HostlistError`] naming the item, or the whole expression when only the sum of the
/// items exceeds it.
pub fn expand_within(
    expression: &str,
    max_names: usize,
    max_bytes: usize,
) -> Result<Vec<String>, HostlistError> {
    let items = parse(expression)?;
    let too_many =
        |part: &str| HostlistError::new(part, format!("expands to more than {max_names} names"));
    let too_long = |part: &str| {
        HostlistError::new(
            part,
            format!("expands to more than {max_bytes} bytes of names"),
        )
    };
    let (mut names, mut bytes) = (0usize, 0usize);
    for item in &items {
        let (n, b) = item_size(item, max_names, max_bytes)?;
        names = names
            .checked_add(n)
            .filter(|&t| t <= max_names)
            .ok_or_else(|| too_many(expression))?;
        bytes = bytes
            .checked_add(b)
            .filter(|&t| t <= max_bytes)
            .ok_or_else(|| too_long(expression))?;
    }
    let mut out = Vec::with_capacity(names);
    for item in &items {
        expand_item(&item.pieces, &mut out);
    }
    Ok(out)
}

/// Compresses node names into one hostlist expression: names are deduplicated and
/// sorted, names that differ only in a trailing number share a bracket, and consecutive
/// numbers of the same width become ranges (`n[1-3,5]`, `n[008-010]`). The result
/// [`expand`]s to the same set of names. Names without a trailing number are kept as they
/// are; only the trailing number is bracketed (no multi-bracket output). A name holding
/// `[`, `]`, `,` or an ASCII blank has no hostlist form: it is written as it is, and the
/// result then expands to something else (or not at all); so does an empty name.
pub fn compress<I, S>(names: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    // prefix -> (value, digits) for names ending in digits; plain names apart.
    let mut numbered: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    let mut plain: BTreeMap<String, ()> = BTreeMap::new();
    for name in names {
        let name = name.as_ref();
        let split = name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, digits) = name.split_at(split);
        match digits.parse::<u64>() {
            Ok(value) if !digits.is_empty() && digits.len() <= MAX_DIGITS => numbered
                .entry(prefix.to_owned())
                .or_default()
                .push((value, digits.to_owned())),
            _ => {
                plain.insert(name.to_owned(), ());
            }
        }
    }
    let mut items: Vec<(String, String)> = plain.into_keys().map(|n| (n.clone(), n)).collect();
    for (prefix, mut hosts) in numbered {
        hosts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.len().cmp(&b.1.len())));
        hosts.dedup();
        let mut ranges: Vec<(String, String)> = Vec::new(); // (low digits, high digits)
        let mut open: Option<(String, u64, usize, String)> = None; // low, last value, width, last digits
        for (value, digits) in hosts {
            if let Some((_, last, width, last_digits)) = open.as_mut() {
                // At most 18 digits, so `last + 1` cannot overflow.
                if value == *last + 1 && format!("{value:0width$}", width = *width) == digits {
                    *last = value;
                    *last_digits = digits;
                    continue;
                }
            }
            if let Some((low, _, _, high)) = open.take() {
                ranges.push((low, high));
            }
            open = Some((digits.clone(), value, digits.len(), digits));
        }
        if let Some((low, _, _, high)) = open {
            ranges.push((low, high));
        }
        let text = match ranges.as_slice() {
            [(low, high)] if low == high => format!("{prefix}{low}"),
            _ => {
                let inner: Vec<String> = ranges
                    .iter()
                    .map(|(low, high)| {
                        if low == high {
                            low.clone()
                        } else {
                            format!("{low}-{high}")
                        }
                    })
                    .collect();
                format!("{prefix}[{}]", inner.join(","))
            }
        };
        items.push((prefix, text));
    }
    items.sort();
    items
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// One item of an expression (`rack[1-2]-n[1-2]`), as the pieces it multiplies.
struct Item<'a> {
    pieces: Vec<Piece<'a>>,
}

/// One piece of an item: literal text, or a bracket's ranges (never empty).
enum Piece<'a> {
    Text(&'a str),
    Ranges(Vec<Range>),
}

struct Range {
    low: u64,
    high: u64,
    width: usize,
}

fn is_separator(c: char) -> bool {
    matches!(c, ',' | ' ' | '\t' | '\n' | '\r')
}

/// Splits the expression into items and each item into pieces, in one pass.
fn parse(expression: &str) -> Result<Vec<Item<'_>>, HostlistError> {
    let mut items = Vec::new();
    let mut pieces = Vec::new();
    // Where the current item starts, if one has started; where its pending text starts;
    // where the open bracket is, if inside one.
    let mut item_start: Option<usize> = None;
    let mut text_start = 0;
    let mut open: Option<usize> = None;
    for (i, c) in expression.char_indices() {
        if let Some(at) = open {
            match c {
                ']' => {
                    let start = item_start.unwrap_or(at);
                    let ranges = parse_ranges(&expression[at + 1..i])
                        .map_err(|reason| item_error(expression, start, i + 1, reason))?;
                    pieces.push(Piece::Ranges(ranges));
                    open = None;
                    text_start = i + 1;
                }
                '[' => {
                    let start = item_start.unwrap_or(at);
                    return Err(item_error(expression, start, i + 1, "nested '['".into()));
                }
                _ => {}
            }
            continue;
        }
        match c {
            '[' => {
                if text_start < i {
                    pieces.push(Piece::Text(&expression[text_start..i]));
                }
                item_start.get_or_insert(i);
                open = Some(i);
            }
            ']' => {
                let start = item_start.unwrap_or(i);
                return Err(item_error(
                    expression,
                    start,
                    i + 1,
                    "']' without '['".into(),
                ));
            }
            c if is_separator(c) => {
                if text_start < i {
                    pieces.push(Piece::Text(&expression[text_start..i]));
                }
                if item_start.take().is_some() {
                    items.push(Item {
                        pieces: std::mem::take(&mut pieces),
                    });
                }
                text_start = i + c.len_utf8();
            }
            _ => {
                item_start.get_or_insert(i);
            }
        }
    }
    if let Some(at) = open {
        let start = item_start.unwrap_or(at);
        return Err(HostlistError::new(&expression[start..], "'[' without ']'"));
    }
    if text_start < expression.len() {
        pieces.push(Piece::Text(&expression[text_start..]));
    }
    if item_start.is_some() {
        items.push(Item { pieces });
    }
    Ok(items)
}

/// An error naming the item that starts at byte `start` and runs at least to `from`: up to
/// the next separator outside brackets, or the end.
fn item_error(expression: &str, start: usize, from: usize, reason: String) -> HostlistError {
    let mut depth = 0u8;
    let mut end = expression.len();
    for (j, c) in expression[from..].char_indices() {
        match c {
            '[' => depth = 1,
            ']' => depth = 0,
            c if depth == 0 && is_separator(c) => {
                end = from + j;
                break;
            }
            _ => {}
        }
    }
    HostlistError::new(&expression[start..end], reason)
}

/// A bracket's content (`1-3,5`), or why it is not one.
fn parse_ranges(inner: &str) -> Result<Vec<Range>, String> {
    if inner.is_empty() {
        return Err("empty brackets".into());
    }
    inner
        .split(',')
        .map(|part| {
            let (low_s, high_s) = part.split_once('-').unwrap_or((part, part));
            let number = |s: &str| -> Result<u64, String> {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("{part:?} is not a number or a range such as 1-4"));
                }
                if s.len() > MAX_DIGITS {
                    return Err(format!("{s:?} has more than {MAX_DIGITS} digits"));
                }
                s.parse().map_err(|_| format!("{s:?} is not a number"))
            };
            let (low, high) = (number(low_s)?, number(high_s)?);
            if low > high {
                return Err(format!("range {part:?} runs backwards"));
            }
            Ok(Range {
                low,
                high,
                width: low_s.len(),
            })
        })
        .collect()
}

/// The number of names an item expands to and their bytes, or the error naming the item
/// when either exceeds its cap. With the names of the pieces before `p` counted as
/// (`count`, `bytes`), adding `p` (`c` values of `s` bytes in all) gives
/// (`count·c`, `bytes·c + s·count`); both only grow, so stopping at the first excess is exact.
fn item_size(
    item: &Item<'_>,
    max_names: usize,
    max_bytes: usize,
) -> Result<(usize, usize), HostlistError> {
    let (mut count, mut bytes): (u128, u128) = (1, 0);
    for piece in &item.pieces {
        let (c, s) = match piece {
            Piece::Text(text) => (1, text.len() as u128),
            Piece::Ranges(ranges) => ranges.iter().fold((0u128, 0u128), |(c, s), r| {
                (
                    c.saturating_add(u128::from(r.high - r.low) + 1),
                    s.saturating_add(range_bytes(r.low, r.high, r.width)),
                )
            }),
        };
        // A bracket of many ranges can exceed even u128 once multiplied: overflow counts as
        // over the cap.
        let new_count = count.saturating_mul(c);
        let new_bytes = bytes
            .checked_mul(c)
            .and_then(|b| s.checked_mul(count).and_then(|t| b.checked_add(t)))
            .unwrap_or(u128::MAX);
        if new_count > max_names as u128 {
            return Err(item_too_big(
                item,
                format!("expands to more than {max_names} names"),
            ));
        }
        if new_bytes > max_bytes as u128 {
            return Err(item_too_big(
                item,
                format!("expands to more than {max_bytes} bytes of names"),
            ));
        }
        (count, bytes) = (new_count, new_bytes);
    }
    Ok((count as usize, bytes as usize))
}

/// An item written back (a bracket as its ranges), for an error naming it.
fn item_too_big(item: &Item<'_>, reason: String) -> HostlistError {
    let mut text = String::new();
    for piece in &item.pieces {
        if text.len() > MAX_PART {
            break;
        }
        match piece {
            Piece::Text(t) => text.push_str(t),
            Piece::Ranges(ranges) => {
                text.push('[');
                for (k, r) in ranges.iter().enumerate() {
                    if k > 0 {
                        text.push(',');
                    }
                    let _ = write!(text, "{:0w$}", r.low, w = r.width);
                    if r.high != r.low {
                        let _ = write!(text, "-{}", r.high);
                    }
                }
                text.push(']');
            }
        }
    }
    HostlistError::new(&text, reason)
}

/// The bytes of the numbers `low..=high` written at least `width` digits wide, summed:
/// by bands of equal digit counts (1-9, 10-99, …), not one by one.
fn range_bytes(low: u64, high: u64, width: usize) -> u128 {
    let mut total = 0u128;
    let (mut band_low, mut digits) = (0u128, 1usize);
    let (low, high) = (u128::from(low), u128::from(high));
    while band_low <= high {
        let band_high = 10u128.pow(digits as u32) - 1;
        let (from, to) = (low.max(band_low), high.min(band_high));
        if from <= to {
            total += (to - from + 1) * digits.max(width) as u128;
        }
        band_low = band_high + 1;
        digits += 1;
    }
    total
}

/// Appends an item's names, the last bracket varying fastest: an odometer over the
/// brackets, so the work is one pass per name and no recursion.
fn expand_item(pieces: &[Piece<'_>], out: &mut Vec<String>) {
    // Per piece: the index of the current range and the current number in it.
    let mut cursor: Vec<(usize, u64)> = pieces
        .iter()
        .map(|p| match p {
            Piece::Ranges(ranges) => (0, ranges.first().map_or(0, |r| r.low)),
            Piece::Text(_) => (0, 0),
        })
        .collect();
    loop {
        let mut name = String::new();
        for (piece, &(r, n)) in pieces.iter().zip(&cursor) {
            match piece {
                Piece::Text(text) => name.push_str(text),
                Piece::Ranges(ranges) => {
                    let width = ranges.get(r).map_or(0, |r| r.width);
                    let _ = write!(name, "{n:0width$}");
                }
            }
        }
        out.push(name);
        // Advance the odometer; when every bracket wraps around, the item is done.
        let mut k = pieces.len();
        loop {
            let Some(j) = k.checked_sub(1) else {
                return;
            };
            k = j;
            let Piece::Ranges(ranges) = &pieces[k] else {
                continue;
            };
            let (r, n) = &mut cursor[k];
            match ranges.get(*r) {
                Some(range) if *n < range.high => {
                    *n += 1;
                    break;
                }
                _ => {}
            }
            if let Some(next) = ranges.get(*r + 1) {
                *r += 1;
                *n = next.low;
                break;
            }
            *r = 0;
            *n = ranges.first().map_or(0, |r| r.low);
        }
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Vec<String> {
        expand(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> HostlistError {
        expand(s).expect_err(s)
    }

    #[test]
    fn plain_names_and_lists() {
        assert!(ok("").is_empty());
        assert!(ok(" , ").is_empty());
        assert_eq!(ok("node1"), ["node1"]);
        assert_eq!(ok("a,b c"), ["a", "b", "c"]);
        assert_eq!(ok("a,,b,"), ["a", "b"]);
        assert_eq!(ok("slurm-worker-0"), ["slurm-worker-0"]);
    }

    #[test]
    fn ranges_and_lists_in_brackets() {
        assert_eq!(ok("node[1-3,5]"), ["node1", "node2", "node3", "node5"]);
        assert_eq!(ok("n[7]"), ["n7"]);
        assert_eq!(ok("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ok("[1-2]"), ["1", "2"]);
        assert_eq!(ok("n[1-2],m3,o[4]"), ["n1", "n2", "m3", "o4"]);
        assert_eq!(ok("n[2,1,2]"), ["n2", "n1", "n2"]);
    }

    #[test]
    fn zero_padding_is_the_low_bounds_width() {
        assert_eq!(ok("n[001-003]"), ["n001", "n002", "n003"]);
        assert_eq!(ok("n[008-010]"), ["n008", "n009", "n010"]);
        assert_eq!(ok("n[98-100]"), ["n98", "n99", "n100"]);
        assert_eq!(ok("n[09-100]").len(), 92);
        assert_eq!(ok("n[01-02,5]"), ["n01", "n02", "n5"]);
        assert_eq!(ok("n[0-1]"), ["n0", "n1"]);
    }

    #[test]
    fn several_brackets_multiply_first_slowest() {
        assert_eq!(
            ok("rack[1-2]-n[1-2]"),
            ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
        );
        assert_eq!(ok("n[1-2]-ib"), ["n1-ib", "n2-ib"]);
        assert_eq!(
            ok("r[1-2]n[01-02]x,y"),
            ["r1n01x", "r1n02x", "r2n01x", "r2n02x", "y"]
        );
    }

    #[test]
    fn malformed_input_names_the_bad_part() {
        let e = err("a1,n[1-");
        assert_eq!(e.part(), "n[1-");
        assert!(e.to_string().contains("n[1-"), "{e}");
        assert!(err("n[1-3").reason().contains("without ']'"));
        assert!(err("ok,n1]").reason().contains("without '['"));
        assert_eq!(err("ok,n1],x").part(), "n1]");
        assert!(err("n[[1]]").reason().contains("nested"));
        assert!(err("n[]").reason().contains("empty"));
        let e = err("good[1-2],bad[x-3]");
        assert_eq!(e.part(), "bad[x-3]");
        assert!(e.reason().contains("\"x-3\""), "{e}");
        assert!(err("n[1-2-3]").reason().contains("\"1-2-3\""));
        assert!(err("n[1,]").reason().contains("not a number"));
        assert!(err("n[-1]").reason().contains("not a number"));
        assert!(err("n[5-3]").reason().contains("backwards"));
        assert!(err("n[ 1]").reason().contains("not a number"));
        assert!(err("n[1234567890123456789]").reason().contains("digits"));
    }

    #[test]
    fn expansion_is_capped_before_allocating() {
        let e = err("n[0-999999999999999999]");
        assert!(e.reason().contains("more than"), "{e}");
        // Products and sums of items are capped too, without overflow.
        assert!(
            err("a[0-999999]b[0-999999]c[0-999999]")
                .reason()
                .contains("more than")
        );
        assert!(
            err("a[0-999999],b[0-999999]")
                .reason()
                .contains("more than")
        );
        assert_eq!(expand_limited("n[1-4]", 4).unwrap().len(), 4);
        assert!(expand_limited("n[1-4],x", 4).is_err());
        assert!(expand_limited("n[1-2]m[1-3]", 5).is_err());
        assert_eq!(ok("n[0-1048575]").len(), MAX_EXPANSION);
    }

    // Regressions of issue 38: each of these aborted a process with `panic = "abort"`.
    #[test]
    fn a_multibyte_blank_before_a_stray_bracket_is_an_error_not_a_panic() {
        let e = err("n1\u{a0}x]");
        assert_eq!(e.part(), "n1\u{a0}x]");
        assert!(e.reason().contains("without '['"), "{e}");
        let e = err("a,\u{3000}é[1]]");
        assert_eq!(e.part(), "\u{3000}é[1]]");
        assert!(err("é[1,\u{a0}]").reason().contains("not a number"));
    }

    #[test]
    fn many_bracket_groups_do_not_recurse() {
        // 60 KB of `[1]`: one name of 20,000 digits, built on a small thread's stack.
        let input = "[1]".repeat(20_000);
        let names = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || expand(&input))
            .expect("thread")
            .join()
            .expect("no stack overflow")
            .expect("expands");
        assert_eq!(names, ["1".repeat(20_000)]);
    }

    #[test]
    fn bytes_are_capped_before_allocating() {
        // 268 bytes that asked for ~270 MB of names.
        let input = format!("{}[1-1048576]", "x".repeat(256));
        let e = err(&input);
        assert!(e.reason().contains("bytes of names"), "{e}");
        assert!(
            e.part().starts_with("xxxx") && e.part().ends_with('…'),
            "{e}"
        );
        // Exactly at and just over a custom byte cap: n1..n10 is 9*2 + 3 = 21 bytes.
        assert_eq!(expand_within("n[1-10]", 100, 21).unwrap().len(), 10);
        let e = expand_within("n[1-10]", 100, 20).unwrap_err();
        assert_eq!(e.part(), "n[1-10]");
        assert!(e.reason().contains("more than 20 bytes"), "{e}");
        // The sum over items names the whole expression.
        let e = expand_within("a[1-5],b[1-5]", 100, 15).unwrap_err();
        assert_eq!(e.part(), "a[1-5],b[1-5]");
        // Products of many wide brackets do not overflow the accounting.
        let wide = format!("n[{}]", vec!["0-999999999999999999"; 40].join(","));
        assert!(err(&wide.repeat(3)).reason().contains("more than"));
    }

    #[test]
    fn the_byte_count_is_exact() {
        for expr in [
            "n[1-10]",
            "n[008-1000]",
            "r[1-3]x[0-99]é",
            "[0-0]",
            "a,b[9-11]c[1,3,100-102]",
        ] {
            let names = ok(expr);
            let bytes: usize = names.iter().map(String::len).sum();
            assert!(expand_within(expr, usize::MAX, bytes).is_ok(), "{expr}");
            assert!(
                expand_within(expr, usize::MAX, bytes - 1).is_err(),
                "{expr}"
            );
        }
    }

    #[test]
    fn non_ascii_text_outside_brackets_is_literal() {
        assert_eq!(ok("nœud[1-2]"), ["nœud1", "nœud2"]);
        assert_eq!(ok("ä\u{a0}b,c"), ["ä\u{a0}b", "c"]);
        assert_eq!(ok("é[1]ü,ß"), ["é1ü", "ß"]);
        assert!(err("n[١]").reason().contains("not a number"));
    }

    #[test]
    fn a_long_part_is_cut_in_errors() {
        let long = format!("{}]", "é".repeat(500));
        let e = err(&long);
        assert!(
            e.part().len() <= MAX_PART + '…'.len_utf8(),
            "{}",
            e.part().len()
        );
        assert!(e.part().ends_with('…'));
        let open = format!("n[{}", "1".repeat(1000));
        assert!(err(&open).part().len() < 300);
    }

    #[test]
    fn compress_makes_ranges() {
        assert_eq!(compress(["n3", "n1", "n2", "n5"]), "n[1-3,5]");
        assert_eq!(compress(["n1"]), "n1");
        assert_eq!(compress(Vec::<String>::new()), "");
        assert_eq!(compress(["n2", "n2", "n1"]), "n[1-2]");
        assert_eq!(compress(["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(compress(["n001", "n002", "n003", "n010"]), "n[001-003,010]");
        assert_eq!(compress(["n008", "n009", "n010"]), "n[008-010]");
        assert_eq!(compress(["n099", "n100", "n101"]), "n[099-101]");
        assert_eq!(compress(["n01", "n1", "n02"]), "n[1,01-02]");
        assert_eq!(compress(["b1", "a2", "a1", "login"]), "a[1-2],b1,login");
        assert_eq!(
            compress(["rack1-n1", "rack1-n2", "rack2-n1"]),
            "rack1-n[1-2],rack2-n1"
        );
    }

    #[test]
    fn compress_then_expand_round_trips() {
        let cases: &[&[&str]] = &[
            &["n1", "n2", "n3", "n5", "n7", "n8"],
            &["n001", "n002", "n010", "n011", "n1", "n12"],
            &["a", "b1", "b01", "b001", "c9", "c10", "c010"],
            &["node-0", "node-1", "x"],
        ];
        for names in cases {
            let text = compress(names.iter());
            let mut back = ok(&text);
            back.sort();
            let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(back, want, "{text}");
        }
        let many: Vec<String> = ok("r[1-3]n[001-100]");
        let text = compress(&many);
        assert_eq!(text, "r1n[001-100],r2n[001-100],r3n[001-100]");
        assert_eq!(ok(&text), many);
    }
}
