//! What an inference engine declares, and the [`EngineKind`] that carries it.
//!
//! An engine is one unit type implementing [`InferenceEngine`] in its own file; the type's
//! associated items are the engine (its name, platform, precisions, C library, build).
//! [`ENGINES`](super::ENGINES) lists them; `--engine`, its default, help and errors, the
//! `--<engine>.library` flags with their environment variables ([`Libraries`]), `list` and the
//! load errors' advice are generated from that list.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::{Libraries, ModelError, ModelSpec, Precision, ENGINES};

/// One inference engine.
pub trait InferenceEngine: 'static {
    /// The `--engine` value and the `engine` label; also its file's name.
    const NAME: &'static str;
    /// The name people know it by, for help texts (`ONNX Runtime`).
    const TITLE: &'static str;
    /// The model metadata's `platform` (Open Inference Protocol: `<backend>_<format>`, as in
    /// Triton's and KServe's `onnxruntime_onnx`).
    const PLATFORM: &'static str;
    /// The precisions it computes in; others are refused rather than run as another.
    const PRECISIONS: &'static [Precision];
    /// The C library it opens at run time; `None` for an engine compiled in.
    const LIBRARY: Option<Library> = None;
    /// The cargo feature that compiles it in, for an optional engine.
    const FEATURE: Option<&'static str> = None;
    /// Whether this build has it (`cfg!(feature = …)` for an optional engine). An engine this
    /// build lacks stays listed, so that `--engine` names it and says how to get it.
    const BUILT: bool = true;

    /// Builds `spec`'s network (already validated against [`Self::PRECISIONS`]). int8 takes its
    /// activation ranges from `calibration`, a preprocessed batch, run on the engine itself.
    fn build(
        spec: &ModelSpec,
        calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<Arc<dyn Network>, ModelError>;
}

/// A built network, whichever engine runs it.
pub trait Network: fmt::Debug + Send + Sync {
    /// Runs one NCHW batch of `shape`; returns the logits.
    fn infer(&self, shape: &[usize; 4], input: &[f32]) -> Result<Vec<f32>, ModelError>;

    /// The precision the network takes its input in: f16 for tract's f16 model, f32 otherwise
    /// (int8 quantizes inside the graph).
    fn input_precision(&self) -> Precision {
        Precision::F32
    }
}

/// An engine's C library, opened at run time, never linked: one binary runs on every host, and a
/// host without the library still runs the other engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Library {
    /// The environment variable naming it (`--<engine>.library` reads it too).
    pub env: &'static str,
    /// The file name the dynamic loader searches for when none is configured.
    pub file: &'static str,
    /// Where [`Self::file`] comes from, ending the advice of a failed load.
    pub source: &'static str,
}

/// An engine: its entry in [`ENGINES`](super::ENGINES), what `--engine` parses to. A pointer,
/// so that errors and specs carrying one stay small.
#[derive(Clone, Copy)]
pub struct EngineKind(&'static Def);

/// What [`EngineKind`] points to: [`InferenceEngine`] without its type.
struct Def {
    name: &'static str,
    title: &'static str,
    platform: &'static str,
    precisions: &'static [Precision],
    library: Option<Library>,
    feature: Option<&'static str>,
    built: bool,
    build: Build,
}

/// [`InferenceEngine::build`] as a function pointer.
type Build = fn(&ModelSpec, &[f32], &Libraries) -> Result<Arc<dyn Network>, ModelError>;

/// Holds engine `E`'s [`Def`] as a constant, so that [`EngineKind::of`] can point to it.
struct DefOf<E>(std::marker::PhantomData<E>);

impl<E: InferenceEngine> DefOf<E> {
    const DEF: Def = Def {
        name: E::NAME,
        title: E::TITLE,
        platform: E::PLATFORM,
        precisions: E::PRECISIONS,
        library: E::LIBRARY,
        feature: E::FEATURE,
        built: E::BUILT,
        build: E::build,
    };
}

impl EngineKind {
    /// The entry of engine `E`.
    pub const fn of<E: InferenceEngine>() -> EngineKind {
        EngineKind(&DefOf::<E>::DEF)
    }

    /// [`InferenceEngine::NAME`].
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// [`InferenceEngine::TITLE`].
    pub fn title(self) -> &'static str {
        self.0.title
    }

    /// [`InferenceEngine::PLATFORM`].
    pub fn platform(self) -> &'static str {
        self.0.platform
    }

    /// [`InferenceEngine::PRECISIONS`].
    pub fn precisions(self) -> &'static [Precision] {
        self.0.precisions
    }

    /// [`InferenceEngine::LIBRARY`].
    pub fn library(self) -> Option<Library> {
        self.0.library
    }

    /// [`InferenceEngine::FEATURE`].
    pub fn feature(self) -> Option<&'static str> {
        self.0.feature
    }

    /// [`InferenceEngine::BUILT`].
    pub fn built(self) -> bool {
        self.0.built
    }

    /// The flag naming its library, without the dashes (`onnxruntime.library`).
    pub fn library_flag(self) -> Option<String> {
        self.0.library.map(|_| format!("{}.library", self.0.name))
    }

    /// How to get its library, appended to a failed load; empty for an engine compiled in.
    pub fn how_to_get(self) -> String {
        match (self.0.library, self.library_flag()) {
            (Some(l), Some(flag)) => format!(
                "pass --{flag} or set {} to {} from {}",
                l.env, l.file, l.source
            ),
            _ => String::new(),
        }
    }

    /// Builds `spec`'s network on this engine ([`InferenceEngine::build`]).
    pub(super) fn build(
        self,
        spec: &ModelSpec,
        calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<Arc<dyn Network>, ModelError> {
        if !self.0.built {
            return Err(ModelError::NotBuilt { engine: self });
        }
        (self.0.build)(spec, calibration, libraries)
    }
}

/// `a`, `a or b`, `a, b or c`: the names in an error or a help line.
pub(super) fn either<S: AsRef<str>>(names: &[S], conjunction: &str) -> String {
    match names {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [rest @ .., last] => {
            let rest: Vec<&str> = rest.iter().map(AsRef::as_ref).collect();
            format!("{} {conjunction} {}", rest.join(", "), last.as_ref())
        }
    }
}

/// Every engine's name: `tract, onnxruntime or litert`.
pub fn engine_names() -> String {
    let names: Vec<&str> = ENGINES.iter().map(|e| e.name()).collect();
    either(&names, "or")
}

/// What `--engine` runs when none is given: the first engine of the list this build has.
pub fn default_engine() -> EngineKind {
    *ENGINES.iter().find(|e| e.built()).unwrap_or(&ENGINES[0])
}

/// The help of `--engine`, generated from [`ENGINES`](super::ENGINES): the engines, and when
/// the first (the default) is optional, what runs without it.
pub fn engine_help() -> String {
    let mut help = format!("{} (`infer`: a list sweeps)", engine_names());
    if let Some(first) = ENGINES.first() {
        if let Some(feature) = first.feature() {
            help.push_str(&format!(
                "; {first} unless this build has no {first} (cargo feature `{feature}`)"
            ));
        }
    }
    help
}

/// The text of [`ModelError::NotBuilt`]: why, and what to use instead.
pub(super) fn not_built(engine: EngineKind) -> String {
    let others: Vec<&str> = ENGINES
        .iter()
        .filter(|e| e.built() && e.name() != engine.name())
        .map(|e| e.name())
        .collect();
    let feature = engine
        .feature()
        .map(|f| format!(" (cargo feature `{f}`)"))
        .unwrap_or_default();
    format!(
        "--engine {engine}: this greenpipe-workload was built without {engine}{feature}; use \
         --engine {}, or rebuild with the default features",
        either(&others, "or")
    )
}

/// The text of [`ModelError::Unsupported`]: what the engine runs, and which engines run the
/// refused precision.
pub(super) fn unsupported(engine: EngineKind, precision: Precision) -> String {
    let runs: Vec<&str> = engine.precisions().iter().map(|p| p.name()).collect();
    let owners: Vec<&str> = ENGINES
        .iter()
        .filter(|e| e.precisions().contains(&precision))
        .map(|e| e.name())
        .collect();
    if owners.is_empty() {
        return format!(
            "--engine {engine} runs {}, not {precision}",
            either(&runs, "and")
        );
    }
    let possessive: Vec<String> = owners.iter().map(|o| format!("{o}'s")).collect();
    format!(
        "--engine {engine} runs {}, not {precision}; {precision} is {} (--engine {})",
        either(&runs, "and"),
        either(&possessive, "or"),
        either(&owners, "or")
    )
}

impl PartialEq for EngineKind {
    fn eq(&self, other: &EngineKind) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for EngineKind {}

impl fmt::Debug for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("EngineKind").field(&self.0.name).finish()
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl FromStr for EngineKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        ENGINES
            .iter()
            .find(|e| e.name() == s)
            .copied()
            .ok_or_else(|| ModelError::UnknownEngine(s.to_string()))
    }
}
