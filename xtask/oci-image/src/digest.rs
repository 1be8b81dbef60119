//! `sha256:<hex>` digests and a writer that computes one while it writes.

use std::io::{self, Write};

use sha2::{Digest as _, Sha256};

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hex part of a `sha256:` digest, checked so it can name a file safely.
pub(crate) fn hex_part(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then_some(hex)
}

/// Passes bytes through to `inner`, hashing and counting them.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            written: 0,
        }
    }

    /// The inner writer, the digest and the number of bytes written.
    pub fn finish(self) -> (W, String, u64) {
        let digest = format!("sha256:{}", hex(&self.hasher.finalize()));
        (self.inner, digest, self.written)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes everything read from `reader`.
pub(crate) fn sha256_reader(mut reader: impl io::Read) -> io::Result<String> {
    let mut hasher = HashingWriter::new(io::sink());
    io::copy(&mut reader, &mut hasher)?;
    Ok(hasher.finish().1)
}
