//! Slurm hostlist expressions: `node[1-3,5]` ⇄ `node1 node2 node3 node5`.
//!
//! Slurm names sets of nodes compactly: a job's `nodes`, a reservation's or a partition's
//! node list, `scontrol update nodename=…`. [`expand`] turns such an expression into the
//! node names; [`compress`] does the reverse.
//!
//! The syntax accepted by [`expand`]:
//! - items separated by commas (or whitespace) outside brackets: `a1,b2`;
//! - an item is literal text with any number of bracket groups; the groups multiply, the
//!   first varying slowest: `rack[1-2]-n[1-2]` → `rack1-n1 rack1-n2 rack2-n1 rack2-n2`;
//! - a bracket holds numbers and ranges separated by commas: `n[1-3,5]`;
//! - a range's width is the width of its low bound, so zero padding is kept:
//!   `n[008-010]` → `n008 n009 n010`, while `n[8-10]` → `n8 n9 n10`.
//!
//! Expansion is capped ([`MAX_EXPANSION`] names, or the limit given to [`expand_limited`]):
//! the size is computed before anything is allocated, so `n[0-99999999999]` is an error,
//! not gigabytes of memory.
//!
//! ```
//! use slurm_client::hostlist;
//! assert_eq!(hostlist::expand("n[1-3,5]").unwrap(), ["n1", "n2", "n3", "n5"]);
//! assert_eq!(hostlist::compress(["n3", "n1", "n2", "n5"]), "n[1-3,5]");
//! assert!(hostlist::expand("n[1-").unwrap_err().to_string().contains("n[1-"));
//! ```

use std::collections::BTreeMap;

/// The most names [`expand`] produces from one expression (about a million).
pub const MAX_EXPANSION: usize = 1 << 20;

/// Bound digits beyond this many are refused (keeps every number inside `u64`).
const MAX_DIGITS: usize = 18;

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
        HostlistError {
            part: part.to_owned(),
            reason: reason.into(),
        }
    }

    /// The part of the input that is wrong (an item, or the whole expression).
    pub fn part(&self) -> &str {
        &self.part
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Expands a hostlist expression into node names, in the expression's order (duplicates
/// kept). An empty or blank expression gives no names. At most [`MAX_EXPANSION`] names.
pub fn expand(expression: &str) -> Result<Vec<String>, HostlistError> {
    expand_limited(expression, MAX_EXPANSION)
}

/// [`expand`] with a custom cap on the number of names.
pub fn expand_limited(expression: &str, limit: usize) -> Result<Vec<String>, HostlistError> {
    let items = split_items(expression)?;
    let parsed = items
        .iter()
        .map(|item| parse_item(item))
        .collect::<Result<Vec<_>, _>>()?;
    let mut total: usize = 0;
    for (item, pieces) in items.iter().zip(&parsed) {
        let n = pieces
            .iter()
            .try_fold(1usize, |acc, p| acc.checked_mul(p.count()))
            .filter(|&n| n <= limit)
            .ok_or_else(|| {
                HostlistError::new(item, format!("expands to more than {limit} names"))
            })?;
        total = total
            .checked_add(n)
            .filter(|&t| t <= limit)
            .ok_or_else(|| {
                HostlistError::new(expression, format!("expands to more than {limit} names"))
            })?;
    }
    let mut out = Vec::with_capacity(total);
    for pieces in &parsed {
        expand_pieces(pieces, String::new(), &mut out);
    }
    Ok(out)
}

/// Compresses node names into one hostlist expression: names are deduplicated and
/// sorted, names that differ only in a trailing number share a bracket, and consecutive
/// numbers of the same width become ranges (`n[1-3,5]`, `n[008-010]`). The result
/// [`expand`]s to the same set of names. Names without a trailing number are kept as they
/// are; only the trailing number is bracketed (no multi-bracket output).
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

/// One piece of an item: literal text, or a bracket's ranges.
enum Piece {
    Text(String),
    Ranges(Vec<Range>),
}

struct Range {
    low: u64,
    high: u64,
    width: usize,
}

impl Piece {
    fn count(&self) -> usize {
        match self {
            Piece::Text(_) => 1,
            Piece::Ranges(ranges) => ranges
                .iter()
                .map(|r| {
                    usize::try_from(r.high - r.low)
                        .ok()
                        .and_then(|n| n.checked_add(1))
                })
                .try_fold(0usize, |acc, n| n.and_then(|n| acc.checked_add(n)))
                .unwrap_or(usize::MAX),
        }
    }
}

/// Splits at commas and whitespace outside brackets; checks bracket nesting.
fn split_items(expression: &str) -> Result<Vec<&str>, HostlistError> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in expression.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => {
                return Err(HostlistError::new(item_around(expression, i), "nested '['"));
            }
            ']' if depth == 1 => depth = 0,
            ']' => {
                return Err(HostlistError::new(
                    item_around(expression, i),
                    "']' without '['",
                ));
            }
            ',' | ' ' | '\t' | '\n' | '\r' if depth == 0 => {
                if start < i {
                    items.push(&expression[start..i]);
                }
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::new(&expression[start..], "'[' without ']'"));
    }
    if start < expression.len() {
        items.push(&expression[start..]);
    }
    Ok(items)
}

/// The comma/whitespace-separated stretch of `expression` around byte `at`, for errors.
fn item_around(expression: &str, at: usize) -> &str {
    let is_sep = |c: char| c == ',' || c.is_whitespace();
    let start = expression[..at].rfind(is_sep).map_or(0, |i| i + 1);
    let end = expression[at..]
        .find(is_sep)
        .map_or(expression.len(), |i| at + i);
    &expression[start..end]
}

fn parse_item(item: &str) -> Result<Vec<Piece>, HostlistError> {
    let mut pieces = Vec::new();
    let mut rest = item;
    while !rest.is_empty() {
        match rest.find('[') {
            None => {
                pieces.push(Piece::Text(rest.to_owned()));
                break;
            }
            Some(open) => {
                if open > 0 {
                    pieces.push(Piece::Text(rest[..open].to_owned()));
                }
                // split_items checked that a ']' follows.
                let close = open + rest[open..].find(']').expect("balanced");
                pieces.push(Piece::Ranges(parse_ranges(item, &rest[open + 1..close])?));
                rest = &rest[close + 1..];
            }
        }
    }
    Ok(pieces)
}

fn parse_ranges(item: &str, inner: &str) -> Result<Vec<Range>, HostlistError> {
    if inner.is_empty() {
        return Err(HostlistError::new(item, "empty brackets"));
    }
    inner
        .split(',')
        .map(|part| {
            let (low_s, high_s) = part.split_once('-').unwrap_or((part, part));
            let number = |s: &str| -> Result<u64, HostlistError> {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(HostlistError::new(
                        item,
                        format!("{part:?} is not a number or a range such as 1-4"),
                    ));
                }
                if s.len() > MAX_DIGITS {
                    return Err(HostlistError::new(
                        item,
                        format!("{s:?} has more than {MAX_DIGITS} digits"),
                    ));
                }
                Ok(s.parse().expect("digits"))
            };
            let (low, high) = (number(low_s)?, number(high_s)?);
            if low > high {
                return Err(HostlistError::new(
                    item,
                    format!("range {part:?} runs backwards"),
                ));
            }
            Ok(Range {
                low,
                high,
                width: low_s.len(),
            })
        })
        .collect()
}

fn expand_pieces(pieces: &[Piece], prefix: String, out: &mut Vec<String>) {
    let Some((first, rest)) = pieces.split_first() else {
        out.push(prefix);
        return;
    };
    match first {
        Piece::Text(text) => expand_pieces(rest, prefix + text, out),
        Piece::Ranges(ranges) => {
            for r in ranges {
                for n in r.low..=r.high {
                    expand_pieces(rest, format!("{prefix}{n:0w$}", w = r.width), out);
                }
            }
        }
    }
}

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
