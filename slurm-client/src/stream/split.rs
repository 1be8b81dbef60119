//! Cutting a JSON body, as it arrives chunk by chunk, into the elements of one top-level
//! array (`jobs[]`) and everything else.
//!
//! [`Split`] only follows the JSON structure (strings, nesting, the top-level keys); it does
//! not check the syntax. Each element is handed out as its own bytes, to be decoded (and so
//! checked) on its own, and the rest of the body — the top-level object with that array left
//! empty, e.g. `{"jobs":[],"last_update":…,"meta":…,"errors":[]}` — is kept for the
//! ordinary decoding at the end. Memory is one element plus the rest, never the whole body.
//!
//! A body whose top level is not an object is kept whole (it is not a listing, and its
//! decoding says what it is instead).

use memchr::memchr2;

/// The splitter's state between chunks.
pub(crate) struct Split {
    /// The top-level key whose array is streamed, with its closing quote (`jobs"`).
    key: Vec<u8>,
    rest: Vec<u8>,
    item: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    top: Top,
    /// At depth 1 of the top object, whether the next string is a key.
    expect_key: bool,
    /// The text of the depth-1 key being read (`Some` while inside it).
    key_text: Option<Vec<u8>>,
    /// The last depth-1 key was the streamed one.
    key_matches: bool,
    array: Array,
    /// A `,` separated the last element from the next, which has not started yet.
    comma: bool,
    items: usize,
    bytes: u64,
    /// Where the streamed array's `[` is in the body.
    array_at: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Top {
    Unknown,
    Object,
    Other,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Array {
    /// Not seen yet.
    Before,
    /// The streamed key and its `:` were read; its value comes next.
    Awaiting,
    /// Inside the array.
    Inside,
    /// Read (or the key's value was not an array); later occurrences are kept as they are.
    Done,
}

/// Where a byte goes.
#[derive(Clone, Copy)]
enum Dest {
    Rest,
    Item,
}

/// The body is cut in a way no JSON value can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed {
    /// What is wrong, in words.
    pub message: String,
    /// Elements handed out before.
    pub items: usize,
}

impl Split {
    /// A splitter streaming the elements of the array under the top-level `key`.
    pub fn new(key: &str) -> Split {
        let mut quoted = key.as_bytes().to_vec();
        quoted.push(b'"');
        Split {
            key: quoted,
            rest: Vec::new(),
            item: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            top: Top::Unknown,
            expect_key: false,
            key_text: None,
            key_matches: false,
            array: Array::Before,
            comma: false,
            items: 0,
            bytes: 0,
            array_at: None,
        }
    }

    /// The offset in the body of the streamed array's `[`, once it was fed.
    pub fn array_start(&self) -> Option<u64> {
        self.array_at
    }

    /// Elements handed out so far.
    pub fn items(&self) -> usize {
        self.items
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes held now: the rest of the body so far and the element being read.
    pub fn buffered(&self) -> u64 {
        (self.rest.len() + self.item.len()) as u64
    }

    /// Reads one more chunk, handing each element completed in it to `each` (its bytes,
    /// possibly with whitespace after it).
    pub fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&[u8])) -> Result<(), Malformed> {
        self.bytes += chunk.len() as u64;
        let mut i = 0;
        while i < chunk.len() {
            if self.in_string {
                i = self.string_run(chunk, i);
                continue;
            }
            let b = chunk[i];
            i += 1;
            match b {
                b'"' => {
                    let dest = self.dest();
                    self.settle_awaiting();
                    self.push(dest, b);
                    self.in_string = true;
                    if self.depth == 1 && self.top == Top::Object && self.expect_key {
                        self.key_text = Some(Vec::new());
                    }
                }
                b'{' | b'[' => {
                    self.open(b);
                    if self.array == Array::Inside && self.array_at.is_none() {
                        self.array_at = Some(self.bytes - chunk.len() as u64 + i as u64 - 1);
                    }
                }
                b'}' | b']' => {
                    if self.array == Array::Inside && self.depth == 2 && b == b']' {
                        self.end_item(&mut each, true)?;
                        self.array = Array::Done;
                        self.rest.push(b);
                        self.depth = 1;
                    } else {
                        let dest = self.dest();
                        self.push(dest, b);
                        self.depth = self.depth.saturating_sub(1);
                    }
                }
                b',' if self.array == Array::Inside && self.depth == 2 => {
                    self.end_item(&mut each, false)?;
                    self.comma = true;
                }
                b',' if self.depth == 1 && self.top == Top::Object => {
                    self.expect_key = true;
                    self.rest.push(b);
                }
                b':' if self.depth == 1 && self.top == Top::Object => {
                    self.expect_key = false;
                    if self.key_matches && self.array == Array::Before {
                        self.array = Array::Awaiting;
                    }
                    self.rest.push(b);
                }
                b' ' | b'\n' | b'\r' | b'\t' => {
                    let dest = self.dest();
                    self.push(dest, b);
                }
                _ => {
                    let dest = self.dest();
                    self.settle_awaiting();
                    self.push(dest, b);
                }
            }
        }
        Ok(())
    }

    /// The rest of the body, once the whole body was fed; an error if the body stopped in
    /// the middle of a value.
    pub fn finish(self) -> Result<Vec<u8>, Malformed> {
        if self.in_string || self.depth > 0 || !self.item.is_empty() {
            return Err(Malformed {
                message: format!(
                    "the body ends in the middle of a JSON value (after {} bytes and {} complete {} elements)",
                    self.bytes,
                    self.items,
                    String::from_utf8_lossy(&self.key[..self.key.len() - 1]),
                ),
                items: self.items,
            });
        }
        Ok(self.rest)
    }

    /// Reads string bytes from `i` up to the string's end or the chunk's; returns the next index.
    fn string_run(&mut self, chunk: &[u8], i: usize) -> usize {
        let dest = self.dest();
        if self.escaped {
            self.escaped = false;
            self.push_string(dest, &chunk[i..i + 1]);
            return i + 1;
        }
        match memchr2(b'"', b'\\', &chunk[i..]) {
            None => {
                self.push_string(dest, &chunk[i..]);
                chunk.len()
            }
            Some(k) => {
                let end = i + k + 1;
                self.push_string(dest, &chunk[i..end]);
                if chunk[end - 1] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                    if let Some(text) = self.key_text.take() {
                        self.key_matches = text == self.key;
                    }
                }
                end
            }
        }
    }

    fn open(&mut self, b: u8) {
        if self.depth == 0 && self.top == Top::Unknown {
            self.top = if b == b'{' { Top::Object } else { Top::Other };
            self.expect_key = b == b'{';
            self.rest.push(b);
            self.depth = 1;
            return;
        }
        if self.array == Array::Awaiting && self.depth == 1 && b == b'[' {
            self.array = Array::Inside;
            self.comma = false;
            self.rest.push(b);
            self.depth = 2;
            return;
        }
        let dest = self.dest();
        self.settle_awaiting();
        self.push(dest, b);
        self.depth += 1;
    }

    /// After the streamed key, anything but `[` (or whitespace) means its value is not an
    /// array: it is kept in the rest as it is.
    fn settle_awaiting(&mut self) {
        if self.array == Array::Awaiting {
            self.array = Array::Done;
        }
    }

    /// Where a byte goes: inside the array, everything but the separators (handled apart)
    /// belongs to an element.
    fn dest(&self) -> Dest {
        if self.array == Array::Inside {
            Dest::Item
        } else {
            Dest::Rest
        }
    }

    fn push(&mut self, dest: Dest, b: u8) {
        match dest {
            Dest::Rest => self.rest.push(b),
            Dest::Item => {
                if !(self.item.is_empty() && b.is_ascii_whitespace()) {
                    self.item.push(b);
                }
            }
        }
    }

    fn push_string(&mut self, dest: Dest, bytes: &[u8]) {
        if let Some(text) = &mut self.key_text {
            text.extend_from_slice(bytes);
        }
        match dest {
            Dest::Rest => self.rest.extend_from_slice(bytes),
            Dest::Item => self.item.extend_from_slice(bytes),
        }
    }

    /// An element ends at a `,` or at the array's `]` (`closing`).
    fn end_item(&mut self, each: &mut impl FnMut(&[u8]), closing: bool) -> Result<(), Malformed> {
        if self.item.is_empty() {
            // `[]` is fine; `[,` `,,` and `,]` are not.
            if closing && !self.comma {
                return Ok(());
            }
            return Err(Malformed {
                message: format!(
                    "a missing element in the {} array (after {} elements)",
                    String::from_utf8_lossy(&self.key[..self.key.len() - 1]),
                    self.items
                ),
                items: self.items,
            });
        }
        self.comma = false;
        each(&self.item);
        self.items += 1;
        self.item.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The elements and the rest of `body` fed in chunks of `size` bytes.
    fn split(body: &str, size: usize) -> Result<(Vec<String>, String), Malformed> {
        let mut split = Split::new("jobs");
        let mut items = Vec::new();
        for chunk in body.as_bytes().chunks(size) {
            split.feed(chunk, |item| {
                items.push(String::from_utf8(item.to_vec()).unwrap().trim().to_string())
            })?;
        }
        let at = split.array_start();
        let rest = split.finish()?;
        if let Some(at) = at {
            assert_eq!(
                &body[at as usize..at as usize + 1],
                "[",
                "array_start of {body}"
            );
        }
        Ok((items, String::from_utf8(rest).unwrap()))
    }

    fn every_size(body: &str) -> (Vec<String>, String) {
        let whole = split(body, body.len().max(1)).unwrap();
        for size in 1..16 {
            assert_eq!(split(body, size).unwrap(), whole, "chunks of {size}");
        }
        whole
    }

    #[test]
    fn elements_and_rest() {
        let body = r#" {"meta": {"jobs": [9]}, "jobs" : [ {"job_id": 1, "name": "a]\"}{,"},
            {"job_id": 2, "x": [[1], {"y": "\\"}]} ,7, "s", null ], "errors": [], "w": "jobs"} "#;
        let (items, rest) = every_size(body);
        assert_eq!(
            items,
            [
                r#"{"job_id": 1, "name": "a]\"}{,"}"#,
                r#"{"job_id": 2, "x": [[1], {"y": "\\"}]}"#,
                "7",
                r#""s""#,
                "null"
            ]
        );
        let rest: serde_json::Value = serde_json::from_str(&rest).unwrap();
        assert_eq!(
            rest,
            serde_json::json!({"meta": {"jobs": [9]}, "jobs": [], "errors": [], "w": "jobs"})
        );
    }

    #[test]
    fn only_the_top_level_key_is_streamed() {
        let body =
            r#"{"x": {"jobs": [1, 2]}, "jobs_x": [3], "jobs": [], "last_update": {"number": 5}}"#;
        let (items, rest) = every_size(body);
        assert!(items.is_empty());
        assert_eq!(rest.replace(' ', ""), body.replace(' ', ""));
    }

    #[test]
    fn other_shapes_are_kept_whole() {
        for body in [
            r#"{"jobs": null, "errors": [{"error_number": 1}]}"#,
            r#"{"jobs": {"a": [1]}}"#,
            "[1, 2]",
            "7",
            "Authentication failure",
            "",
        ] {
            let (items, rest) = every_size(body);
            assert!(items.is_empty(), "{body}");
            assert_eq!(rest, body);
        }
    }

    #[test]
    fn a_body_cut_off_is_malformed() {
        let body = r#"{"jobs": [{"job_id": 1}, {"job_id": 2}, {"job_id"#;
        let err = split(body, 5).unwrap_err();
        assert_eq!(err.items, 2);
        assert!(
            err.message.contains("ends in the middle"),
            "{}",
            err.message
        );
        assert!(split(r#"{"jobs": [1, 2]"#, 3).is_err());
        assert!(split(r#"{"jobs": [1], "meta": "x"#, 3).is_err());
        assert!(
            split(r#"{"jobs": [1,]}"#, 3)
                .unwrap_err()
                .message
                .contains("missing")
        );
        assert!(split(r#"{"jobs": [,1]}"#, 3).is_err());
    }
}
