//! The one NVML handle of the process, shared by the `nvml` meter kind and the `gpu` collector.
//!
//! `nvmlInit` is process-wide (NVML counts initialisations; `nvmlShutdown` undoes one), and
//! loading the library resolves a few hundred symbols, so it is done once, on first use, and
//! its outcome kept: a host without `libnvidia-ml.so.1` (nvml-wrapper `dlopen`s it at run time
//! through libloading, so the exporter builds and runs without NVIDIA software) or without a
//! loaded driver gets the same reason from every caller, logged once by each of them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

/// The process's NVML handle, initialised on first call; `Err` says why there is none.
pub fn handle() -> Result<Arc<Nvml>, String> {
    static HANDLE: OnceLock<Result<Arc<Nvml>, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| Nvml::init().map(Arc::new).map_err(|e| init_error(&e)))
        .clone()
}

/// Why NVML could not be initialised, for the availability reason and the log.
pub fn init_error(e: &NvmlError) -> String {
    match e {
        // libloading's text names the library: `libnvidia-ml.so.1: cannot open shared ...`.
        NvmlError::LibloadingError(e) => format!("no NVIDIA driver: {e}"),
        NvmlError::DriverNotLoaded => "NVML: the NVIDIA kernel driver is not loaded".into(),
        NvmlError::NoPermission => "NVML: no permission to talk to the NVIDIA driver".into(),
        other => format!("NVML initialisation failed: {other}"),
    }
}

/// The number of GPUs NVML sees, or why it sees none.
pub fn device_count(nvml: &Nvml) -> Result<u32, String> {
    match nvml.device_count() {
        Ok(0) => Err("NVML reports no GPU".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("NVML device count: {e}")),
    }
}

/// Logs `message` (a warning) the first time it is given in this process; later calls with the
/// same text are silent. For what is not supported by a GPU: it will not become supported.
pub fn warn_once(message: String) {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen
        .get_or_insert_with(HashSet::new)
        .insert(message.clone())
    {
        tracing::warn!("{message}");
    }
}

/// The value of a call whose `NotSupported` answer means "this GPU has no such value": `None`,
/// logged once with `what` and the GPU index. Other errors are returned.
pub fn optional<T>(
    gpu: u32,
    what: &str,
    result: Result<T, NvmlError>,
) -> Result<Option<T>, NvmlError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported) => {
            warn_once(format!("NVML GPU {gpu}: {what} is not supported; left out"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
