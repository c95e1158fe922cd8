//! LiteRT's C API (the 2.x `CompiledModel` API of `libLiteRt.so`), opened at run time.
//!
//! Signatures follow the headers of `google-ai-edge/LiteRT` (`litert/c/litert_environment.h`,
//! `litert_model.h`, `litert_options.h`, `litert_opaque_options.h`, `litert_compiled_model.h`,
//! `litert_tensor_buffer.h`) as exported by the `ai-edge-litert` 2.3 wheel.
//!
//! The thread count reaches the CPU accelerator as opaque options with the identifier
//! `"xnnpack"` and a TOML payload (`num_threads = N`), which the runtime parses when it
//! creates the XNNPACK delegate (`litert/runtime/litert_cpu_options.cc`); the wheel exports no
//! `LiteRtCreateCpuOptions`, so the payload is built here.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::Error;

type Status = c_int;
type Handle = *mut c_void;

const STATUS_OK: Status = 0;
const HW_ACCELERATOR_CPU: c_int = 1;
const LOCK_READ: c_int = 0;
const LOCK_WRITE: c_int = 1;
/// `LiteRtRankedTensorType` is at most ~100 bytes across 2.x releases; it is only ever filled
/// by the library and handed back to it, so its layout need not be mirrored.
const TENSOR_TYPE_BYTES: usize = 512;

const CPU_OPTIONS_ID: &CStr = c"xnnpack";

/// LiteRT's name for a status code (`litert/c/litert_common.h`).
pub fn status_name(code: i32) -> &'static str {
    match code {
        0 => "kLiteRtStatusOk",
        1 => "kLiteRtStatusErrorInvalidArgument",
        2 => "kLiteRtStatusErrorMemoryAllocationFailure",
        3 => "kLiteRtStatusErrorRuntimeFailure",
        4 => "kLiteRtStatusErrorMissingInputTensor",
        5 => "kLiteRtStatusErrorUnsupported",
        6 => "kLiteRtStatusErrorNotFound",
        7 => "kLiteRtStatusErrorTimeoutExpired",
        8 => "kLiteRtStatusErrorWrongVersion",
        9 => "kLiteRtStatusErrorUnknown",
        10 => "kLiteRtStatusErrorAlreadyExists",
        100 => "kLiteRtStatusCancelled",
        500 => "kLiteRtStatusErrorFileIO",
        501 => "kLiteRtStatusErrorInvalidFlatbuffer",
        502 => "kLiteRtStatusErrorDynamicLoading",
        503 => "kLiteRtStatusErrorSerialization",
        504 => "kLiteRtStatusErrorCompilation",
        1000 => "kLiteRtStatusErrorIndexOOB",
        1001 => "kLiteRtStatusErrorInvalidIrType",
        1002 => "kLiteRtStatusErrorInvalidGraphInvariant",
        1003 => "kLiteRtStatusErrorGraphModification",
        _ => "unknown LiteRT status",
    }
}

fn check(step: &'static str, status: Status) -> Result<(), Error> {
    if status == STATUS_OK {
        Ok(())
    } else {
        Err(Error::LiteRt {
            step,
            code: status,
            status: status_name(status),
        })
    }
}

macro_rules! api {
    ($($field:ident = $sym:literal : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        struct Api {
            $($field: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            _lib: libloading::Library,
        }

        impl Api {
            fn load(path: &Path) -> Result<Api, Error> {
                // dlopen's own message for a missing file is only "dlopen failed".
                if !path.exists() {
                    return Err(Error::Library {
                        path: path.to_path_buf(),
                        message: "no such file".into(),
                    });
                }
                // SAFETY: loading runs the library's initialisers; libLiteRt.so's are its C++
                // static constructors (accelerator registration), which have no preconditions.
                let lib = unsafe { libloading::Library::new(path) }.map_err(|e| Error::Library {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                })?;
                $(
                    // SAFETY: the type is the symbol's C signature from the LiteRT headers.
                    let $field = unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(concat!($sym, "\0").as_bytes())
                    }
                    .map(|s| *s)
                    .map_err(|e| Error::Symbol {
                        path: path.to_path_buf(),
                        symbol: $sym,
                        message: e.to_string(),
                    })?;
                )*
                Ok(Api { $($field,)* _lib: lib })
            }
        }
    };
}

api! {
    create_environment = "LiteRtCreateEnvironment": fn(c_int, *const c_void, *mut Handle) -> Status;
    destroy_environment = "LiteRtDestroyEnvironment": fn(Handle);
    create_model_from_buffer = "LiteRtCreateModelFromBuffer": fn(Handle, *const c_void, usize, *mut Handle) -> Status;
    destroy_model = "LiteRtDestroyModel": fn(Handle);
    get_num_model_signatures = "LiteRtGetNumModelSignatures": fn(Handle, *mut usize) -> Status;
    get_model_signature = "LiteRtGetModelSignature": fn(Handle, usize, *mut Handle) -> Status;
    get_num_signature_inputs = "LiteRtGetNumSignatureInputs": fn(Handle, *mut usize) -> Status;
    get_num_signature_outputs = "LiteRtGetNumSignatureOutputs": fn(Handle, *mut usize) -> Status;
    get_signature_input_tensor_by_index = "LiteRtGetSignatureInputTensorByIndex": fn(Handle, usize, *mut Handle) -> Status;
    get_signature_output_tensor_by_index = "LiteRtGetSignatureOutputTensorByIndex": fn(Handle, usize, *mut Handle) -> Status;
    get_signature_output_name = "LiteRtGetSignatureOutputName": fn(Handle, usize, *mut *const c_char) -> Status;
    get_ranked_tensor_type = "LiteRtGetRankedTensorType": fn(Handle, *mut c_void) -> Status;
    create_options = "LiteRtCreateOptions": fn(*mut Handle) -> Status;
    destroy_options = "LiteRtDestroyOptions": fn(Handle);
    set_options_hardware_accelerators = "LiteRtSetOptionsHardwareAccelerators": fn(Handle, c_int) -> Status;
    create_opaque_options = "LiteRtCreateOpaqueOptions": fn(*const c_char, *mut c_void, Option<unsafe extern "C" fn(*mut c_void)>, *mut Handle) -> Status;
    destroy_opaque_options = "LiteRtDestroyOpaqueOptions": fn(Handle);
    add_opaque_options = "LiteRtAddOpaqueOptions": fn(Handle, Handle) -> Status;
    create_compiled_model = "LiteRtCreateCompiledModel": fn(Handle, Handle, Handle, *mut Handle) -> Status;
    destroy_compiled_model = "LiteRtDestroyCompiledModel": fn(Handle);
    get_input_buffer_requirements = "LiteRtGetCompiledModelInputBufferRequirements": fn(Handle, usize, usize, *mut Handle) -> Status;
    get_output_buffer_requirements = "LiteRtGetCompiledModelOutputBufferRequirements": fn(Handle, usize, usize, *mut Handle) -> Status;
    create_managed_buffer = "LiteRtCreateManagedTensorBufferFromRequirements": fn(Handle, *const c_void, Handle, *mut Handle) -> Status;
    get_packed_size = "LiteRtGetTensorBufferPackedSize": fn(Handle, *mut usize) -> Status;
    lock_tensor_buffer = "LiteRtLockTensorBuffer": fn(Handle, *mut *mut c_void, c_int) -> Status;
    unlock_tensor_buffer = "LiteRtUnlockTensorBuffer": fn(Handle) -> Status;
    destroy_tensor_buffer = "LiteRtDestroyTensorBuffer": fn(Handle);
    run_compiled_model = "LiteRtRunCompiledModel": fn(Handle, usize, usize, *mut Handle, usize, *mut Handle) -> Status;
}

/// The library and one environment; compiled models keep it alive.
struct Runtime {
    api: Api,
    env: Handle,
    /// Serialises the calls that go through the environment (compilation, buffer creation).
    env_lock: Mutex<()>,
}

// SAFETY: the environment handle is only used under `env_lock` (or in Drop, when no other
// reference exists); the function pointers and the library handle are immutable.
unsafe impl Send for Runtime {}
// SAFETY: as above.
unsafe impl Sync for Runtime {}

impl Drop for Runtime {
    fn drop(&mut self) {
        // SAFETY: every compiled model holds an Arc to this runtime, so none is left.
        unsafe { (self.api.destroy_environment)(self.env) };
    }
}

/// The opened LiteRT library and its environment.
#[derive(Clone)]
pub struct LiteRt {
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for LiteRt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteRt").finish_non_exhaustive()
    }
}

impl LiteRt {
    /// Opens `libLiteRt.so` at `path` and creates an environment.
    pub fn open(path: &Path) -> Result<LiteRt, Error> {
        let api = Api::load(path)?;
        let mut env: Handle = std::ptr::null_mut();
        // SAFETY: no options (count 0, null array); `env` receives the handle.
        check("LiteRtCreateEnvironment", unsafe {
            (api.create_environment)(0, std::ptr::null(), &mut env)
        })?;
        Ok(LiteRt {
            rt: Arc::new(Runtime {
                api,
                env,
                env_lock: Mutex::new(()),
            }),
        })
    }

    /// Compiles a `.tflite` model for the CPU accelerator (XNNPACK) with `threads` threads.
    /// 0 leaves the count to LiteRT, which in 2.3 means one thread (no pool).
    pub fn compile(&self, tflite: &[u8], threads: usize) -> Result<CompiledModel, Error> {
        let inner = Inner::new(self.rt.clone(), tflite, threads)?;
        Ok(CompiledModel {
            inner: Mutex::new(inner),
        })
    }
}

/// 64-byte aligned copy of the model: LiteRT reads the FlatBuffer (and its weights) in place
/// for the model's whole life.
struct ModelBytes {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl ModelBytes {
    fn new(bytes: &[u8]) -> Result<ModelBytes, Error> {
        if bytes.is_empty() {
            return Err(Error::InvalidModel("the model buffer is empty".into()));
        }
        let layout = std::alloc::Layout::from_size_align(bytes.len(), 64)
            .map_err(|e| Error::InvalidModel(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `ptr` holds `bytes.len()` bytes and does not overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
        Ok(ModelBytes { ptr, layout })
    }
}

impl Drop for ModelBytes {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

#[repr(C, align(16))]
struct TensorType([u8; TENSOR_TYPE_BYTES]);

struct Buffer {
    handle: Handle,
    /// f32 elements.
    len: usize,
}

struct Inner {
    rt: Arc<Runtime>,
    // Field order is destruction order where it matters: see Drop.
    compiled: Handle,
    options: Handle,
    model: Handle,
    _bytes: ModelBytes,
    input: Buffer,
    /// The input's shape (NHWC for image models).
    input_shape: Vec<usize>,
    outputs: Vec<Buffer>,
    output_names: Vec<String>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let api = &self.rt.api;
        // SAFETY: the handles were created by this library and are destroyed once, buffers and
        // the compiled model before the options and the model they were made from.
        unsafe {
            (api.destroy_tensor_buffer)(self.input.handle);
            for b in &self.outputs {
                (api.destroy_tensor_buffer)(b.handle);
            }
            if !self.compiled.is_null() {
                (api.destroy_compiled_model)(self.compiled);
            }
            if !self.options.is_null() {
                (api.destroy_options)(self.options);
            }
            if !self.model.is_null() {
                (api.destroy_model)(self.model);
            }
        }
    }
}

unsafe extern "C" fn free_cstring(p: *mut c_void) {
    if !p.is_null() {
        // SAFETY: the payload is a CString released with `into_raw` in `cpu_options`.
        drop(unsafe { CString::from_raw(p.cast()) });
    }
}

/// Owned handles that are released on early return.
struct Guard<'a> {
    api: &'a Api,
    model: Handle,
    options: Handle,
    compiled: Handle,
    buffers: Vec<Handle>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // SAFETY: every non-null handle here is owned and not yet destroyed.
        unsafe {
            for &b in &self.buffers {
                (self.api.destroy_tensor_buffer)(b);
            }
            if !self.compiled.is_null() {
                (self.api.destroy_compiled_model)(self.compiled);
            }
            if !self.options.is_null() {
                (self.api.destroy_options)(self.options);
            }
            if !self.model.is_null() {
                (self.api.destroy_model)(self.model);
            }
        }
    }
}

impl Inner {
    fn new(rt: Arc<Runtime>, tflite: &[u8], threads: usize) -> Result<Inner, Error> {
        // A buffer that is not a TFLite FlatBuffer must be refused before LiteRT parses it:
        // the identifier sits at bytes 4..8.
        if tflite.len() < 8 || &tflite[4..8] != b"TFL3" {
            return Err(Error::InvalidModel(
                "not a .tflite FlatBuffer (no TFL3 identifier)".into(),
            ));
        }
        let bytes = ModelBytes::new(tflite)?;
        let api = &rt.api;
        let _env = rt.env_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut g = Guard {
            api,
            model: std::ptr::null_mut(),
            options: std::ptr::null_mut(),
            compiled: std::ptr::null_mut(),
            buffers: Vec::new(),
        };
        // SAFETY (this block's calls): arguments are live handles of this library, valid
        // pointers to out-parameters, and the model bytes, which outlive the model.
        unsafe {
            check(
                "LiteRtCreateModelFromBuffer",
                (api.create_model_from_buffer)(
                    rt.env,
                    bytes.ptr.cast(),
                    tflite.len(),
                    &mut g.model,
                ),
            )?;
            let mut n_sig = 0usize;
            check(
                "LiteRtGetNumModelSignatures",
                (api.get_num_model_signatures)(g.model, &mut n_sig),
            )?;
            if n_sig == 0 {
                return Err(Error::InvalidModel("the model has no signature".into()));
            }
            let mut sig: Handle = std::ptr::null_mut();
            check(
                "LiteRtGetModelSignature",
                (api.get_model_signature)(g.model, 0, &mut sig),
            )?;
            let (mut n_in, mut n_out) = (0usize, 0usize);
            check(
                "LiteRtGetNumSignatureInputs",
                (api.get_num_signature_inputs)(sig, &mut n_in),
            )?;
            check(
                "LiteRtGetNumSignatureOutputs",
                (api.get_num_signature_outputs)(sig, &mut n_out),
            )?;
            if n_in != 1 || n_out == 0 {
                return Err(Error::InvalidModel(format!(
                    "the model's signature has {n_in} inputs and {n_out} outputs; one image input is expected"
                )));
            }

            check("LiteRtCreateOptions", (api.create_options)(&mut g.options))?;
            check(
                "LiteRtSetOptionsHardwareAccelerators",
                (api.set_options_hardware_accelerators)(g.options, HW_ACCELERATOR_CPU),
            )?;
            if threads > 0 {
                let payload =
                    CString::new(format!("num_threads = {threads}\n")).expect("no NUL in the TOML");
                let payload = payload.into_raw();
                let mut opaque: Handle = std::ptr::null_mut();
                let status = (api.create_opaque_options)(
                    CPU_OPTIONS_ID.as_ptr(),
                    payload.cast(),
                    Some(free_cstring),
                    &mut opaque,
                );
                if status != STATUS_OK {
                    free_cstring(payload.cast());
                }
                check("LiteRtCreateOpaqueOptions (CPU threads)", status)?;
                let status = (api.add_opaque_options)(g.options, opaque);
                if status != STATUS_OK {
                    (api.destroy_opaque_options)(opaque);
                }
                check("LiteRtAddOpaqueOptions (CPU threads)", status)?;
            }
            check(
                "LiteRtCreateCompiledModel",
                (api.create_compiled_model)(rt.env, g.model, g.options, &mut g.compiled),
            )?;

            let mut make = |tensor: Handle,
                            requirements: Handle,
                            step: &'static str|
             -> Result<Buffer, Error> {
                let mut ty = TensorType([0; TENSOR_TYPE_BYTES]);
                check(
                    "LiteRtGetRankedTensorType",
                    (api.get_ranked_tensor_type)(tensor, ty.0.as_mut_ptr().cast()),
                )?;
                let mut handle: Handle = std::ptr::null_mut();
                check(
                    step,
                    (api.create_managed_buffer)(
                        rt.env,
                        ty.0.as_ptr().cast(),
                        requirements,
                        &mut handle,
                    ),
                )?;
                g.buffers.push(handle);
                let mut size = 0usize;
                check(
                    "LiteRtGetTensorBufferPackedSize",
                    (api.get_packed_size)(handle, &mut size),
                )?;
                Ok(Buffer {
                    handle,
                    len: size / 4,
                })
            };

            let mut tensor: Handle = std::ptr::null_mut();
            check(
                "LiteRtGetSignatureInputTensorByIndex",
                (api.get_signature_input_tensor_by_index)(sig, 0, &mut tensor),
            )?;
            let mut req: Handle = std::ptr::null_mut();
            check(
                "LiteRtGetCompiledModelInputBufferRequirements",
                (api.get_input_buffer_requirements)(g.compiled, 0, 0, &mut req),
            )?;
            let input = make(
                tensor,
                req,
                "LiteRtCreateManagedTensorBufferFromRequirements (input)",
            )?;
            let mut outputs = Vec::with_capacity(n_out);
            let mut output_names = Vec::with_capacity(n_out);
            for i in 0..n_out {
                let mut name: *const c_char = std::ptr::null();
                check(
                    "LiteRtGetSignatureOutputName",
                    (api.get_signature_output_name)(sig, i, &mut name),
                )?;
                output_names.push(if name.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(name).to_string_lossy().into_owned()
                });
                let mut tensor: Handle = std::ptr::null_mut();
                check(
                    "LiteRtGetSignatureOutputTensorByIndex",
                    (api.get_signature_output_tensor_by_index)(sig, i, &mut tensor),
                )?;
                let mut req: Handle = std::ptr::null_mut();
                check(
                    "LiteRtGetCompiledModelOutputBufferRequirements",
                    (api.get_output_buffer_requirements)(g.compiled, 0, i, &mut req),
                )?;
                outputs.push(make(
                    tensor,
                    req,
                    "LiteRtCreateManagedTensorBufferFromRequirements (output)",
                )?);
            }

            let input_shape = input_shape(tflite).ok_or_else(|| {
                Error::InvalidModel("the model's first input has no static shape".into())
            })?;
            if input_shape.iter().product::<usize>() != input.len {
                return Err(Error::InvalidModel(format!(
                    "input shape {input_shape:?} disagrees with the input buffer of {} f32",
                    input.len
                )));
            }
            let inner = Inner {
                rt: rt.clone(),
                input_shape,
                compiled: std::mem::replace(&mut g.compiled, std::ptr::null_mut()),
                options: std::mem::replace(&mut g.options, std::ptr::null_mut()),
                model: std::mem::replace(&mut g.model, std::ptr::null_mut()),
                _bytes: bytes,
                input,
                outputs,
                output_names,
            };
            g.buffers.clear();
            Ok(inner)
        }
    }

    fn write(&self, b: &Buffer, values: &[f32]) -> Result<(), Error> {
        let api = &self.rt.api;
        let mut addr: *mut c_void = std::ptr::null_mut();
        // SAFETY: the buffer is a live host buffer of `b.len` f32; it stays locked while written.
        unsafe {
            check(
                "LiteRtLockTensorBuffer (input)",
                (api.lock_tensor_buffer)(b.handle, &mut addr, LOCK_WRITE),
            )?;
            if addr.is_null() {
                (api.unlock_tensor_buffer)(b.handle);
                return Err(Error::LiteRt {
                    step: "LiteRtLockTensorBuffer (input): null address",
                    code: -1,
                    status: "null",
                });
            }
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                addr.cast::<f32>(),
                b.len.min(values.len()),
            );
            check(
                "LiteRtUnlockTensorBuffer (input)",
                (api.unlock_tensor_buffer)(b.handle),
            )
        }
    }

    fn read(&self, b: &Buffer) -> Result<Vec<f32>, Error> {
        let api = &self.rt.api;
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut out = vec![0.0f32; b.len];
        // SAFETY: as in `write`, reading.
        unsafe {
            check(
                "LiteRtLockTensorBuffer (output)",
                (api.lock_tensor_buffer)(b.handle, &mut addr, LOCK_READ),
            )?;
            if addr.is_null() {
                (api.unlock_tensor_buffer)(b.handle);
                return Err(Error::LiteRt {
                    step: "LiteRtLockTensorBuffer (output): null address",
                    code: -1,
                    status: "null",
                });
            }
            std::ptr::copy_nonoverlapping(addr.cast::<f32>(), out.as_mut_ptr(), b.len);
            check(
                "LiteRtUnlockTensorBuffer (output)",
                (api.unlock_tensor_buffer)(b.handle),
            )?;
        }
        Ok(out)
    }

    fn run_nhwc(&mut self, input: &[f32]) -> Result<(), Error> {
        if input.len() != self.input.len {
            return Err(Error::InputLength {
                got: input.len(),
                expected: self.input.len,
            });
        }
        self.write(&self.input, input)?;
        let mut ins = [self.input.handle];
        let mut outs: Vec<Handle> = self.outputs.iter().map(|b| b.handle).collect();
        // SAFETY: live compiled model and buffers created from its requirements.
        check("LiteRtRunCompiledModel", unsafe {
            (self.rt.api.run_compiled_model)(
                self.compiled,
                0,
                1,
                ins.as_mut_ptr(),
                outs.len(),
                outs.as_mut_ptr(),
            )
        })
    }
}

/// The shape of subgraph 0's first input, read through the generated tables (which check
/// every offset they follow).
fn input_shape(buf: &[u8]) -> Option<Vec<usize>> {
    use planus::ReadAsRoot;
    let model = crate::tflite::schema::tflite::ModelRef::read_as_root(buf).ok()?;
    let subgraph = model.subgraphs().ok()??.first()?.ok()?;
    let index = usize::try_from(subgraph.inputs().ok()??.first()?).ok()?;
    let tensor = subgraph.tensors().ok()??.get(index)?.ok()?;
    tensor
        .shape()
        .ok()??
        .iter()
        .map(|d| usize::try_from(d).ok().filter(|&d| d > 0))
        .collect()
}

/// A model compiled for LiteRT's CPU accelerator, with its input and output buffers. Runs are
/// serialised: one compiled model (a TFLite interpreter underneath) is not re-entrant.
pub struct CompiledModel {
    inner: Mutex<Inner>,
}

// SAFETY: every use of the handles goes through the Mutex; LiteRT objects are not tied to the
// thread that created them.
unsafe impl Send for CompiledModel {}
// SAFETY: as above.
unsafe impl Sync for CompiledModel {}

impl std::fmt::Debug for CompiledModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledModel").finish_non_exhaustive()
    }
}

impl CompiledModel {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of f32 values the input takes.
    pub fn input_len(&self) -> usize {
        self.lock().input.len
    }

    /// The model's input shape as the model declares it (`[N, H, W, C]` for the converted
    /// image classifiers; [`CompiledModel::run`] takes the NCHW batch of the same size).
    pub fn input_shape(&self) -> Vec<usize> {
        self.lock().input_shape.clone()
    }

    /// Runs the image classifier on an NCHW batch (transposed here to the model's NHWC input);
    /// returns the first output (the logits).
    pub fn run(&self, input_nchw: &[f32]) -> Result<Vec<f32>, Error> {
        let shape = self.lock().input_shape.clone();
        let expected: usize = shape.iter().product();
        if input_nchw.len() != expected {
            return Err(Error::InputLength {
                got: input_nchw.len(),
                expected,
            });
        }
        match shape[..] {
            [n, h, w, c] => self.run_nhwc(&nchw_to_nhwc(input_nchw, [n, c, h, w])),
            _ => self.run_nhwc(input_nchw),
        }
    }

    /// Runs on an NHWC input; returns every signature output as (name, values).
    pub fn run_nhwc_all(&self, input_nhwc: &[f32]) -> Result<Vec<(String, Vec<f32>)>, Error> {
        let mut inner = self.lock();
        inner.run_nhwc(input_nhwc)?;
        let mut out = Vec::with_capacity(inner.outputs.len());
        for (b, name) in inner.outputs.iter().zip(&inner.output_names) {
            out.push((name.clone(), inner.read(b)?));
        }
        Ok(out)
    }

    /// Runs on an NHWC input; returns the first output.
    pub fn run_nhwc(&self, input_nhwc: &[f32]) -> Result<Vec<f32>, Error> {
        let mut inner = self.lock();
        inner.run_nhwc(input_nhwc)?;
        let first = &inner.outputs[0];
        inner.read(first)
    }
}

/// `[N, C, H, W]` → `[N, H, W, C]`.
pub fn nchw_to_nhwc(x: &[f32], [n, c, h, w]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for b in 0..n {
        for ch in 0..c {
            for y in 0..h {
                let src = ((b * c + ch) * h + y) * w;
                for xx in 0..w {
                    out[((b * h + y) * w + xx) * c + ch] = x[src + xx];
                }
            }
        }
    }
    out
}
