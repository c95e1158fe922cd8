//! Carbon-intensity sources, one file per provider. Each file has pure `parse_*` functions over
//! the documented response body (unit-tested with fixture bodies), an async `fetch`, and the
//! provider's [`Source`] implementation: its `ZONE=provider:arg` argument, its flags and
//! credentials. [`sources!`] below is the one list of providers.

mod source;

pub use source::{NoFlags, Source};

use crate::series::{Kind, Series};
use crate::Error;

/// Declares the provider modules and generates what dispatches over them: [`Provider`],
/// [`SourceFlags`], [`Credentials`] and [`PROVIDERS`].
macro_rules! sources {
    ($($module:ident :: $source:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// A provider and the key it knows the zone by.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Provider {
            $(
                #[allow(missing_docs)]
                $source($module::$source),
            )+
        }

        /// Every provider's flags, flattened into each command that reads zones.
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct SourceFlags {
            $(
                #[command(flatten)]
                $module: <$module::$source as Source>::Flags,
            )+
        }

        /// The resolved credentials of the providers in use (`None` for the others).
        #[derive(Debug, Clone, Default)]
        pub struct Credentials {
            $($module: Option<<$module::$source as Source>::Credentials>,)+
        }

        /// Every provider as named in `ZONE=provider:arg`, with its argument's form.
        pub const PROVIDERS: &[(&str, &str)] = &[
            $((<$module::$source as Source>::NAME, <$module::$source as Source>::ARGUMENT),)+
        ];

        /// The provider files, for the registry test.
        #[cfg(test)]
        const MODULES: &[&str] = &[$(stringify!($module),)+];

        impl Provider {
            /// `None` when no provider is called `name`.
            fn parse(name: &str, arg: &str) -> Option<Result<Provider, String>> {
                $(
                    if name == <$module::$source as Source>::NAME {
                        return Some(<$module::$source as Source>::parse(arg).map(Provider::$source));
                    }
                )+
                None
            }

            /// The provider's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Provider::$source(_) => <$module::$source as Source>::NAME,)+
                }
            }

            async fn fetch(
                &self,
                client: &reqwest::Client,
                zone: &str,
                credentials: &Credentials,
                now: i64,
            ) -> Result<ZoneData, Error> {
                match self {
                    $(
                        Provider::$source(source) => {
                            let resolved = credentials.$module.as_ref().ok_or_else(|| {
                                Error::Invalid(format!(
                                    "{zone}: {} credentials were not resolved (SourceFlags::credentials)",
                                    self.name()
                                ))
                            })?;
                            source.fetch(client, zone, resolved, now).await
                        }
                    )+
                }
            }
        }

        impl SourceFlags {
            /// Resolves the credentials of the providers `sources` use.
            pub fn credentials(&self, sources: &[ZoneSource]) -> Result<Credentials, Error> {
                let mut resolved = Credentials::default();
                $(
                    if sources.iter().any(|s| matches!(s.provider, Provider::$source(_))) {
                        resolved.$module =
                            Some(<$module::$source as Source>::credentials(&self.$module)?);
                    }
                )+
                Ok(resolved)
            }
        }
    };
}

// The providers: one line each.
sources! {
    csv::Csv,
    uk::Uk,
    electricity_maps::ElectricityMaps,
    watttime::WattTime,
}

/// Where one zone's data comes from, as written on the command line: `ZONE=provider:arg`, e.g.
/// `ZONE=csv:PATH`, `ZONE=uk:national`, `ZONE=electricitymaps:DE`, `ZONE=watttime:CAISO_NORTH`
/// ([`PROVIDERS`] lists them all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSource {
    /// The zone name GreenPipe uses (labels, node mapping).
    pub zone: String,
    /// The provider and its argument.
    pub provider: Provider,
}

impl std::str::FromStr for ZoneSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (zone, spec) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: want ZONE=provider:arg"))?;
        let (name, arg) = spec
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: want ZONE=provider:arg"))?;
        if zone.is_empty() || arg.is_empty() {
            return Err(format!("{s:?}: zone and argument must not be empty"));
        }
        let provider = Provider::parse(name, arg)
            .ok_or_else(|| {
                let names: Vec<&str> = PROVIDERS.iter().map(|(name, _)| *name).collect();
                format!("{s:?}: unknown provider {name:?} ({})", names.join(", "))
            })?
            .map_err(|e| format!("{s:?}: {e}"))?;
        Ok(ZoneSource {
            zone: zone.to_string(),
            provider,
        })
    }
}

/// The `--source` help: every provider's form.
pub fn zone_source_help() -> String {
    let forms: Vec<String> = PROVIDERS
        .iter()
        .map(|(name, arg)| format!("ZONE={name}:{arg}"))
        .collect();
    format!("Zone source, repeatable: {}", forms.join(" | "))
}

/// What a source returned for one zone.
#[derive(Debug, Clone)]
pub struct ZoneData {
    /// Measured (or after-the-fact estimated) intensity.
    pub actual: Series,
    /// The provider's forecast, when it publishes one.
    pub forecast: Option<Series>,
}

impl ZoneData {
    /// Names both series after `zone`, the name GreenPipe uses, whatever the provider called it.
    pub fn renamed(mut self, zone: &str) -> ZoneData {
        self.actual.zone = zone.to_string();
        if let Some(forecast) = &mut self.forecast {
            forecast.zone = zone.to_string();
        }
        self
    }
}

/// Fetches one zone with the credentials [`SourceFlags::credentials`] resolved for `sources`.
/// `now` bounds replays (CSV points after it are dropped, so a historical file shows its past).
pub async fn fetch(
    client: &reqwest::Client,
    source: &ZoneSource,
    credentials: &Credentials,
    now: i64,
) -> Result<ZoneData, Error> {
    source
        .provider
        .fetch(client, &source.zone, credentials, now)
        .await
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
        assert_eq!(s.provider, Provider::Uk(uk::Uk::National));
        let s: ZoneSource = "LDN=uk:region:13".parse().unwrap();
        assert_eq!(s.provider, Provider::Uk(uk::Uk::Region(13)));
        let s: ZoneSource = "CISO=csv:/data/CISO.csv".parse().unwrap();
        assert_eq!(s.provider, Provider::Csv(csv::Csv("/data/CISO.csv".into())));
        for bad in ["GB", "GB=uk", "GB=uk:region:40", "X=ftp:y", "=csv:a"] {
            assert!(bad.parse::<ZoneSource>().is_err(), "{bad}");
        }
        let unknown = "X=ftp:y".parse::<ZoneSource>().unwrap_err();
        assert!(
            unknown.contains("(csv, uk, electricitymaps, watttime)"),
            "{unknown}"
        );
    }

    /// A provider file that is not on the `sources!` line list would not be compiled at all;
    /// this catches it, so the list stays the one registry.
    #[test]
    fn the_source_list_is_the_only_registry() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sources");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .filter(|stem| stem != "mod" && stem != "source")
            .collect();
        files.sort();
        let mut listed: Vec<String> = MODULES.iter().map(|m| m.to_string()).collect();
        listed.sort();
        assert_eq!(
            files, listed,
            "every file in src/sources is one `sources!` line"
        );
        let mut names: Vec<&str> = PROVIDERS.iter().map(|(name, _)| *name).collect();
        names.dedup();
        assert_eq!(names.len(), PROVIDERS.len(), "provider names are unique");
    }
}
