//! Canonical carbon-intensity CSV (`../shared/datasets/carbon/README.md`): header
//! `timestamp,zone,carbon_intensity_gco2_per_kwh`, unix seconds at the start of each hour,
//! ascending, one row per hour; missing hours are absent rows (reported as gaps).

use super::{NoFlags, Source, ZoneData};
use crate::series::{Kind, Point, Series};
use crate::Error;
use std::path::{Path, PathBuf};

/// `ZONE=csv:PATH`: a canonical file, read at every fetch (it may be appended to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csv(pub PathBuf);

impl Source for Csv {
    const NAME: &'static str = "csv";
    const ARGUMENT: &'static str = "PATH";
    type Flags = NoFlags;
    type Credentials = ();

    fn parse(arg: &str) -> Result<Self, String> {
        Ok(Csv(PathBuf::from(arg)))
    }

    fn credentials(_: &NoFlags) -> Result<(), Error> {
        Ok(())
    }

    async fn fetch(
        &self,
        _: &reqwest::Client,
        zone: &str,
        _: &(),
        now: i64,
    ) -> Result<ZoneData, Error> {
        let mut actual = read(&self.0)?;
        actual.points.retain(|p| p.timestamp <= now);
        Ok(ZoneData {
            actual,
            forecast: None,
        }
        .renamed(zone))
    }
}

/// The header every canonical file starts with.
pub const HEADER: [&str; 3] = ["timestamp", "zone", "carbon_intensity_gco2_per_kwh"];

/// Reads one canonical file. `source` names it in metrics (`csv` unless the caller knows better).
pub fn read(path: &Path) -> Result<Series, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        error: source,
    })?;
    parse(&text).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
}

/// Parses the text of a canonical file. Every bad row is an error naming its line: a forecast
/// built on a silently skipped row would be wrong without anyone knowing.
pub fn parse(text: &str) -> Result<Series, Error> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| Error::Invalid(e.to_string()))?
        .clone();
    if header.iter().collect::<Vec<_>>() != HEADER {
        return Err(Error::Invalid(format!(
            "header is {:?}, want {}",
            header.iter().collect::<Vec<_>>().join(","),
            HEADER.join(",")
        )));
    }
    let mut zone: Option<String> = None;
    let mut points = Vec::new();
    let mut last: Option<i64> = None;
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let record = record.map_err(|e| Error::Invalid(format!("line {line}: {e}")))?;
        let ts: i64 = record[0]
            .parse()
            .map_err(|_| Error::Invalid(format!("line {line}: timestamp {:?}", &record[0])))?;
        if ts % 3600 != 0 {
            return Err(Error::Invalid(format!(
                "line {line}: {ts} is not the start of an hour"
            )));
        }
        if last.is_some_and(|l| ts <= l) {
            return Err(Error::Invalid(format!(
                "line {line}: timestamps must ascend"
            )));
        }
        last = Some(ts);
        match &zone {
            None => zone = Some(record[1].to_string()),
            Some(z) if z != &record[1] => {
                return Err(Error::Invalid(format!(
                    "line {line}: zone {:?} in a file of zone {z:?}",
                    &record[1]
                )))
            }
            Some(_) => {}
        }
        let value: f64 = record[2]
            .parse()
            .map_err(|_| Error::Invalid(format!("line {line}: intensity {:?}", &record[2])))?;
        if !value.is_finite() || value < 0.0 {
            return Err(Error::Invalid(format!(
                "line {line}: intensity {value} out of range"
            )));
        }
        points.push(Point {
            timestamp: ts,
            value: Some(value),
        });
    }
    let zone = zone.ok_or_else(|| Error::Invalid("no rows".into()))?;
    Series::new(zone, "csv", Kind::Actual, 3600, points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_file_is_named_once() {
        let path = Path::new("/nonexistent/zone.csv");
        let e = read(path).unwrap_err();
        assert!(
            matches!(&e, Error::Io { path: p, .. } if p == "/nonexistent/zone.csv"),
            "{e}"
        );
        // The I/O error is in the message and not repeated as a source, so the binary's `{:#}`
        // prints it once.
        assert!(std::error::Error::source(&e).is_none());
        assert!(
            e.to_string()
                .starts_with("/nonexistent/zone.csv: No such file"),
            "{e}"
        );
    }

    #[test]
    fn absent_rows_are_gaps() {
        let s = parse(
            "timestamp,zone,carbon_intensity_gco2_per_kwh\n0,CISO,200.5\n3600,CISO,210\n14400,CISO,190\n",
        )
        .unwrap();
        assert_eq!(s.zone, "CISO");
        assert_eq!(s.points.len(), 3);
        let gaps = s.gaps();
        assert_eq!(gaps.len(), 1);
        assert_eq!((gaps[0].start, gaps[0].intervals), (7200, 2));
    }

    #[test]
    fn bad_input_names_the_line() {
        let bad = [
            ("ts,zone,v\n0,A,1\n", "header"),
            (
                "timestamp,zone,carbon_intensity_gco2_per_kwh\n0,A,1\n0,A,2\n",
                "line 3",
            ),
            (
                "timestamp,zone,carbon_intensity_gco2_per_kwh\n0,A,1\n3600,B,2\n",
                "line 3",
            ),
            (
                "timestamp,zone,carbon_intensity_gco2_per_kwh\n0,A,x\n",
                "line 2",
            ),
            (
                "timestamp,zone,carbon_intensity_gco2_per_kwh\n30,A,1\n",
                "line 2",
            ),
            ("timestamp,zone,carbon_intensity_gco2_per_kwh\n", "no rows"),
        ];
        for (text, want) in bad {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
