//! Gzip bodies laid together from parts compressed beforehand.
//!
//! Each part (one source's rendered text) is deflated once, when it changes, and ends with
//! a sync flush: a non-final block ending on a byte boundary, after which a deflate stream
//! may go on with blocks from another compressor (RFC 1951 §3.2.3; back-references never
//! reach into an earlier part). A scrape then only adds the gzip header, the few lines
//! computed per scrape as a final stored (uncompressed) block, and the trailer, whose CRC-32
//! is combined from the parts' CRCs (RFC 1952). The result is one ordinary gzip member, which
//! every client decodes, including those that stop after the first member.

use bytes::Bytes;
use crc32fast::Hasher;
use flate2::{Compress, Compression, FlushCompress};

/// The compression level: the fastest, as the text is compressed again whenever it changes.
pub const LEVEL: u32 = 1;

/// One part: raw deflate data ending with a sync flush, with the CRC-32 and length of the
/// text it holds.
#[derive(Clone, Debug, Default)]
pub struct Deflated {
    data: Bytes,
    crc: u32,
    len: u64,
}

impl Deflated {
    /// Compresses `text` at `level` (0–9).
    pub fn new(text: &[u8], level: u32) -> Deflated {
        let mut compress = Compress::new(Compression::new(level), false);
        let mut out = Vec::with_capacity(text.len() / 4 + 64);
        loop {
            let consumed = compress.total_in() as usize;
            compress
                .compress_vec(&text[consumed..], &mut out, FlushCompress::Sync)
                .expect("deflating into memory cannot fail");
            // The flush is complete once all input is taken and the output was not filled.
            if compress.total_in() as usize == text.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity().max(64 * 1024));
        }
        Deflated {
            data: Bytes::from(out),
            crc: crc32fast::hash(text),
            len: text.len() as u64,
        }
    }

    /// Compressed size in bytes.
    pub fn compressed_len(&self) -> usize {
        self.data.len()
    }
}

/// A whole body's parts, in order; [`GzipBody::finish`] makes the gzip stream.
#[derive(Clone, Debug, Default)]
pub struct GzipBody {
    parts: Vec<Bytes>,
    crc: u32,
    len: u64,
}

/// Gzip header: magic, deflate, no flags, no time, no extra flags, unknown OS.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

impl GzipBody {
    /// Appends a part.
    pub fn push(&mut self, part: &Deflated) {
        self.crc = combine(self.crc, self.len, part.crc, part.len);
        self.len += part.len;
        self.parts.push(part.data.clone());
    }

    /// Compressed size of the parts.
    pub fn compressed_len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// The gzip stream of the parts followed by `tail` (stored uncompressed), as chunks.
    pub fn finish(&self, tail: &[u8]) -> Vec<Bytes> {
        let mut chunks = Vec::with_capacity(self.parts.len() + 3);
        chunks.push(Bytes::from_static(&HEADER));
        chunks.extend(self.parts.iter().cloned());
        let mut end = stored_final(tail);
        let crc = combine(self.crc, self.len, crc32fast::hash(tail), tail.len() as u64);
        end.extend_from_slice(&crc.to_le_bytes());
        // ISIZE is the length modulo 2^32.
        end.extend_from_slice(&((self.len + tail.len() as u64) as u32).to_le_bytes());
        chunks.push(Bytes::from(end));
        chunks
    }
}

/// `data` as stored blocks, the last one final. Starts on a byte boundary, which the sync
/// flush of every part guarantees.
fn stored_final(data: &[u8]) -> Vec<u8> {
    const MAX: usize = u16::MAX as usize;
    let mut out = Vec::with_capacity(data.len() + 5 * (data.len() / MAX + 1) + 8);
    let mut blocks = data.chunks(MAX).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        // BFINAL in bit 0, BTYPE 00 (stored), the rest of the byte padding.
        out.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out
}

/// The CRC-32 of two texts laid end to end, from theirs and their lengths.
fn combine(crc: u32, len: u64, next_crc: u32, next_len: u64) -> u32 {
    let mut first = Hasher::new_with_initial_len(crc, len);
    first.combine(&Hasher::new_with_initial_len(next_crc, next_len));
    first.finalize()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(chunks: &[Bytes]) -> Vec<u8> {
        let gz: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        let mut out = Vec::new();
        // A single-member decoder: the whole body must be one member.
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut out)
            .expect("valid gzip");
        out
    }

    #[test]
    fn parts_and_tail_make_one_gzip_member() {
        let a = "slurm_up 1\n".repeat(1000);
        let b: String = (0..5000)
            .map(|i| format!("slurm_x{{n=\"{i}\"}} {i}\n"))
            .collect();
        let mut body = GzipBody::default();
        for part in [&a, "", &b] {
            body.push(&Deflated::new(part.as_bytes(), LEVEL));
        }
        assert!(body.compressed_len() < (a.len() + b.len()) / 2);
        let tail = "slurm_exporter_snapshot_age_seconds 0.5\n# EOF\n";
        assert_eq!(
            gunzip(&body.finish(tail.as_bytes())),
            format!("{a}{b}{tail}").as_bytes()
        );
        assert_eq!(gunzip(&body.finish(b"")), format!("{a}{b}").as_bytes());
        assert_eq!(gunzip(&GzipBody::default().finish(b"")), b"");
    }

    #[test]
    fn long_tail_spans_several_stored_blocks() {
        let tail = vec![b'x'; 150_000];
        let mut body = GzipBody::default();
        body.push(&Deflated::new(b"head\n", 9));
        let mut expected = b"head\n".to_vec();
        expected.extend_from_slice(&tail);
        assert_eq!(gunzip(&body.finish(&tail)), expected);
    }
}
