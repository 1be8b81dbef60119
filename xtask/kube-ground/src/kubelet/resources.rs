//! Resource quantities ("500m", "4Gi", "1e3") and the resourceFieldRef values of the downward API.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// What each test node offers when a container sets no limit (the downward API falls back to the
/// node's allocatable, as the kubelet does).
pub const NODE_CPU: u32 = 4;
pub const NODE_MEMORY: u64 = 8 << 30;

/// A quantity in its base unit (cores, bytes).
pub fn parse(q: &str) -> Result<f64> {
    kube_support::quantity::parse(q).map_err(|e| anyhow::anyhow!(e))
}

/// `limits.cpu`, `requests.memory`, … of a container, divided by `divisor` and rounded up.
pub fn field(container: &Container, resource: &str, divisor: Option<&Quantity>) -> Result<String> {
    let (kind, name) = resource
        .split_once('.')
        .with_context(|| format!("resourceFieldRef {resource:?}"))?;
    let res = container.resources.as_ref();
    let set = match kind {
        "limits" => res.and_then(|r| r.limits.as_ref()),
        "requests" => res.and_then(|r| r.requests.as_ref()),
        _ => bail!("resourceFieldRef {resource:?}: expected limits.* or requests.*"),
    }
    .and_then(|m| m.get(name));
    let value = match (set, name) {
        (Some(q), _) => parse(&q.0)?,
        (None, "cpu") if kind == "limits" => f64::from(NODE_CPU),
        (None, "memory") if kind == "limits" => NODE_MEMORY as f64,
        (None, _) => 0.0,
    };
    let divisor = match divisor {
        Some(d) => parse(&d.0)?,
        None => 1.0,
    };
    if divisor <= 0.0 {
        bail!("resourceFieldRef {resource:?}: divisor must be positive");
    }
    Ok(format!("{}", (value / divisor).ceil() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse("500m").unwrap(), 0.5);
        assert_eq!(parse("4Gi").unwrap(), 4.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(parse("2").unwrap(), 2.0);
        assert_eq!(parse("1e3").unwrap(), 1000.0);
        assert_eq!(parse("128M").unwrap(), 128e6);
        assert!(parse("3 apples").is_err());
    }
}
