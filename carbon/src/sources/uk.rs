//! UK Carbon Intensity API (National Energy System Operator, <https://api.carbonintensity.org.uk>,
//! no key). Half-hourly. National endpoints carry `forecast` and `actual` (`actual` is `null` for
//! periods not yet estimated); regional endpoints carry only `forecast`.
//!
//! * national: `GET /intensity/{from}/fw48h` (next 48 h) and `GET /intensity/{from}/pt24h`
//!   (past 24 h): `{"data":[{"from","to","intensity":{"forecast","actual","index"}}]}`
//! * regional: `GET /regional/intensity/{from}/fw48h/regionid/{id}`:
//!   `{"data":{"regionid","dnoregion","shortname","data":[{"from","to","intensity":{"forecast","index"},"generationmix":[..]}]}}`
//!   (`GET /regional/regionid/{id}` wraps the same region object in an array).

use super::{NoFlags, Source, ZoneData};
use crate::series::{Kind, Point, Series};
use crate::Error;
use serde::Deserialize;

/// Default API base URL.
pub const BASE_URL: &str = "https://api.carbonintensity.org.uk";
const PROVIDER: &str = "uk";
const STEP: i64 = 1800;

/// `ZONE=uk:national` or `ZONE=uk:region:ID` (no key needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uk {
    /// Great Britain as a whole: actuals and forecasts.
    National,
    /// One of the 17 regions (forecasts only).
    Region(u32),
}

impl Source for Uk {
    const NAME: &'static str = "uk";
    const ARGUMENT: &'static str = "national|region:1..17";
    type Flags = NoFlags;
    type Credentials = ();

    fn parse(arg: &str) -> Result<Self, String> {
        if arg == "national" {
            return Ok(Uk::National);
        }
        match arg.strip_prefix("region:").map(str::parse::<u32>) {
            Some(Ok(id)) if (1..=17).contains(&id) => Ok(Uk::Region(id)),
            _ => Err("uk takes `national` or `region:1..17`".into()),
        }
    }

    fn credentials(_: &NoFlags) -> Result<(), Error> {
        Ok(())
    }

    async fn fetch(
        &self,
        client: &reqwest::Client,
        zone: &str,
        _: &(),
        now: i64,
    ) -> Result<ZoneData, Error> {
        let region = match self {
            Uk::National => None,
            Uk::Region(id) => Some(*id),
        };
        let (actual, forecast) = fetch(client, BASE_URL, zone, region, now).await?;
        Ok(ZoneData {
            actual,
            forecast: Some(forecast),
        })
    }
}

#[derive(Deserialize)]
struct Period {
    from: String,
    intensity: Intensity,
}

#[derive(Deserialize)]
struct Intensity {
    forecast: Option<f64>,
    #[serde(default)]
    actual: Option<f64>,
}

#[derive(Deserialize)]
struct National {
    data: Vec<Period>,
}

#[derive(Deserialize)]
struct Region {
    data: Vec<Period>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Region),
    Many(Vec<Region>),
}

#[derive(Deserialize)]
struct Regional {
    data: OneOrMany,
}

/// Actual and forecast series from a national response.
pub fn parse_national(zone: &str, body: &str) -> Result<(Series, Series), Error> {
    let resp: National = serde_json::from_str(body).map_err(|source| Error::Json {
        provider: PROVIDER,
        error: source,
    })?;
    let mut actual = Vec::with_capacity(resp.data.len());
    let mut forecast = Vec::with_capacity(resp.data.len());
    for p in &resp.data {
        let timestamp = crate::time::parse(&p.from)?;
        actual.push(Point {
            timestamp,
            value: p.intensity.actual,
        });
        forecast.push(Point {
            timestamp,
            value: p.intensity.forecast,
        });
    }
    Ok((
        Series::new(zone, PROVIDER, Kind::Actual, STEP, actual)?,
        Series::new(zone, PROVIDER, Kind::Forecast, STEP, forecast)?,
    ))
}

/// The forecast series of a regional response (the API publishes no regional actuals).
pub fn parse_regional(zone: &str, body: &str) -> Result<Series, Error> {
    let resp: Regional = serde_json::from_str(body).map_err(|source| Error::Json {
        provider: PROVIDER,
        error: source,
    })?;
    let regions = match resp.data {
        OneOrMany::One(r) => vec![r],
        OneOrMany::Many(rs) => rs,
    };
    if regions.len() != 1 {
        return Err(Error::Invalid(format!(
            "uk: want one region, response has {}",
            regions.len()
        )));
    }
    let points = regions[0]
        .data
        .iter()
        .map(|p| {
            Ok(Point {
                timestamp: crate::time::parse(&p.from)?,
                value: p.intensity.forecast,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Series::new(zone, PROVIDER, Kind::Forecast, STEP, points)
}

/// `2018-01-20T12:00Z`, the path form the API expects.
fn path_time(t: i64) -> String {
    let s = crate::time::format(t);
    format!("{}Z", &s[..16])
}

/// Fetches the past 24 h and next 48 h, national (`region = None`) or for a region id (1-17).
/// Returns (actual, forecast); regional actual is an empty series.
pub async fn fetch(
    client: &reqwest::Client,
    base: &str,
    zone: &str,
    region: Option<u32>,
    now: i64,
) -> Result<(Series, Series), Error> {
    let from = path_time(now.div_euclid(STEP) * STEP);
    match region {
        None => {
            let past = super::get_text(
                client,
                PROVIDER,
                &format!("{base}/intensity/{from}/pt24h"),
                &[],
            )
            .await?;
            let next = super::get_text(
                client,
                PROVIDER,
                &format!("{base}/intensity/{from}/fw48h"),
                &[],
            )
            .await?;
            let (pa, pf) = parse_national(zone, &past)?;
            let (na, nf) = parse_national(zone, &next)?;
            Ok((super::merge(pa, na)?, super::merge(pf, nf)?))
        }
        Some(id) => {
            let url = format!("{base}/regional/intensity/{from}/fw48h/regionid/{id}");
            let forecast =
                parse_regional(zone, &super::get_text(client, PROVIDER, &url, &[]).await?)?;
            Ok((
                Series::new(zone, PROVIDER, Kind::Actual, STEP, Vec::new())?,
                forecast,
            ))
        }
    }
}
