//! Where the engines' C libraries are ([`InferenceEngine::LIBRARY`]). They are opened at run
//! time, never linked or downloaded at build time: one binary runs on every host, and a board
//! without a library still runs the other engines. `scripts/setup.sh` installs the wheels into
//! the project's venv and links the libraries into `.venv/engines/`.
//!
//! [`InferenceEngine::LIBRARY`]: super::InferenceEngine::LIBRARY

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use super::{EngineKind, ModelError, ENGINES};

/// The libraries an engine build may open, by engine name; an engine without an entry opens
/// its library by file name. As clap arguments: one `--<engine>.library` flag per engine with
/// a library, read from its environment variable when not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Libraries(BTreeMap<&'static str, PathBuf>);

impl Libraries {
    /// From each engine's environment variable ([`Library::env`](super::Library::env)).
    pub fn from_env() -> Libraries {
        let mut libraries = Libraries::default();
        for (engine, library) in with_library() {
            if let Some(path) = std::env::var_os(library.env).filter(|v| !v.is_empty()) {
                libraries.set(engine, path.into());
            }
        }
        libraries
    }

    /// These libraries with `engine`'s at `path`.
    pub fn with(mut self, engine: EngineKind, path: impl Into<PathBuf>) -> Libraries {
        self.set(engine, path.into());
        self
    }

    /// Sets `engine`'s library to `path`.
    pub fn set(&mut self, engine: EngineKind, path: PathBuf) {
        self.0.insert(engine.name(), path);
    }

    /// The path configured for `engine`, if any.
    pub fn get(&self, engine: EngineKind) -> Option<&Path> {
        self.0.get(engine.name()).map(PathBuf::as_path)
    }

    /// The library `engine` opens: the configured path, which must exist, else the name the
    /// dynamic loader searches for (`LD_LIBRARY_PATH`, the system's library directories).
    pub fn path_for(&self, engine: EngineKind) -> Result<PathBuf, ModelError> {
        let Some(library) = engine.library() else {
            return Err(ModelError::Library {
                engine,
                path: PathBuf::new(),
                reason: "compiled in, it opens no library".into(),
            });
        };
        match self.get(engine) {
            Some(p) if p.is_file() => Ok(p.to_path_buf()),
            Some(p) => Err(ModelError::Library {
                engine,
                path: p.to_path_buf(),
                reason: "no such file".into(),
            }),
            None => Ok(PathBuf::from(library.file)),
        }
    }
}

/// The engines of [`ENGINES`] that open a library, with it.
fn with_library() -> impl Iterator<Item = (EngineKind, super::Library)> {
    ENGINES
        .iter()
        .filter_map(|e| e.library().map(|library| (*e, library)))
}

/// Each flag's argument id is the flag itself (`onnxruntime.library`).
fn flag(engine: EngineKind) -> String {
    engine.library_flag().unwrap_or_default()
}

impl Args for Libraries {
    fn augment_args(cmd: Command) -> Command {
        with_library().fold(cmd, |cmd, (engine, library)| {
            let flag = flag(engine);
            cmd.arg(
                Arg::new(flag.clone())
                    .long(flag)
                    .env(library.env)
                    .value_name(format!("{}_LIBRARY", engine.name().to_uppercase()))
                    .value_parser(clap::value_parser!(PathBuf))
                    .action(ArgAction::Set)
                    .help(format!(
                        "{}'s C library, {} [default: the loader's search path]",
                        engine.title(),
                        library.file
                    )),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Libraries::augment_args(cmd)
    }
}

impl FromArgMatches for Libraries {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Libraries, clap::Error> {
        let mut libraries = Libraries::default();
        libraries.update_from_arg_matches(matches)?;
        Ok(libraries)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for (engine, _) in with_library() {
            if let Some(path) = matches.get_one::<PathBuf>(&flag(engine)) {
                self.set(engine, path.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_library_must_exist_and_an_unset_one_is_searched_by_name() {
        for (engine, library) in with_library() {
            let missing = format!("/nonexistent/{}", library.file);
            let libs = Libraries::default().with(engine, &missing);
            let err = libs.path_for(engine).unwrap_err().to_string();
            assert!(err.contains(&missing), "{err}");
            assert!(err.contains(library.env), "{err}");
            assert!(err.contains(&format!("--{}", flag(engine))), "{err}");
            assert_eq!(
                Libraries::default().path_for(engine).unwrap(),
                PathBuf::from(library.file)
            );
        }
    }

    /// Every engine with a library has its flag, read from its environment variable too.
    #[test]
    fn every_library_is_a_flag_and_an_environment_variable() {
        let cmd = Libraries::augment_args(Command::new("t").no_binary_name(true));
        let mut argv = Vec::new();
        let mut expected = Libraries::default();
        for (engine, library) in with_library() {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(flag(engine).as_str()))
                .unwrap_or_else(|| panic!("no --{} flag", flag(engine)));
            assert_eq!(
                arg.get_env().and_then(|v| v.to_str()),
                Some(library.env),
                "{engine}"
            );
            let path = format!("/opt/{}", library.file);
            argv.push(format!("--{}={path}", flag(engine)));
            expected.set(engine, path.into());
        }
        let matches = cmd.try_get_matches_from(argv).unwrap();
        assert_eq!(Libraries::from_arg_matches(&matches).unwrap(), expected);
    }
}
