//! Hollow pods' addresses: from 10.245.0.0/16, which no namespace of the ground holds and nothing
//! routes (the real pods' network is 10.244.0.0/16), so a client that tries one gets no answer,
//! as from a pod on a node it cannot reach. Kept in memory: a restarted hollow process takes the
//! addresses its pods already show back first.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

const FIRST: u32 = u32::from_be_bytes([10, 245, 0, 1]);
const LAST: u32 = u32::from_be_bytes([10, 245, 255, 254]);

#[derive(Default)]
pub struct Ips {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    used: HashSet<u32>,
    /// Where the next search starts: addresses are handed out round the range, so a released
    /// one is not reused at once.
    next: u32,
}

impl Ips {
    /// `shown` (what the pod's status already says) when it is free and in the range, else the
    /// next free address; `None` when all 65,534 are taken.
    pub fn take(&self, shown: Option<&str>) -> Option<Ipv4Addr> {
        let mut inner = self.inner.lock().expect("not poisoned");
        let shown = shown
            .and_then(|s| s.parse::<Ipv4Addr>().ok())
            .map(u32::from)
            .filter(|ip| (FIRST..=LAST).contains(ip));
        if let Some(ip) = shown
            && inner.used.insert(ip)
        {
            return Some(Ipv4Addr::from(ip));
        }
        let size = LAST - FIRST + 1;
        for i in 0..size {
            let ip = FIRST + (inner.next + i) % size;
            if inner.used.insert(ip) {
                inner.next = (ip - FIRST + 1) % size;
                return Some(Ipv4Addr::from(ip));
            }
        }
        None
    }

    pub fn release(&self, ip: Ipv4Addr) {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.used.remove(&u32::from(ip));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_go_round_and_shown_ones_come_back() {
        let ips = Ips::default();
        let a = ips.take(None).unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 245, 0, 1));
        assert_eq!(ips.take(None).unwrap(), Ipv4Addr::new(10, 245, 0, 2));
        ips.release(a);
        assert_eq!(ips.take(None).unwrap(), Ipv4Addr::new(10, 245, 0, 3));
        assert_eq!(
            ips.take(Some("10.245.7.7")).unwrap(),
            Ipv4Addr::new(10, 245, 7, 7)
        );
        // Taken already, or outside the range: the next free one.
        assert_eq!(
            ips.take(Some("10.245.7.7")).unwrap(),
            Ipv4Addr::new(10, 245, 0, 4)
        );
        assert_eq!(
            ips.take(Some("10.244.0.9")).unwrap(),
            Ipv4Addr::new(10, 245, 0, 5)
        );
    }
}
