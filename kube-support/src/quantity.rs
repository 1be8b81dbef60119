//! Kubernetes resource quantities ("500m", "4Gi", "1e3") in their base unit (cores, bytes).

/// `q` in its base unit, or why it is not a quantity.
pub fn parse(q: &str) -> Result<f64, String> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let not_a_quantity = || format!("{q:?} is not a Kubernetes quantity");
    let number: f64 = number.parse().map_err(|_| not_a_quantity())?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().map_err(|_| not_a_quantity())?;
            10f64.powi(e)
        }
        _ => return Err(not_a_quantity()),
    };
    if !number.is_finite() || number < 0.0 {
        return Err(not_a_quantity());
    }
    Ok(number * factor)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn units() {
        assert_eq!(parse("500m").unwrap(), 0.5);
        assert_eq!(parse("2").unwrap(), 2.0);
        assert_eq!(parse("1Gi").unwrap(), 1073741824.0);
        assert_eq!(parse("128M").unwrap(), 128e6);
        assert_eq!(parse("1e3").unwrap(), 1000.0);
        assert!(parse("lots").is_err());
        assert!(parse("-1").is_err());
        assert!(parse("1Qi").unwrap_err().contains("1Qi"));
    }
}
