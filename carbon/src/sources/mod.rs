//! Carbon-intensity sources, one module per provider. Each module has pure `parse_*` functions
//! over the documented response body (unit-tested with fixture bodies) and an async `fetch`.
//! [`ZoneSource`] is the user's `ZONE=provider:arg` choice; [`fetch`] dispatches on it.

pub mod csv;
pub mod electricity_maps;
pub mod uk;
pub mod watttime;

use crate::series::{Kind, Series};
use crate::Error;
use std::path::PathBuf;

/// Where one zone's data comes from, as written on the command line: `ZONE=csv:PATH`,
/// `ZONE=uk:national`, `ZONE=uk:region:13`, `ZONE=electricitymaps:DE`,
/// `ZONE=watttime:CAISO_NORTH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSource {
    /// The zone name GreenPipe uses (labels, node mapping).
    pub zone: String,
    /// The provider and its argument.
    pub provider: Provider,
}

/// A provider and the key it knows the zone by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    /// A canonical CSV file.
    Csv(PathBuf),
    /// UK national (`None`) or a region id.
    Uk(Option<u32>),
    /// Electricity Maps zone key.
    ElectricityMaps(String),
    /// WattTime region.
    WattTime(String),
}

impl std::str::FromStr for ZoneSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (zone, spec) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: want ZONE=provider:arg"))?;
        let (kind, arg) = spec
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: want ZONE=provider:arg"))?;
        if zone.is_empty() || arg.is_empty() {
            return Err(format!("{s:?}: zone and argument must not be empty"));
        }
        let provider = match kind {
            "csv" => Provider::Csv(PathBuf::from(arg)),
            "uk" if arg == "national" => Provider::Uk(None),
            "uk" => match arg.strip_prefix("region:").map(str::parse::<u32>) {
                Some(Ok(id)) if (1..=17).contains(&id) => Provider::Uk(Some(id)),
                _ => return Err(format!("{s:?}: uk takes `national` or `region:1..17`")),
            },
            "electricitymaps" => Provider::ElectricityMaps(arg.to_string()),
            "watttime" => Provider::WattTime(arg.to_string()),
            other => {
                return Err(format!(
                    "{s:?}: unknown provider {other:?} (csv, uk, electricitymaps, watttime)"
                ))
            }
        };
        Ok(ZoneSource {
            zone: zone.to_string(),
            provider,
        })
    }
}

/// Credentials and options the network providers need.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Electricity Maps token.
    pub electricity_maps_token: Option<String>,
    /// WattTime user and password.
    pub watttime: Option<(String, String)>,
    /// WattTime signal.
    pub watttime_signal: Option<watttime::Signal>,
}

/// What a source returned for one zone.
#[derive(Debug, Clone)]
pub struct ZoneData {
    /// Measured (or after-the-fact estimated) intensity.
    pub actual: Series,
    /// The provider's forecast, when it publishes one.
    pub forecast: Option<Series>,
}

/// Fetches one zone. `now` bounds CSV files (points after `now` are dropped so a replay of a
/// historical file sees only its past).
pub async fn fetch(
    client: &reqwest::Client,
    source: &ZoneSource,
    creds: &Credentials,
    now: i64,
) -> Result<ZoneData, Error> {
    let zone = source.zone.as_str();
    let renamed = |mut s: Series| {
        s.zone = zone.to_string();
        s
    };
    match &source.provider {
        Provider::Csv(path) => {
            let mut actual = csv::read(path)?;
            actual.points.retain(|p| p.timestamp <= now);
            Ok(ZoneData {
                actual: renamed(actual),
                forecast: None,
            })
        }
        Provider::Uk(region) => {
            let (actual, forecast) = uk::fetch(client, uk::BASE_URL, zone, *region, now).await?;
            Ok(ZoneData {
                actual,
                forecast: Some(forecast),
            })
        }
        Provider::ElectricityMaps(key) => {
            let token = creds.electricity_maps_token.as_deref().ok_or_else(|| {
                Error::Invalid(format!(
                    "{zone}: Electricity Maps needs a token (--electricitymaps-token-file or ${})",
                    electricity_maps::TOKEN_ENV
                ))
            })?;
            let (a, f) =
                electricity_maps::fetch(client, electricity_maps::BASE_URL, key, token).await?;
            Ok(ZoneData {
                actual: renamed(a),
                forecast: Some(renamed(f)),
            })
        }
        Provider::WattTime(region) => {
            let (user, password) = creds.watttime.as_ref().ok_or_else(|| {
                Error::Invalid(format!(
                    "{zone}: WattTime needs ${} and ${} (or --watttime-password-file)",
                    watttime::USER_ENV,
                    watttime::PASSWORD_ENV
                ))
            })?;
            let signal = creds.watttime_signal.ok_or_else(|| {
                Error::Invalid(format!(
                    "{zone}: WattTime needs --watttime-signal marginal|average"
                ))
            })?;
            let (a, f) = watttime::fetch(
                client,
                watttime::BASE_URL,
                region,
                signal,
                (user, password),
                now,
                24 * 14,
            )
            .await?;
            Ok(ZoneData {
                actual: renamed(a),
                forecast: Some(renamed(f)),
            })
        }
    }
}

/// GET with extra headers; non-2xx is an error carrying the start of the body.
pub(crate) async fn get_text(
    client: &reqwest::Client,
    provider: &'static str,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<String, Error> {
    let mut req = client.get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.map_err(|source| Error::Request {
        provider,
        url: url.to_string(),
        source,
    })?;
    check(provider, url, resp).await
}

pub(crate) async fn check(
    provider: &'static str,
    url: &str,
    resp: reqwest::Response,
) -> Result<String, Error> {
    let status = resp.status();
    let body = resp.text().await.map_err(|source| Error::Request {
        provider,
        url: url.to_string(),
        source,
    })?;
    if !status.is_success() {
        return Err(Error::Http {
            provider,
            status: status.as_u16(),
            url: url.to_string(),
            body: body.chars().take(200).collect(),
        });
    }
    Ok(body)
}

/// Joins two series of the same zone, kind and step; where both have a point, a valued point
/// beats a null one and `later` beats `earlier`.
pub fn merge(earlier: Series, later: Series) -> Result<Series, Error> {
    if earlier.step_seconds != later.step_seconds || earlier.kind != later.kind {
        return Err(Error::Invalid(
            "cannot merge series of different step or kind".into(),
        ));
    }
    let mut map = std::collections::BTreeMap::new();
    for p in earlier.points.into_iter().chain(later.points) {
        map.entry(p.timestamp)
            .and_modify(|v: &mut Option<f64>| {
                if p.value.is_some() {
                    *v = p.value
                }
            })
            .or_insert(p.value);
    }
    let points = map
        .into_iter()
        .map(|(timestamp, value)| crate::series::Point { timestamp, value })
        .collect();
    Series::new(
        later.zone,
        later.source,
        later.kind,
        later.step_seconds,
        points,
    )
}

/// Returns the series kind label for messages.
pub fn describe(s: &Series) -> String {
    let kind = match s.kind {
        Kind::Actual => "actual",
        Kind::Forecast => "forecast",
    };
    format!(
        "{} {} {} ({} points, {} gaps)",
        s.zone,
        s.source,
        kind,
        s.points.len(),
        s.gaps().len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_source_specs() {
        let s: ZoneSource = "GB=uk:national".parse().unwrap();
        assert_eq!(s.provider, Provider::Uk(None));
        let s: ZoneSource = "LDN=uk:region:13".parse().unwrap();
        assert_eq!(s.provider, Provider::Uk(Some(13)));
        let s: ZoneSource = "CISO=csv:/data/CISO.csv".parse().unwrap();
        assert_eq!(s.provider, Provider::Csv("/data/CISO.csv".into()));
        for bad in ["GB", "GB=uk", "GB=uk:region:40", "X=ftp:y", "=csv:a"] {
            assert!(bad.parse::<ZoneSource>().is_err(), "{bad}");
        }
    }
}
