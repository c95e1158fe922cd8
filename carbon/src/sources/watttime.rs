//! WattTime API v3 (<https://api.watttime.org>). Log in with HTTP basic auth at `GET /login`
//! (`{"token": ...}`), then send `Authorization: Bearer <token>`.
//!
//! * `GET /v3/historical?region=R&start=..&end=..&signal_type=S`
//! * `GET /v3/forecast?region=R&signal_type=S&horizon_hours=48`
//!
//! Both answer `{"data":[{"point_time","value"}],"meta":{"region","signal_type","units",
//! "data_point_period_seconds",...}}`, 5-minute points. The signal type is the user's choice:
//! `co2_moer` (marginal) or `co2_aoer` (average). Values come in the unit `meta.units` names,
//! normally `lbs_co2_per_mwh`, and are converted to g/kWh.

use super::{Source, ZoneData};
use crate::series::{Kind, Point, Series};
use crate::Error;
use serde::Deserialize;
use std::path::PathBuf;

/// Default API base URL.
pub const BASE_URL: &str = "https://api.watttime.org";
/// Environment variables holding the credentials when no password file is given.
pub const USER_ENV: &str = "WATTTIME_USER";
/// See [`USER_ENV`].
pub const PASSWORD_ENV: &str = "WATTTIME_PASSWORD";
const PROVIDER: &str = "watttime";
/// Grams per pound.
const GRAMS_PER_POUND: f64 = 453.592_37;

/// Which emission signal to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Signal {
    /// Marginal operating emissions rate (`co2_moer`): what one more kWh emits now.
    Marginal,
    /// Average operating emissions rate (`co2_aoer`): the mix's average.
    Average,
}

impl Signal {
    /// The `signal_type` query value.
    pub fn signal_type(self) -> &'static str {
        match self {
            Signal::Marginal => "co2_moer",
            Signal::Average => "co2_aoer",
        }
    }
}

/// `ZONE=watttime:REGION`, with WattTime's region name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WattTime(pub String);

/// WattTime's flags.
#[derive(Debug, Clone, Default, clap::Args)]
// Flattened beside the other providers' flags: an argument group per type would collide.
#[group(skip)]
pub struct Flags {
    /// WattTime user name (else $WATTTIME_USER).
    #[arg(long)]
    watttime_user: Option<String>,
    /// File holding the WattTime password (else $WATTTIME_PASSWORD).
    #[arg(long)]
    watttime_password_file: Option<PathBuf>,
    /// WattTime signal: marginal (co2_moer) or average (co2_aoer). Required for WattTime zones.
    #[arg(long, value_enum)]
    watttime_signal: Option<Signal>,
}

/// The login, when both halves were given, and the signal, when chosen.
#[derive(Debug, Clone)]
pub struct Credentials {
    login: Option<(String, String)>,
    signal: Option<Signal>,
}

/// Hours of history fetched for the forecaster.
const HISTORY_HOURS: i64 = 24 * 14;

impl Source for WattTime {
    const NAME: &'static str = "watttime";
    const ARGUMENT: &'static str = "REGION";
    type Flags = Flags;
    type Credentials = Credentials;

    fn parse(arg: &str) -> Result<Self, String> {
        Ok(WattTime(arg.to_string()))
    }

    fn credentials(flags: &Flags) -> Result<Credentials, Error> {
        let user = flags
            .watttime_user
            .clone()
            .or_else(|| std::env::var(USER_ENV).ok());
        let password = crate::secrets::load(flags.watttime_password_file.as_deref(), PASSWORD_ENV)?;
        Ok(Credentials {
            login: user.zip(password),
            signal: flags.watttime_signal,
        })
    }

    async fn fetch(
        &self,
        client: &reqwest::Client,
        zone: &str,
        credentials: &Credentials,
        now: i64,
    ) -> Result<ZoneData, Error> {
        let (user, password) = credentials.login.as_ref().ok_or_else(|| {
            Error::Invalid(format!(
                "{zone}: WattTime needs ${USER_ENV} and ${PASSWORD_ENV} (or --watttime-password-file)"
            ))
        })?;
        let signal = credentials.signal.ok_or_else(|| {
            Error::Invalid(format!(
                "{zone}: WattTime needs --watttime-signal marginal|average"
            ))
        })?;
        let (actual, forecast) = fetch(
            client,
            BASE_URL,
            &self.0,
            signal,
            (user, password),
            now,
            HISTORY_HOURS,
        )
        .await?;
        Ok(ZoneData {
            actual,
            forecast: Some(forecast),
        }
        .renamed(zone))
    }
}

#[derive(Deserialize)]
struct Response {
    data: Vec<DataPoint>,
    meta: Meta,
}

#[derive(Deserialize)]
struct DataPoint {
    point_time: String,
    value: Option<f64>,
}

#[derive(Deserialize)]
struct Meta {
    units: String,
    #[serde(default)]
    data_point_period_seconds: Option<i64>,
    #[serde(default)]
    signal_type: Option<String>,
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

/// Factor from the response's unit to g/kWh; an unknown unit is an error, not a guess.
fn to_grams_per_kwh(units: &str) -> Result<f64, Error> {
    match units {
        // 1 lb/MWh = 453.59237 g / 1000 kWh
        "lbs_co2_per_mwh" | "lbs_co2e_per_mwh" => Ok(GRAMS_PER_POUND / 1000.0),
        "kg_co2_per_mwh" | "kg_co2e_per_mwh" | "g_co2_per_kwh" | "g_co2e_per_kwh" => Ok(1.0),
        other => Err(Error::Invalid(format!("watttime: unknown unit {other:?}"))),
    }
}

/// Parses a `historical` or `forecast` body into a series of `kind`, checking the signal type
/// is the one asked for (a marginal series must never be labelled average).
pub fn parse(zone: &str, kind: Kind, signal: Signal, body: &str) -> Result<Series, Error> {
    let resp: Response = serde_json::from_str(body).map_err(|source| Error::Json {
        provider: PROVIDER,
        error: source,
    })?;
    if let Some(s) = &resp.meta.signal_type {
        if s != signal.signal_type() {
            return Err(Error::Invalid(format!(
                "watttime: asked for {} but response is {s}",
                signal.signal_type()
            )));
        }
    }
    let factor = to_grams_per_kwh(&resp.meta.units)?;
    let step = resp.meta.data_point_period_seconds.unwrap_or(300);
    let points = resp
        .data
        .iter()
        .map(|d| {
            Ok(Point {
                timestamp: crate::time::parse(&d.point_time)?,
                value: d.value.map(|v| v * factor),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Series::new(
        zone,
        format!("{PROVIDER}_{}", signal.signal_type()),
        kind,
        step,
        points,
    )
}

/// Logs in and fetches the past `history_hours` and the next 48 h.
pub async fn fetch(
    client: &reqwest::Client,
    base: &str,
    region: &str,
    signal: Signal,
    (user, password): (&str, &str),
    now: i64,
    history_hours: i64,
) -> Result<(Series, Series), Error> {
    let url = format!("{base}/login");
    let resp = client
        .get(&url)
        .basic_auth(user, Some(password))
        .send()
        .await
        .map_err(|source| Error::Request {
            provider: PROVIDER,
            url: url.clone(),
            source,
        })?;
    let body = super::check(PROVIDER, &url, resp).await?;
    let token: Login = serde_json::from_str(&body).map_err(|source| Error::Json {
        provider: PROVIDER,
        error: source,
    })?;
    let bearer = format!("Bearer {}", token.token);
    let auth = [("authorization", bearer.as_str())];
    let st = signal.signal_type();
    let start = crate::time::format(now - history_hours * 3600);
    let end = crate::time::format(now);
    let hist_url =
        format!("{base}/v3/historical?region={region}&start={start}&end={end}&signal_type={st}");
    let fc_url = format!("{base}/v3/forecast?region={region}&signal_type={st}&horizon_hours=48");
    let actual = parse(
        region,
        Kind::Actual,
        signal,
        &super::get_text(client, PROVIDER, &hist_url, &auth).await?,
    )?;
    let forecast = parse(
        region,
        Kind::Forecast,
        signal,
        &super::get_text(client, PROVIDER, &fc_url, &auth).await?,
    )?;
    Ok((actual, forecast))
}
