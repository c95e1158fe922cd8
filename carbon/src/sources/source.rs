//! What a carbon-intensity source is. Each provider is one file in this folder implementing
//! [`Source`], with its command-line flags and credentials; `sources!` in `mod.rs` lists them,
//! one line each, and generates the rest (parsing `ZONE=provider:arg`, the flags every zone
//! command takes, credential loading, dispatch).

use super::ZoneData;
use crate::Error;

/// One provider: the argument a zone names it by, its flags, and how it fetches.
pub trait Source: Sized + Clone + PartialEq + Eq + std::fmt::Debug + Send + Sync {
    /// The provider name in `ZONE=provider:arg`.
    const NAME: &'static str;
    /// The argument's form, for help and errors (`PATH`, `national|region:1..17`).
    const ARGUMENT: &'static str;
    /// Its command-line flags (credentials, options), flattened into every command that reads
    /// zones. Flag names start with the provider name so they never collide.
    type Flags: clap::Args + Clone + std::fmt::Debug + Default + Send + Sync;
    /// What the flags resolve to before fetching (secrets read from files or the environment).
    type Credentials: Clone + std::fmt::Debug + Send + Sync;

    /// Parses the `arg` of `ZONE=provider:arg`.
    fn parse(arg: &str) -> Result<Self, String>;

    /// Resolves the flags; called once, and only when some zone uses this provider, so that an
    /// unused provider's missing secret is not an error.
    fn credentials(flags: &Self::Flags) -> Result<Self::Credentials, Error>;

    /// Fetches one zone; `zone` is the name GreenPipe uses for it (series are renamed to it).
    /// `now` bounds replays: nothing after it is returned.
    fn fetch(
        &self,
        client: &reqwest::Client,
        zone: &str,
        credentials: &Self::Credentials,
        now: i64,
    ) -> impl std::future::Future<Output = Result<ZoneData, Error>> + Send;
}

/// For providers that take no flags.
#[derive(Debug, Clone, Default, clap::Args)]
// Flattened beside the other providers' flags: an argument group per type would collide.
#[group(skip)]
pub struct NoFlags {}
