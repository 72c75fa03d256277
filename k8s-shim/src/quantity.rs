//! Kubernetes resource quantities ("500m", "4Gi", "1.5", "2e3") in the
//! framework's units.

/// Parse a quantity into a value scaled by `scale` (1000 for millicores,
/// 1 for plain counts), rounding up as Kubernetes does for requests.
///
/// # Errors
/// A message naming the quantity when it is not valid.
pub fn parse(q: &str, scale: f64) -> Result<f64, String> {
    let q = q.trim();
    let bad = || format!("invalid quantity {q:?}");
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let (num, suffix) = if suffix.starts_with(['e', 'E']) && suffix.len() > 1 {
        // Decimal exponent: the whole thing is a float.
        (q, "")
    } else {
        (num, suffix)
    };
    let value: f64 = num.parse().map_err(|_| bad())?;
    let mult = match suffix {
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
        _ => return Err(bad()),
    };
    let v = value * mult * scale;
    if !v.is_finite() || v < 0.0 {
        return Err(bad());
    }
    Ok(v)
}

/// CPU in millicores.
pub fn cpu_milli(q: &str) -> Result<u64, String> {
    parse(q, 1000.0).map(|v| v.ceil() as u64)
}

/// A value in the resource's base unit (bytes, a count), rounded up.
pub fn value(q: &str) -> Result<u64, String> {
    parse(q, 1.0).map(|v| v.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities_become_millicores() {
        assert_eq!(cpu_milli("500m").unwrap(), 500);
        assert_eq!(cpu_milli("2").unwrap(), 2000);
        assert_eq!(cpu_milli("1.5").unwrap(), 1500);
        assert_eq!(cpu_milli("2e3").unwrap(), 2_000_000);
    }

    #[test]
    fn values_are_in_the_base_unit_rounded_up() {
        assert_eq!(value("10Gi").unwrap(), 10 << 30);
        assert_eq!(value("2").unwrap(), 2);
        assert_eq!(value("1500m").unwrap(), 2);
        assert_eq!(value("1G").unwrap(), 1_000_000_000);
    }

    #[test]
    fn nonsense_is_refused_by_name() {
        assert!(cpu_milli("lots").unwrap_err().contains("lots"));
        assert!(value("4Gb").is_err());
        assert!(value("-1").is_err());
    }
}
