//! Where the C++ engines' shared libraries are. Both are opened at run time, never linked or
//! downloaded at build time: one binary runs on every host, and a board without the library
//! still runs tract. `scripts/setup.sh` installs both wheels into the project's venv and links
//! the libraries into `.venv/engines/`.

use std::path::PathBuf;

use super::{EngineKind, ModelError};

/// Environment variables naming the libraries (the `--onnxruntime.library` and
/// `--litert.library` flags read them too).
pub const ONNXRUNTIME_ENV: &str = "GREENPIPE_ONNXRUNTIME_LIB";
pub const LITERT_ENV: &str = "GREENPIPE_LITERT_LIB";

/// The libraries an engine build may open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Libraries {
    pub onnxruntime: Option<PathBuf>,
    pub litert: Option<PathBuf>,
}

impl Libraries {
    /// From [`ONNXRUNTIME_ENV`] and [`LITERT_ENV`].
    pub fn from_env() -> Libraries {
        let path = |var| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Libraries {
            onnxruntime: path(ONNXRUNTIME_ENV),
            litert: path(LITERT_ENV),
        }
    }

    /// The library `engine` opens: the configured path, which must exist, else the name the
    /// dynamic loader searches for (`LD_LIBRARY_PATH`, the system's library directories).
    pub fn path_for(&self, engine: EngineKind) -> Result<PathBuf, ModelError> {
        let (configured, default_name) = match engine {
            EngineKind::Tract => unreachable!("tract is compiled in"),
            EngineKind::OnnxRuntime => (&self.onnxruntime, "libonnxruntime.so"),
            EngineKind::LiteRt => (&self.litert, "libLiteRt.so"),
        };
        match configured {
            Some(p) if p.is_file() => Ok(p.clone()),
            Some(p) => Err(ModelError::Library {
                engine,
                path: p.clone(),
                reason: "no such file".into(),
            }),
            None => Ok(PathBuf::from(default_name)),
        }
    }
}

/// One line on how to get the library, appended to a failed load.
pub fn how_to_get(engine: EngineKind) -> String {
    match engine {
        EngineKind::Tract => String::new(),
        EngineKind::OnnxRuntime => format!(
            "pass --onnxruntime.library or set {ONNXRUNTIME_ENV} to libonnxruntime.so from the \
             `onnxruntime` wheel (onnxruntime/capi/; scripts/setup.sh links it as \
             .venv/engines/libonnxruntime.so)"
        ),
        EngineKind::LiteRt => format!(
            "pass --litert.library or set {LITERT_ENV} to libLiteRt.so from the \
             `ai-edge-litert` wheel (scripts/setup.sh links it as .venv/engines/libLiteRt.so)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_library_must_exist_and_an_unset_one_is_searched_by_name() {
        let libs = Libraries {
            onnxruntime: Some("/nonexistent/libonnxruntime.so".into()),
            litert: None,
        };
        let err = libs.path_for(EngineKind::OnnxRuntime).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/libonnxruntime.so"),
            "{err}"
        );
        assert!(err.to_string().contains(ONNXRUNTIME_ENV), "{err}");
        assert_eq!(
            libs.path_for(EngineKind::LiteRt).unwrap(),
            PathBuf::from("libLiteRt.so")
        );
    }
}
