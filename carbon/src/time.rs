//! Timestamps: providers send ISO 8601 in several spellings; everything inside is unix seconds.

use std::str::FromStr;

/// Parses the ISO 8601 / RFC 3339 forms the providers use: `2018-01-20T12:00Z` (UK, no seconds),
/// `2019-05-21T00:00:00.000Z` (Electricity Maps), `2022-07-15T00:00:00+00:00` (WattTime), or
/// plain unix seconds.
pub fn parse(s: &str) -> Result<i64, crate::Error> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i64>() {
        return Ok(n);
    }
    let bad = || {
        crate::Error::Invalid(format!(
            "cannot read time {s:?} (want ISO 8601 with offset)"
        ))
    };
    if let Ok(t) = jiff::Timestamp::from_str(s) {
        return Ok(t.as_second());
    }
    // `YYYY-MM-DDTHH:MMZ`: add the seconds jiff insists on.
    let (head, offset) = s.split_at(s.find(['Z', 'z', '+']).ok_or_else(bad)?);
    if head.len() == 16 {
        return jiff::Timestamp::from_str(&format!("{head}:00{offset}"))
            .map(|t| t.as_second())
            .map_err(|_| bad());
    }
    Err(bad())
}

/// `2022-01-05T10:00:00Z` for messages and reports.
pub fn format(t: i64) -> String {
    jiff::Timestamp::from_second(t)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| t.to_string())
}

/// Now, unix seconds.
pub fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Parses a duration like `2h`, `30m`, `1h30m`, `90s`, or a bare number of hours.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    if let Ok(h) = s.trim().parse::<f64>() {
        return Ok((h * 3600.0).round() as i64);
    }
    humantime::parse_duration(s)
        .map(|d| d.as_secs() as i64)
        .map_err(|e| format!("cannot read duration {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_spellings() {
        assert_eq!(parse("2018-01-20T12:00Z").unwrap(), 1516449600);
        assert_eq!(parse("2019-05-21T00:00:00.000Z").unwrap(), 1558396800);
        assert_eq!(parse("2022-07-15T00:00:00+00:00").unwrap(), 1657843200);
        assert_eq!(parse("1640995200").unwrap(), 1640995200);
        assert!(parse("yesterday").is_err());
        assert_eq!(format(1516449600), "2018-01-20T12:00:00Z");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2h").unwrap(), 7200);
        assert_eq!(parse_duration("1h 30m").unwrap(), 5400);
        assert_eq!(parse_duration("3").unwrap(), 10800);
        assert!(parse_duration("soon").is_err());
    }
}
