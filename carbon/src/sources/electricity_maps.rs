//! Electricity Maps API v3 (<https://api.electricitymap.org/v3>, header `auth-token`). Hourly.
//!
//! * `GET /carbon-intensity/latest?zone=Z`: one object
//!   `{"zone","carbonIntensity","datetime","updatedAt","createdAt","emissionFactorType","isEstimated","estimationMethod"}`
//! * `GET /carbon-intensity/history?zone=Z`: `{"zone","history":[<same objects>]}` (last 24 h)
//! * `GET /carbon-intensity/forecast?zone=Z`: `{"zone","forecast":[{"carbonIntensity","datetime"}],"updatedAt"}`
//!
//! `carbonIntensity` may be `null` for hours the provider has no data for; those stay gaps.

use super::{Source, ZoneData};
use crate::series::{Kind, Point, Series};
use crate::Error;
use serde::Deserialize;
use std::path::PathBuf;

/// Default API base URL.
pub const BASE_URL: &str = "https://api.electricitymap.org/v3";
/// Environment variable holding the token when no token file is given.
pub const TOKEN_ENV: &str = "ELECTRICITYMAPS_TOKEN";
const PROVIDER: &str = "electricitymaps";
const STEP: i64 = 3600;

/// `ZONE=electricitymaps:ZONEKEY`, with the provider's zone key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectricityMaps(pub String);

/// Electricity Maps' flag.
#[derive(Debug, Clone, Default, clap::Args)]
// Flattened beside the other providers' flags: an argument group per type would collide.
#[group(skip)]
pub struct Flags {
    /// File holding the Electricity Maps token (else $ELECTRICITYMAPS_TOKEN).
    #[arg(long)]
    electricitymaps_token_file: Option<PathBuf>,
}

impl Source for ElectricityMaps {
    const NAME: &'static str = "electricitymaps";
    const ARGUMENT: &'static str = "ZONEKEY";
    type Flags = Flags;
    /// The token, when one was given.
    type Credentials = Option<String>;

    fn parse(arg: &str) -> Result<Self, String> {
        Ok(ElectricityMaps(arg.to_string()))
    }

    fn credentials(flags: &Flags) -> Result<Option<String>, Error> {
        crate::secrets::load(flags.electricitymaps_token_file.as_deref(), TOKEN_ENV)
    }

    async fn fetch(
        &self,
        client: &reqwest::Client,
        zone: &str,
        token: &Option<String>,
        _now: i64,
    ) -> Result<ZoneData, Error> {
        let token = token.as_deref().ok_or_else(|| {
            Error::Invalid(format!(
                "{zone}: Electricity Maps needs a token (--electricitymaps-token-file or ${TOKEN_ENV})"
            ))
        })?;
        let (actual, forecast) = fetch(client, BASE_URL, &self.0, token).await?;
        Ok(ZoneData {
            actual,
            forecast: Some(forecast),
        }
        .renamed(zone))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    carbon_intensity: Option<f64>,
    datetime: String,
}

#[derive(Deserialize)]
struct History {
    history: Vec<Entry>,
}

#[derive(Deserialize)]
struct Forecast {
    forecast: Vec<Entry>,
}

fn json<'a, T: Deserialize<'a>>(body: &'a str) -> Result<T, Error> {
    serde_json::from_str(body).map_err(|source| Error::Json {
        provider: PROVIDER,
        error: source,
    })
}

fn series(zone: &str, kind: Kind, entries: &[Entry]) -> Result<Series, Error> {
    let points = entries
        .iter()
        .map(|e| {
            Ok(Point {
                timestamp: crate::time::parse(&e.datetime)?,
                value: e.carbon_intensity,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Series::new(zone, PROVIDER, kind, STEP, points)
}

/// A `latest` response as a one-point actual series.
pub fn parse_latest(zone: &str, body: &str) -> Result<Series, Error> {
    series(zone, Kind::Actual, &[json::<Entry>(body)?])
}

/// A `history` response.
pub fn parse_history(zone: &str, body: &str) -> Result<Series, Error> {
    series(zone, Kind::Actual, &json::<History>(body)?.history)
}

/// A `forecast` response.
pub fn parse_forecast(zone: &str, body: &str) -> Result<Series, Error> {
    series(zone, Kind::Forecast, &json::<Forecast>(body)?.forecast)
}

/// History (+ latest merged in) and forecast for one zone key.
pub async fn fetch(
    client: &reqwest::Client,
    base: &str,
    zone: &str,
    token: &str,
) -> Result<(Series, Series), Error> {
    let auth = [("auth-token", token)];
    let get = |what: &str| format!("{base}/carbon-intensity/{what}?zone={zone}");
    let history = parse_history(
        zone,
        &super::get_text(client, PROVIDER, &get("history"), &auth).await?,
    )?;
    let latest = parse_latest(
        zone,
        &super::get_text(client, PROVIDER, &get("latest"), &auth).await?,
    )?;
    let forecast = parse_forecast(
        zone,
        &super::get_text(client, PROVIDER, &get("forecast"), &auth).await?,
    )?;
    Ok((super::merge(history, latest)?, forecast))
}
