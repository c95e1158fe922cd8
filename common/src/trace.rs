//! The trace CSV format: one metered workload run on one node, one row per sample.
//!
//! `greenpipe-estimator dataset` writes it and `train`, `validate` and `crossval` read it, and the
//! public traces in `../shared/datasets/power` use it too, so one reader and one writer live here.
//! The reader checks everything a model would otherwise silently learn from (a shifted column, a
//! comma decimal, a file concatenated in the wrong order) and names the file and line of the first
//! problem. An empty cell means "not measured" and is never read as 0.

use crate::features::{trace_header, Feature, FeatureValues, TRACE_KEY_COLUMNS};

/// A trace must have at least this many data rows: fewer cannot be split or scored.
pub const MIN_ROWS: usize = 3;

/// One sample of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// Unix seconds.
    pub timestamp: f64,
    /// Node name.
    pub node: String,
    /// Workload name (one per trace file, by convention).
    pub workload: String,
    /// Measured power, watts; `None` when the meter had no reading.
    pub power_watts: Option<f64>,
    /// Feature values; `None` = not measured.
    pub features: FeatureValues,
}

/// Why a trace was refused. Every variant names the file; row-level ones the 1-based line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceError {
    /// The first line is not [`trace_header`].
    #[error(
        "{file}:1: header is not the trace CSV header\n  expected: {expected}\n            (optionally followed by ,gpu_seconds_per_second and ,gpu_frequency_hertz)\n  found:    {found}"
    )]
    Header {
        /// File name.
        file: String,
        /// The header this build reads.
        expected: String,
        /// The first line of the file.
        found: String,
    },
    /// A row has the wrong number of cells.
    #[error("{file}:{line}: {found} cells, the header has {expected}")]
    CellCount {
        /// File name.
        file: String,
        /// Line number.
        line: usize,
        /// Header columns.
        expected: usize,
        /// Cells found.
        found: usize,
    },
    /// A numeric cell is not a finite number.
    #[error("{file}:{line}: column {column}: {value:?} is not a finite number")]
    NotNumeric {
        /// File name.
        file: String,
        /// Line number.
        line: usize,
        /// Column name.
        column: &'static str,
        /// The cell.
        value: String,
    },
    /// `timestamp`, `node` or `workload` is empty.
    #[error("{file}:{line}: column {column} is empty")]
    MissingKey {
        /// File name.
        file: String,
        /// Line number.
        line: usize,
        /// Column name.
        column: &'static str,
    },
    /// A timestamp is smaller than the one before it.
    #[error("{file}:{line}: timestamp {timestamp} goes backwards (previous row: {previous})")]
    Backwards {
        /// File name.
        file: String,
        /// Line number.
        line: usize,
        /// This row's timestamp.
        timestamp: f64,
        /// The previous row's timestamp.
        previous: f64,
    },
    /// Fewer than [`MIN_ROWS`] data rows.
    #[error("{file}: {rows} data rows, at least {MIN_ROWS} are needed")]
    TooFewRows {
        /// File name.
        file: String,
        /// Data rows found.
        rows: usize,
    },
    /// A node or workload name cannot be written into a CSV cell unquoted.
    #[error("{field} {value:?} contains a comma, quote or line break")]
    BadName {
        /// `node` or `workload`.
        field: &'static str,
        /// The name.
        value: String,
    },
}

/// Parses a whole trace file. `file` is only used in error messages.
///
/// Cells are split by the `csv` crate with quoting off: the format has no quoted cells (the
/// writer refuses names that would need them), so a quote is an ordinary character here, as it
/// always was. Lines end at `\n`; a `\r` before it is trimmed like any trailing whitespace.
pub fn parse_trace(file: &str, text: &str) -> Result<Vec<TraceRow>, TraceError> {
    let expected = trace_header();
    let header_error = || TraceError::Header {
        file: file.to_string(),
        expected: expected.clone(),
        found: text.lines().next().unwrap_or("").trim_end().to_string(),
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .quoting(false)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    let mut record = csv::StringRecord::new();
    // The header must be line 1: the csv reader skips empty lines, the format does not.
    match records.next() {
        Some(Ok(r)) if record_line(text, &r) == 1 => record = r,
        Some(Err(_)) | None | Some(Ok(_)) => {}
    }
    let last = record.len().saturating_sub(1);
    let header: Vec<&str> = record
        .iter()
        .enumerate()
        .map(|(i, c)| if i == last { c.trim_end() } else { c })
        .collect();
    let Some(columns) = feature_columns(&header) else {
        return Err(header_error());
    };
    let width = TRACE_KEY_COLUMNS.len() + columns.len();
    let mut rows: Vec<TraceRow> = Vec::new();
    for record in records {
        // Reading a `&str` with quoting off and flexible widths has no failure left: not I/O,
        // not UTF-8 (cells are split at ASCII commas), not the record width.
        let Ok(cells) = record else {
            return Err(header_error());
        };
        let line = record_line(text, &cells);
        if cells.len() == 1 && cells[0].trim_end().is_empty() {
            continue;
        }
        if cells.len() != width {
            return Err(TraceError::CellCount {
                file: file.to_string(),
                line,
                expected: width,
                found: cells.len(),
            });
        }
        let number = |i: usize, column: &'static str| -> Result<Option<f64>, TraceError> {
            let cell = cells[i].trim();
            if cell.is_empty() {
                return Ok(None);
            }
            match cell.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Some(v)),
                _ => Err(TraceError::NotNumeric {
                    file: file.to_string(),
                    line,
                    column,
                    value: cell.to_string(),
                }),
            }
        };
        let key = |i: usize| -> Result<&str, TraceError> {
            let cell = cells[i].trim();
            if cell.is_empty() {
                Err(TraceError::MissingKey {
                    file: file.to_string(),
                    line,
                    column: TRACE_KEY_COLUMNS[i],
                })
            } else {
                Ok(cell)
            }
        };
        key(0)?;
        let timestamp = number(0, TRACE_KEY_COLUMNS[0])?.unwrap_or_default();
        if let Some(previous) = rows.last().map(|r| r.timestamp) {
            if timestamp < previous {
                return Err(TraceError::Backwards {
                    file: file.to_string(),
                    line,
                    timestamp,
                    previous,
                });
            }
        }
        let mut features = FeatureValues::default();
        for (k, &f) in columns.iter().enumerate() {
            features.set(f, number(TRACE_KEY_COLUMNS.len() + k, f.column())?);
        }
        rows.push(TraceRow {
            timestamp,
            node: key(1)?.to_string(),
            workload: key(2)?.to_string(),
            power_watts: number(3, TRACE_KEY_COLUMNS[3])?,
            features,
        });
    }
    if rows.len() < MIN_ROWS {
        return Err(TraceError::TooFewRows {
            file: file.to_string(),
            rows: rows.len(),
        });
    }
    Ok(rows)
}

/// The feature columns a header names: the key columns, [`Feature::BASE`], then any of the
/// optional [`Feature::GPU`] columns in their order. `None` for any other header.
fn feature_columns(header: &[&str]) -> Option<Vec<Feature>> {
    let keys = TRACE_KEY_COLUMNS.len();
    let base = keys + Feature::BASE.len();
    if header.len() < base
        || !header[..base].iter().copied().eq(TRACE_KEY_COLUMNS
            .into_iter()
            .chain(Feature::BASE.iter().map(|f| f.column())))
    {
        return None;
    }
    let mut columns = Feature::BASE.to_vec();
    let mut optional = Feature::GPU.iter();
    for name in &header[base..] {
        // Each optional column at most once, in order: `find` moves past the ones skipped.
        columns.push(*optional.find(|f| f.column() == *name)?);
    }
    Some(columns)
}

/// The 1-based line `record` is on. The reader's position is where it started reading, before
/// the empty lines it skips (each one `\n`, with `\n` as the only terminator).
fn record_line(text: &str, record: &csv::StringRecord) -> usize {
    let Some(p) = record.position() else { return 0 };
    let skipped = text.as_bytes()[p.byte() as usize..]
        .iter()
        .take_while(|&&b| b == b'\n')
        .count();
    p.line() as usize + skipped
}

/// Writes rows in the trace CSV format (header included), numbers with 8 significant digits.
/// The GPU columns are written only when some row has a GPU value, so a trace of a node without
/// GPUs keeps the header every reader of the format knows.
pub fn write_trace(rows: &[TraceRow]) -> Result<String, TraceError> {
    // Names that would need quoting are refused rather than quoted, so that every reader of the
    // shared traces (a plain comma split included) reads what was written.
    for r in rows {
        for (field, value) in [("node", &r.node), ("workload", &r.workload)] {
            if value.is_empty() || value.contains([',', '"', '\n', '\r']) {
                return Err(TraceError::BadName {
                    field,
                    value: value.clone(),
                });
            }
        }
    }
    // Writing into a `Vec` cannot fail, and every cell is UTF-8.
    let bytes = write_records(rows).expect("writing CSV into memory");
    Ok(String::from_utf8(bytes).expect("trace CSV is UTF-8"))
}

fn write_records(rows: &[TraceRow]) -> Result<Vec<u8>, csv::Error> {
    let mut writer = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Never)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let has_gpu = rows
        .iter()
        .any(|r| Feature::GPU.iter().any(|&f| r.features.get(f).is_some()));
    let columns: &[Feature] = if has_gpu {
        &Feature::ALL
    } else {
        &Feature::BASE
    };
    writer.write_record(
        TRACE_KEY_COLUMNS
            .into_iter()
            .chain(columns.iter().map(|f| f.column())),
    )?;
    for r in rows {
        writer.write_field(format_number(r.timestamp, 13))?;
        writer.write_field(&r.node)?;
        writer.write_field(&r.workload)?;
        let features = columns.iter().map(|&f| r.features.get(f));
        for v in std::iter::once(r.power_watts).chain(features) {
            writer.write_field(v.map(|v| format_number(v, 8)).unwrap_or_default())?;
        }
        writer.write_record(None::<&[u8]>)?;
    }
    writer.into_inner().map_err(|e| e.into_error().into())
}

/// Formats `v` with `digits` significant digits, without exponent for ordinary magnitudes and
/// without trailing zeros (`83`, `0.0544`, `6.4361991e+08`), as the shared traces are written.
fn format_number(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            String::new()
        };
    }
    let magnitude = v.abs().log10().floor() as i32;
    if !(-5..digits).contains(&magnitude) {
        let s = format!("{:.*e}", (digits - 1) as usize, v);
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mantissa = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// How a feature column can be used for a set of rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ColumnStatus {
    /// Has at least two distinct values.
    Varies,
    /// No row has a value: the source lacks the metric; the model does not use it.
    AllEmpty,
    /// Every present value is this one: it carries no information; reported, not used.
    Constant(f64),
}

/// The status of every feature column over `rows`, in [`Feature::ALL`] order.
pub fn column_status<'a>(
    rows: impl IntoIterator<Item = &'a FeatureValues>,
) -> [ColumnStatus; Feature::COUNT] {
    let mut first = [None::<f64>; Feature::COUNT];
    let mut varies = [false; Feature::COUNT];
    for values in rows {
        for (i, v) in values.0.iter().enumerate() {
            if let Some(v) = *v {
                match first[i] {
                    None => first[i] = Some(v),
                    Some(f) if f != v => varies[i] = true,
                    _ => {}
                }
            }
        }
    }
    std::array::from_fn(|i| match (first[i], varies[i]) {
        (None, _) => ColumnStatus::AllEmpty,
        (Some(v), false) => ColumnStatus::Constant(v),
        (Some(_), true) => ColumnStatus::Varies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::trace_header_with;

    const GOOD: &str = "1430137776,e5,web_search,83,0.0544,6.4361991e+08,76230046,952513,4,20207.58,8176,,\n\
                        1430137778,e5,web_search,82,0.0528,5.2753754e+08,61510907,945438,14,18711.075,28615,,\n\
                        1430137780,e5,web_search,,0.06,5.2e+08,61510907,945438,14,18711.075,28615,,\n";

    fn file(body: &str) -> String {
        format!("{}\n{body}", trace_header())
    }

    #[test]
    fn reads_shared_format_and_keeps_empty_cells_empty() {
        let rows = parse_trace("t.csv", &file(GOOD)).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].power_watts, Some(83.0));
        assert_eq!(rows[2].power_watts, None);
        assert_eq!(
            rows[0].features.get(Feature::CpuCyclesPerSecond),
            Some(6.4361991e8)
        );
        assert_eq!(rows[0].features.get(Feature::MemoryUsedBytes), None);
    }

    #[test]
    fn write_then_read_is_identity_at_8_digits() {
        let rows = parse_trace("t.csv", &file(GOOD)).unwrap();
        let text = write_trace(&rows).unwrap();
        assert_eq!(text, file(GOOD));
        assert_eq!(parse_trace("u.csv", &text).unwrap(), rows);
    }

    #[test]
    fn gpu_columns_are_read_when_present_and_written_only_when_used() {
        let with_gpu: String = GOOD
            .lines()
            .zip(["0.5,1.02e+09", "1.25,6.12e+08", ","])
            .map(|(l, gpu)| format!("{l},{gpu}\n"))
            .collect();
        let text = format!("{}\n{with_gpu}", trace_header_with(&Feature::ALL));
        let rows = parse_trace("g.csv", &text).unwrap();
        assert_eq!(
            rows[0].features.get(Feature::GpuSecondsPerSecond),
            Some(0.5)
        );
        assert_eq!(
            rows[1].features.get(Feature::GpuFrequencyHertz),
            Some(6.12e8)
        );
        assert_eq!(rows[2].features.get(Feature::GpuSecondsPerSecond), None);
        assert_eq!(write_trace(&rows).unwrap(), text);
        // Without GPU values the writer keeps the header of the traces without GPUs.
        let plain = parse_trace("t.csv", &file(GOOD)).unwrap();
        assert!(write_trace(&plain)
            .unwrap()
            .starts_with(&(trace_header() + "\n")));
        // Only the busy-time column.
        let one: String = GOOD.lines().map(|l| format!("{l},0.25\n")).collect();
        let text = format!(
            "{}\n{one}",
            trace_header_with(&[&Feature::BASE[..], &[Feature::GpuSecondsPerSecond]].concat())
        );
        let rows = parse_trace("one.csv", &text).unwrap();
        assert_eq!(
            rows[2].features.get(Feature::GpuSecondsPerSecond),
            Some(0.25)
        );
        // A row without the header's GPU cells is refused, naming its line.
        let short = format!("{}\n{GOOD}", trace_header_with(&Feature::ALL));
        assert!(matches!(
            parse_trace("s.csv", &short),
            Err(TraceError::CellCount {
                line: 2,
                expected: 15,
                found: 13,
                ..
            })
        ));
    }

    #[test]
    fn unknown_or_reordered_trailing_columns_are_refused() {
        for extra in [
            ",gpu_frequency_hertz,gpu_seconds_per_second",
            ",gpu_watts",
            ",gpu_seconds_per_second,gpu_seconds_per_second",
        ] {
            let text = format!("{}{extra}\n{GOOD}", trace_header());
            assert!(
                matches!(parse_trace("x.csv", &text), Err(TraceError::Header { .. })),
                "{extra}"
            );
        }
    }

    #[test]
    fn number_format_uses_8_significant_digits() {
        assert_eq!(format_number(0.123456789, 8), "0.12345679");
        assert_eq!(format_number(643619912.0, 8), "6.4361991e+08");
        assert_eq!(format_number(20207.58, 8), "20207.58");
        assert_eq!(format_number(-3.0, 8), "-3");
        assert_eq!(format_number(1.5e-7, 8), "1.5e-07");
        assert_eq!(format_number(1430137776.5, 13), "1430137776.5");
    }

    #[test]
    fn wrong_header_names_file_and_line_1() {
        let text = GOOD.to_string();
        let e = parse_trace("a.csv", &text).unwrap_err();
        assert!(matches!(e, TraceError::Header { .. }));
        assert!(e.to_string().starts_with("a.csv:1: header"), "{e}");
    }

    #[test]
    fn non_numeric_cell_names_line_and_column() {
        let bad = GOOD.replace("0.0528", "0,0528");
        let e = parse_trace("a.csv", &file(&bad)).unwrap_err();
        assert!(matches!(e, TraceError::CellCount { line: 3, .. }), "{e}");
        let bad = GOOD.replace("0.0528", "abc");
        let e = parse_trace("a.csv", &file(&bad)).unwrap_err();
        assert_eq!(
            e,
            TraceError::NotNumeric {
                file: "a.csv".into(),
                line: 3,
                column: "cpu_seconds_per_second",
                value: "abc".into()
            }
        );
        let bad = GOOD.replace("0.0528", "NaN");
        assert!(matches!(
            parse_trace("a.csv", &file(&bad)),
            Err(TraceError::NotNumeric { line: 3, .. })
        ));
    }

    #[test]
    fn backwards_timestamp_is_refused() {
        let bad = GOOD.replace("1430137780", "1430137770");
        let e = parse_trace("a.csv", &file(&bad)).unwrap_err();
        assert!(matches!(e, TraceError::Backwards { line: 4, .. }), "{e}");
        assert!(e.to_string().starts_with("a.csv:4:"));
    }

    #[test]
    fn too_few_rows_and_missing_keys_are_refused() {
        let two: String = GOOD.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            parse_trace("a.csv", &file(&two)),
            Err(TraceError::TooFewRows {
                file: "a.csv".into(),
                rows: 2
            })
        );
        assert!(matches!(
            parse_trace("a.csv", ""),
            Err(TraceError::Header { .. })
        ));
        let bad = GOOD.replacen(",e5,", ",,", 1);
        assert!(matches!(
            parse_trace("a.csv", &file(&bad)),
            Err(TraceError::MissingKey {
                line: 2,
                column: "node",
                ..
            })
        ));
    }

    #[test]
    fn writer_refuses_names_that_would_break_the_csv() {
        let mut rows = parse_trace("t.csv", &file(GOOD)).unwrap();
        rows[1].workload = "a,b".into();
        assert!(matches!(
            write_trace(&rows),
            Err(TraceError::BadName {
                field: "workload",
                ..
            })
        ));
    }

    #[test]
    fn column_status_finds_empty_and_constant_columns() {
        let mut rows = parse_trace("t.csv", &file(GOOD)).unwrap();
        for r in &mut rows {
            r.features.set(Feature::CpuInstructionsPerSecond, Some(7.0));
        }
        rows[0]
            .features
            .set(Feature::CpuInstructionsPerSecond, None);
        let status = column_status(rows.iter().map(|r| &r.features));
        assert_eq!(
            status[Feature::CpuSecondsPerSecond.index()],
            ColumnStatus::Varies
        );
        assert_eq!(
            status[Feature::CpuInstructionsPerSecond.index()],
            ColumnStatus::Constant(7.0)
        );
        assert_eq!(
            status[Feature::MemoryUsedBytes.index()],
            ColumnStatus::AllEmpty
        );
    }
}
