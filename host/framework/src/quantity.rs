//! Kubernetes resource quantities ("500m", "4Gi", "1.5", "2e3", "1Ei") in
//! the framework's units, parsed exactly: the grammar of apimachinery's
//! `resource.Quantity` and integer arithmetic (no floating point, which
//! would misround large byte counts and fractional millicores).

/// A quantity that cannot be read in the asked unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {quantity:?}: {problem}")]
pub struct QuantityError {
    pub quantity: String,
    pub problem: Problem,
}

/// What is wrong with a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("not a number")]
    NotANumber,
    #[error("too many digits")]
    TooManyDigits,
    #[error("bad exponent")]
    BadExponent,
    #[error("unknown suffix")]
    UnknownSuffix,
    #[error("negative")]
    Negative,
    #[error("too large")]
    TooLarge,
}

/// Parse a quantity and return `ceil(q × scale)` (scale 1000 for
/// millicores, 1 for the base unit), rounding up as Kubernetes does when it
/// reads a request at a coarser scale.
///
/// # Errors
/// A message naming the quantity when it is not valid, negative, or larger
/// than `u64::MAX` in the asked unit.
pub fn parse(q: &str, scale: u64) -> Result<u64, QuantityError> {
    let q = q.trim();
    let bad = |problem: Problem| QuantityError {
        quantity: q.to_string(),
        problem,
    };
    let (negative, rest) = match q.as_bytes().first() {
        Some(b'-') => (true, &q[1..]),
        Some(b'+') => (false, &q[1..]),
        _ => (false, q),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad(Problem::NotANumber));
    }
    // Leading zeros of the whole part and trailing zeros of the fraction
    // change nothing; what is left must fit the arithmetic below.
    let fraction = fraction.trim_end_matches('0');
    let all = format!("{whole}{fraction}");
    let digits = all.trim_start_matches('0');
    if digits.len() > 38 {
        return Err(bad(Problem::TooManyDigits));
    }
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad(Problem::NotANumber))?
    };
    // value = mantissa × 2^binary × 10^decimal
    let (binary, decimal): (u32, i64) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4
            {
                return Err(bad(Problem::BadExponent));
            }
            (
                0,
                exp.parse::<i64>().map_err(|_| bad(Problem::BadExponent))?,
            )
        }
        _ => return Err(bad(Problem::UnknownSuffix)),
    };
    if mantissa == 0 {
        return Ok(0);
    }
    if negative {
        return Err(bad(Problem::Negative));
    }
    let too_large = || bad(Problem::TooLarge);
    let decimal = decimal - fraction.len() as i64;
    // Numerator and denominator, exactly; then one rounding up.
    let mut num = mantissa
        .checked_mul(u128::from(scale))
        .and_then(|v| v.checked_mul(1u128 << binary))
        .ok_or_else(too_large)?;
    let mut den: u128 = 1;
    if decimal >= 0 {
        let power = u32::try_from(decimal).map_err(|_| too_large())?;
        num = 10u128
            .checked_pow(power)
            .and_then(|p| num.checked_mul(p))
            .ok_or_else(too_large)?;
    } else {
        match u32::try_from(-decimal)
            .ok()
            .and_then(|p| 10u128.checked_pow(p))
        {
            Some(p) => den = p,
            // Smaller than anything representable: rounds up to one unit.
            None => return Ok(1),
        }
    }
    u64::try_from(num.div_ceil(den)).map_err(|_| too_large())
}

/// CPU in millicores, rounded up.
pub fn cpu_milli(q: &str) -> Result<u64, QuantityError> {
    parse(q, 1000)
}

/// A value in the resource's base unit (bytes, a count), rounded up.
pub fn value(q: &str) -> Result<u64, QuantityError> {
    parse(q, 1)
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
        assert_eq!(cpu_milli("100u").unwrap(), 1, "rounded up");
        assert_eq!(cpu_milli(".5").unwrap(), 500);
        assert_eq!(cpu_milli("1.").unwrap(), 1000);
        assert_eq!(cpu_milli("+2").unwrap(), 2000);
    }

    #[test]
    fn values_are_in_the_base_unit_rounded_up() {
        assert_eq!(value("10Gi").unwrap(), 10 << 30);
        assert_eq!(value("2").unwrap(), 2);
        assert_eq!(value("1500m").unwrap(), 2);
        assert_eq!(value("1G").unwrap(), 1_000_000_000);
        assert_eq!(value("1Ei").unwrap(), 1 << 60);
        assert_eq!(value("8E").unwrap(), 8_000_000_000_000_000_000);
        assert_eq!(value("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(value("129e6").unwrap(), 129_000_000);
        assert_eq!(value("1e-3").unwrap(), 1);
        assert_eq!(value("0").unwrap(), 0);
        assert_eq!(value("-0").unwrap(), 0);
        assert_eq!(value("0.000").unwrap(), 0);
        assert_eq!(
            value("0.0000000000000000000000000000000000000000001").unwrap(),
            1,
            "tiny but positive"
        );
    }

    #[test]
    fn large_byte_counts_are_exact() {
        // 2^53 + 1 is the first integer an f64 cannot hold.
        assert_eq!(value("9007199254740993").unwrap(), 9_007_199_254_740_993);
        assert_eq!(
            value("18446744073709551615").unwrap(),
            u64::MAX,
            "the largest u64"
        );
        assert_eq!(value("1.0000000001Ki").unwrap(), 1025, "1024.0000001 up");
    }

    #[test]
    fn nonsense_is_refused_by_name() {
        assert_eq!(cpu_milli("lots").unwrap_err().quantity, "lots");
        for bad in [
            "4Gb", "-1", "", ".", "1..2", "1.2.3", "e3", "1e", "1e+", "1ee3", "Ki", "1 Gi",
            "1e99999",
        ] {
            let e = value(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        assert_eq!(value("16Ei").unwrap_err().problem, Problem::TooLarge);
        assert_eq!(
            value("18446744073709551616").unwrap_err().problem,
            Problem::TooLarge
        );
    }
}
