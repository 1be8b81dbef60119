//! Plain aligned columns, the way `squeue` and `sinfo` print.

use std::fmt::Write as _;

/// Rows under a header line, each column as wide as its widest cell.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (printed as given, conventionally UPPERCASE).
    pub fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are left empty, extra ones dropped.
    pub fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as text, every line ending in a newline, without trailing spaces.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let _ = write!(line, "{cell}{}", " ".repeat(w - width(cell)));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `Key: value` lines with the values aligned, for one object (`show` commands).
#[derive(Debug, Default)]
pub struct Details {
    pairs: Vec<(&'static str, String)>,
}

impl Details {
    pub fn new() -> Details {
        Details::default()
    }

    /// Adds a line; values that are empty or "-" are left out.
    pub fn add(&mut self, key: &'static str, value: impl Into<String>) -> &mut Details {
        let value = value.into();
        if !value.is_empty() && value != crate::format::NONE {
            self.pairs.push((key, value));
        }
        self
    }

    pub fn render(&self) -> String {
        let w = self.pairs.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
        let mut out = String::new();
        for (key, value) in &self.pairs {
            let _ = writeln!(out, "{key}:{}  {value}", " ".repeat(w - width(key)));
        }
        out
    }
}

fn width(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_without_trailing_spaces() {
        let mut t = Table::new(&["JOBID", "NAME", "STATE"]);
        t.row(vec!["7".into(), "a-long-name".into(), "RUNNING".into()]);
        t.row(vec!["12345".into(), "x".into()]);
        assert_eq!(
            t.render(),
            "JOBID  NAME         STATE\n7      a-long-name  RUNNING\n12345  x\n"
        );
    }

    #[test]
    fn details_skip_empty_values() {
        let mut d = Details::new();
        d.add("Id", "7")
            .add("Comment", "-")
            .add("Partition", "debug");
        assert_eq!(d.render(), "Id:         7\nPartition:  debug\n");
    }
}
