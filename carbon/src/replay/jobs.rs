//! The workload file (`--jobs FILE.csv`): header `arrival,cores,duration,deadline,tolerates_red`.
//!
//! * `arrival`: RFC 3339 or unix seconds;
//! * `cores`: cores the job's pod requests (it keeps them busy while it runs);
//! * `duration`: run time, as `2h`, `90m` or a number of hours;
//! * `deadline`: RFC 3339 or unix seconds by which a batch job must have finished, or `none` for
//!   a service (started at once, never deferred; it keeps its progress across evictions, where a
//!   batch job starts again);
//! * `tolerates_red`: `yes` if the pod tolerates the red NoExecute taint forever, `no` if it
//!   carries the replay's `tolerationSeconds` (or, with 0, no toleration at all).

use crate::Error;
use std::path::Path;

/// The header every workload file starts with.
pub const HEADER: [&str; 5] = ["arrival", "cores", "duration", "deadline", "tolerates_red"];

/// One job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Line in the file (its id in messages).
    pub line: usize,
    /// Arrival, unix seconds.
    pub arrival: i64,
    /// Cores requested.
    pub cores: u32,
    /// Run time, seconds.
    pub duration: i64,
    /// Finish-by time (unix seconds) for batch jobs; `None` for services.
    pub deadline: Option<i64>,
    /// Tolerates the red taint forever.
    pub tolerates_red: bool,
}

/// Reads a workload file; jobs come back in arrival order (then file order).
pub fn read(path: &Path) -> Result<Vec<Job>, Error> {
    let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.display().to_string(),
        error,
    })?;
    parse(&text).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
}

/// Parses the text of a workload file. Every bad row is an error naming its line.
pub fn parse(text: &str) -> Result<Vec<Job>, Error> {
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
    let mut jobs = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let bad = |what: String| Error::Invalid(format!("line {line}: {what}"));
        let record = record.map_err(|e| bad(e.to_string()))?;
        let arrival = crate::time::parse(&record[0]).map_err(|e| bad(format!("arrival: {e}")))?;
        let cores: u32 = record[1]
            .trim()
            .parse()
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| bad(format!("cores {:?} is not a whole number ≥ 1", &record[1])))?;
        let duration =
            crate::time::parse_duration(&record[2]).map_err(|e| bad(format!("duration: {e}")))?;
        if duration <= 0 {
            return Err(bad(format!("duration {:?} is not positive", &record[2])));
        }
        let deadline = match record[3].trim() {
            "none" => None,
            s => Some(crate::time::parse(s).map_err(|e| bad(format!("deadline: {e}")))?),
        };
        if let Some(d) = deadline {
            if d < arrival + duration {
                return Err(bad(format!(
                    "deadline {} is before arrival + duration ({})",
                    crate::time::format(d),
                    crate::time::format(arrival + duration)
                )));
            }
        }
        let tolerates_red = match record[4].trim() {
            "yes" => true,
            "no" => false,
            s => return Err(bad(format!("tolerates_red {s:?}: want yes or no"))),
        };
        jobs.push(Job {
            line,
            arrival,
            cores,
            duration,
            deadline,
            tolerates_red,
        });
    }
    if jobs.is_empty() {
        return Err(Error::Invalid("no jobs".into()));
    }
    jobs.sort_by_key(|j| (j.arrival, j.line));
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "arrival,cores,duration,deadline,tolerates_red\n";

    #[test]
    fn batch_jobs_and_services() {
        let jobs = parse(&format!(
            "{H}2022-01-01T05:00:00Z,2,90m,2022-01-01T12:00:00Z,no\n3600,1,1,none,yes\n"
        ))
        .unwrap();
        assert_eq!(jobs.len(), 2);
        // Sorted by arrival.
        assert_eq!(
            jobs[0],
            Job {
                line: 3,
                arrival: 3600,
                cores: 1,
                duration: 3600,
                deadline: None,
                tolerates_red: true
            }
        );
        assert_eq!(jobs[1].duration, 5400);
        assert_eq!(jobs[1].deadline, Some(1_641_038_400));
        assert!(!jobs[1].tolerates_red);
    }

    #[test]
    fn bad_rows_name_their_line() {
        let bad = [
            ("arrival,cores,duration,deadline\n0,1,1h,none\n", "header"),
            ("x,1,1h,none,no\n", "line 2: arrival"),
            ("0,0,1h,none,no\n", "line 2: cores"),
            ("0,1,soon,none,no\n", "line 2: duration"),
            ("0,1,0,none,no\n", "not positive"),
            ("0,1,2h,3600,no\n", "before arrival + duration"),
            ("0,1,1h,none,maybe\n", "tolerates_red"),
            ("", "no jobs"),
        ];
        for (rows, want) in bad {
            let text = if rows.starts_with("arrival") {
                rows.to_string()
            } else {
                format!("{H}{rows}")
            };
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{rows:?}: {err}");
        }
    }
}
