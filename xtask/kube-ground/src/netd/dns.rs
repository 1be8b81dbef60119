//! The DNS wire format, as much as an authoritative server of A records needs (RFC 1035): a query's
//! header and one question (names with compression pointers), and a response carrying A records.
//! Pure: no sockets.

use std::net::Ipv4Addr;

pub const TYPE_A: u16 = 1;
pub const TYPE_ANY: u16 = 255;
pub const CLASS_IN: u16 = 1;
const CLASS_ANY: u16 = 255;
/// What fits a UDP response without EDNS; a longer one is truncated, and the client asks over TCP.
pub const UDP_MAX: usize = 512;
const HEADER_LEN: usize = 12;
const QR: u16 = 0x8000;
const AA: u16 = 0x0400;
const TC: u16 = 0x0200;
const RD: u16 = 0x0100;
/// Where the question's name starts in every message: the answers point there.
const QUESTION_NAME_PTR: u16 = 0xc000 | HEADER_LEN as u16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rcode {
    NoError = 0,
    FormErr = 1,
    NxDomain = 3,
    NotImp = 4,
    Refused = 5,
}

/// A domain name as labels of raw bytes, in the case the client sent them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name(pub Vec<Vec<u8>>);

impl Name {
    /// Lower case, dot-separated, no trailing dot; `None` for a label that is not printable ASCII
    /// or holds a dot, which no cluster name has.
    pub fn to_key(&self) -> Option<String> {
        let mut out = String::new();
        for (i, label) in self.0.iter().enumerate() {
            if label.iter().any(|b| !b.is_ascii_graphic() || *b == b'.') {
                return None;
            }
            if i > 0 {
                out.push('.');
            }
            out.extend(label.iter().map(|b| b.to_ascii_lowercase() as char));
        }
        Some(out)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        for label in &self.0 {
            out.push(label.len() as u8);
            out.extend_from_slice(label);
        }
        out.push(0);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    pub name: Name,
    pub qtype: u16,
    pub qclass: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    pub flags: u16,
    pub question: Question,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not even a header, or a response: nothing to answer.
    Ignore,
    /// A header, but the rest is not one well-formed question.
    Malformed { id: u16, flags: u16 },
}

fn u16_at(msg: &[u8], pos: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.get(pos)?, *msg.get(pos + 1)?]))
}

/// Reads the name at `pos`; returns it and the position after it (after the first pointer, if
/// any).
fn read_name(msg: &[u8], mut pos: usize) -> Option<(Name, usize)> {
    let mut labels = Vec::new();
    let mut end = None;
    let mut wire_len = 1;
    // Each pointer must go before the place the previous one went (or the name's start), so
    // that no loop can be built.
    let mut limit = pos;
    loop {
        let len = *msg.get(pos)? as usize;
        match len & 0xc0 {
            0x00 if len == 0 => break,
            0x00 => {
                let label = msg.get(pos + 1..pos + 1 + len)?;
                wire_len += len + 1;
                if wire_len > 255 {
                    return None;
                }
                labels.push(label.to_vec());
                pos += 1 + len;
            }
            0xc0 => {
                let target = (u16_at(msg, pos)? & 0x3fff) as usize;
                if target >= limit {
                    return None;
                }
                end.get_or_insert(pos + 2);
                (pos, limit) = (target, target);
            }
            _ => return None,
        }
    }
    Some((Name(labels), end.unwrap_or(pos + 1)))
}

/// Parses a query with exactly one question; other sections are ignored.
pub fn parse_query(msg: &[u8]) -> Result<Query, ParseError> {
    let (Some(id), Some(flags)) = (u16_at(msg, 0), u16_at(msg, 2)) else {
        return Err(ParseError::Ignore);
    };
    if msg.len() < HEADER_LEN || flags & QR != 0 {
        return Err(ParseError::Ignore);
    }
    let malformed = ParseError::Malformed { id, flags };
    if u16_at(msg, 4) != Some(1) {
        return Err(malformed);
    }
    let Some((name, pos)) = read_name(msg, HEADER_LEN) else {
        return Err(malformed);
    };
    let (Some(qtype), Some(qclass)) = (u16_at(msg, pos), u16_at(msg, pos + 2)) else {
        return Err(malformed);
    };
    Ok(Query {
        id,
        flags,
        question: Question {
            name,
            qtype,
            qclass,
        },
    })
}

fn opcode(flags: u16) -> u16 {
    (flags >> 11) & 0xf
}

fn header(id: u16, query_flags: u16, aa: bool, rcode: Rcode, counts: [u16; 4]) -> Vec<u8> {
    let mut flags = QR | (query_flags & (0x7800 | RD)) | rcode as u16;
    if aa {
        flags |= AA;
    }
    let mut out = Vec::with_capacity(UDP_MAX);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    for c in counts {
        out.extend_from_slice(&c.to_be_bytes());
    }
    out
}

/// A response to `q`: the question, then one A record per address (named by a pointer to the
/// question). If it would be longer than `max_len`, the answers are left out and TC is set.
pub fn encode_response(
    q: &Query,
    aa: bool,
    rcode: Rcode,
    answers: &[Ipv4Addr],
    ttl: u32,
    max_len: usize,
) -> Vec<u8> {
    let mut out = header(q.id, q.flags, aa, rcode, [1, answers.len() as u16, 0, 0]);
    q.question.name.encode(&mut out);
    out.extend_from_slice(&q.question.qtype.to_be_bytes());
    out.extend_from_slice(&q.question.qclass.to_be_bytes());
    let question_end = out.len();
    for ip in answers {
        out.extend_from_slice(&QUESTION_NAME_PTR.to_be_bytes());
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&ip.octets());
    }
    if out.len() > max_len {
        out.truncate(question_end);
        let flags = u16_at(&out, 2).unwrap_or(0) | TC;
        out[2..4].copy_from_slice(&flags.to_be_bytes());
        out[6..8].copy_from_slice(&0u16.to_be_bytes());
    }
    out
}

/// What the name server knows about a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Outside the zone this server is authoritative for.
    Refused,
    NxDomain,
    /// The name exists; its A records (none for a name that only has names below it).
    Exists(Vec<Ipv4Addr>),
}

/// The response to one message, or `None` for a message not to answer (too short, a response).
pub fn respond(
    msg: &[u8],
    lookup: impl Fn(&str) -> Lookup,
    ttl: u32,
    max_len: usize,
) -> Option<Vec<u8>> {
    let q = match parse_query(msg) {
        Ok(q) => q,
        Err(ParseError::Ignore) => return None,
        Err(ParseError::Malformed { id, flags }) => {
            return Some(header(id, flags, false, Rcode::FormErr, [0; 4]));
        }
    };
    if opcode(q.flags) != 0 {
        return Some(encode_response(&q, false, Rcode::NotImp, &[], ttl, max_len));
    }
    let found = if matches!(q.question.qclass, CLASS_IN | CLASS_ANY) {
        q.question
            .name
            .to_key()
            .map_or(Lookup::NxDomain, |n| lookup(&n))
    } else {
        Lookup::Refused
    };
    let wants_a = matches!(q.question.qtype, TYPE_A | TYPE_ANY);
    let (aa, rcode, answers) = match found {
        Lookup::Refused => (false, Rcode::Refused, Vec::new()),
        Lookup::NxDomain => (true, Rcode::NxDomain, Vec::new()),
        Lookup::Exists(ips) if wants_a => (true, Rcode::NoError, ips),
        Lookup::Exists(_) => (true, Rcode::NoError, Vec::new()),
    };
    Some(encode_response(&q, aa, rcode, &answers, ttl, max_len))
}

#[cfg(test)]
pub mod testing {
    //! A client's side, for the tests: a query to send and a response to read.
    use super::*;

    pub fn encode_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
        let mut out = header(id, RD, false, Rcode::NoError, [1, 0, 0, 0]);
        out[2..4].copy_from_slice(&RD.to_be_bytes());
        let labels = name
            .trim_end_matches('.')
            .split('.')
            .map(|l| l.as_bytes().to_vec())
            .collect();
        Name(labels).encode(&mut out);
        out.extend_from_slice(&qtype.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out
    }

    #[derive(Debug, PartialEq, Eq)]
    pub struct Decoded {
        pub id: u16,
        pub flags: u16,
        pub rcode: u16,
        pub question: Option<Question>,
        /// (name, ttl, address) of each A record.
        pub answers: Vec<(String, u32, Ipv4Addr)>,
    }

    pub fn decode_response(msg: &[u8]) -> Decoded {
        let flags = u16_at(msg, 2).unwrap();
        let (qd, an) = (u16_at(msg, 4).unwrap(), u16_at(msg, 6).unwrap());
        let mut pos = HEADER_LEN;
        let mut question = None;
        if qd == 1 {
            let (name, p) = read_name(msg, pos).unwrap();
            question = Some(Question {
                name,
                qtype: u16_at(msg, p).unwrap(),
                qclass: u16_at(msg, p + 2).unwrap(),
            });
            pos = p + 4;
        }
        let mut answers = Vec::new();
        for _ in 0..an {
            let (name, p) = read_name(msg, pos).unwrap();
            assert_eq!(u16_at(msg, p), Some(TYPE_A));
            assert_eq!(u16_at(msg, p + 2), Some(CLASS_IN));
            let ttl = u32::from_be_bytes(msg[p + 4..p + 8].try_into().unwrap());
            assert_eq!(u16_at(msg, p + 8), Some(4));
            let ip = Ipv4Addr::new(msg[p + 10], msg[p + 11], msg[p + 12], msg[p + 13]);
            answers.push((name.to_key().unwrap(), ttl, ip));
            pos = p + 14;
        }
        assert_eq!(pos, msg.len(), "trailing bytes");
        Decoded {
            id: u16_at(msg, 0).unwrap(),
            flags,
            rcode: flags & 0xf,
            question,
            answers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn lookup(name: &str) -> Lookup {
        match name {
            "web.default.svc.cluster.local" => Lookup::Exists(vec![Ipv4Addr::new(10, 96, 0, 7)]),
            "svc.cluster.local" => Lookup::Exists(vec![]),
            n if n.ends_with(".cluster.local") => Lookup::NxDomain,
            _ => Lookup::Refused,
        }
    }

    #[test]
    fn query_round_trip_and_a_answer() {
        let q = encode_query(0xbeef, "Web.default.svc.cluster.local.", TYPE_A);
        let parsed = parse_query(&q).unwrap();
        assert_eq!(parsed.id, 0xbeef);
        assert_eq!(parsed.question.qtype, TYPE_A);
        assert_eq!(
            parsed.question.name.to_key().as_deref(),
            Some("web.default.svc.cluster.local")
        );
        let r = decode_response(&respond(&q, lookup, 5, UDP_MAX).unwrap());
        assert_eq!(r.id, 0xbeef);
        assert_eq!(r.rcode, Rcode::NoError as u16);
        assert_ne!(r.flags & QR, 0);
        assert_ne!(r.flags & AA, 0);
        assert_ne!(r.flags & RD, 0, "RD is copied");
        // The question comes back in the case it was asked in.
        assert_eq!(r.question.unwrap().name, parsed.question.name);
        assert_eq!(
            r.answers,
            [(
                "web.default.svc.cluster.local".to_string(),
                5,
                Ipv4Addr::new(10, 96, 0, 7)
            )]
        );
    }

    #[test]
    fn rcodes_per_kind_of_name_and_type() {
        let ask = |name: &str, qtype| {
            let r = decode_response(
                &respond(&encode_query(1, name, qtype), lookup, 5, UDP_MAX).unwrap(),
            );
            (r.rcode, r.answers.len())
        };
        let aaaa = 28;
        assert_eq!(ask("web.default.svc.cluster.local", aaaa), (0, 0));
        assert_eq!(ask("web.default.svc.cluster.local", TYPE_ANY), (0, 1));
        assert_eq!(ask("svc.cluster.local", TYPE_A), (0, 0));
        assert_eq!(ask("nope.default.svc.cluster.local", TYPE_A), (3, 0));
        assert_eq!(ask("example.com", TYPE_A), (5, 0));
    }

    #[test]
    fn names_follow_backward_pointers() {
        // A second name ("web.default.svc" + a pointer to the first question's "cluster.local"),
        // as a message with more than one name carries it.
        let mut msg = encode_query(7, "cluster.local", TYPE_A);
        let name_start = msg.len();
        msg.extend_from_slice(b"\x03web\x07default\x03svc");
        msg.extend_from_slice(&QUESTION_NAME_PTR.to_be_bytes());
        msg.extend_from_slice(&TYPE_A.to_be_bytes());
        let (name, end) = read_name(&msg, name_start).unwrap();
        assert_eq!(
            name.to_key().as_deref(),
            Some("web.default.svc.cluster.local")
        );
        assert_eq!(end, msg.len() - 2, "the name ends after the pointer");
    }

    #[test]
    fn question_with_a_forward_pointer_is_malformed() {
        let mut msg = encode_query(9, "x", TYPE_A);
        msg.truncate(HEADER_LEN);
        msg.extend_from_slice(b"\x03web");
        msg.extend_from_slice(&(0xc000u16 | 18).to_be_bytes());
        msg.extend_from_slice(b"\x07default\x00");
        msg.extend_from_slice(&TYPE_A.to_be_bytes());
        msg.extend_from_slice(&CLASS_IN.to_be_bytes());
        assert!(matches!(
            parse_query(&msg),
            Err(ParseError::Malformed { id: 9, .. })
        ));
        let r = decode_response(&respond(&msg, lookup, 5, UDP_MAX).unwrap());
        assert_eq!(
            (r.id, r.rcode, r.question),
            (9, Rcode::FormErr as u16, None)
        );
    }

    #[test]
    fn loops_and_bad_labels_are_malformed() {
        let mut msg = encode_query(3, "x", TYPE_A);
        msg.truncate(HEADER_LEN);
        msg.extend_from_slice(&(0xc000u16 | HEADER_LEN as u16).to_be_bytes());
        msg.extend_from_slice(&[0, 1, 0, 1]);
        assert!(parse_query(&msg).is_err(), "a pointer to itself");
        let mut msg = encode_query(3, "x", TYPE_A);
        msg[HEADER_LEN] = 0x40;
        assert!(parse_query(&msg).is_err(), "extended label type");
        assert_eq!(parse_query(&msg[..5]), Err(ParseError::Ignore));
        let mut response = encode_query(3, "x", TYPE_A);
        response[2] |= 0x80;
        assert_eq!(respond(&response, lookup, 5, UDP_MAX), None);
    }

    #[test]
    fn long_answers_truncate_over_udp() {
        let ips: Vec<Ipv4Addr> = (0..40).map(|i| Ipv4Addr::new(10, 244, 0, i)).collect();
        let q = parse_query(&encode_query(5, "many.default.svc.cluster.local", TYPE_A)).unwrap();
        let udp = encode_response(&q, true, Rcode::NoError, &ips, 5, UDP_MAX);
        let r = decode_response(&udp);
        assert_ne!(r.flags & TC, 0);
        assert!(r.answers.is_empty());
        let tcp = encode_response(&q, true, Rcode::NoError, &ips, 5, u16::MAX as usize);
        assert_eq!(decode_response(&tcp).answers.len(), 40);
    }
}
