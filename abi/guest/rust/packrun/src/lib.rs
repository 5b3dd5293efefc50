//! Rust guest SDK for the packrun host ABI v1.
//!
//! A node pack is a `cdylib` for `wasm32-unknown-unknown` that declares its
//! pack name and nodes with [`pack!`]; the macro generates every export the
//! host needs (`openwop_abi_version`, `openwop_pack_name`, `openwop_node_count`,
//! `openwop_node_id_at`, `openwop_alloc`, `openwop_free`, `openwop_node_invoke`).
//! The SDK parses the request envelope, calls the handler with the
//! [`Context`] and the `inputs` JSON, and turns its `Result<Output, Error>`
//! into the response envelope. Host services are plain functions returning
//! `Result<T, Status>`.
//!
//! ```ignore
//! use packrun::{json, Context, Error, Output};
//!
//! packrun::pack! {
//!     name: "local.greeter",
//!     nodes: { "example.greet" => greet },
//! }
//!
//! fn greet(_ctx: &Context, input: &str) -> Result<Output, Error> {
//!     let input = json::parse(input)?;
//!     let name = input.get("name").and_then(json::Value::as_str).unwrap_or("world");
//!     packrun::info!("greeting {}", name);
//!     Ok(Output::json(json::object([("greeting", format!("Hello, {}!", name).into())])))
//! }
//! ```
//!
//! No dependencies outside `std`; builds with rustc 1.63:
//!
//! ```text
//! rustc --edition 2021 --crate-type rlib --crate-name packrun --target wasm32-unknown-unknown -C opt-level=s -o libpackrun.rlib packrun/src/lib.rs
//! rustc --edition 2021 --crate-type cdylib --target wasm32-unknown-unknown -C opt-level=s --extern packrun=libpackrun.rlib -o node.wasm node.rs
//! ```
//!
//! Memory: the host's buffers are copied into owned `String`s (host-call
//! results) or borrowed for the duration of the handler (the request); what
//! the SDK hands to the host (the response) is freed by the host through
//! `openwop_free`. Handlers never see raw pointers.

#![warn(missing_docs)]

use std::fmt;

// ---------------------------------------------------------------- status

/// A failed host call: the host's non-zero status, or an SDK-side problem
/// with the arguments or the response (`InvalidJson`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 1: the pack's manifest does not grant the call.
    AccessDenied,
    /// 10: the host refused the request.
    Validation,
    /// 11: absent entry. Getters that can miss return `Ok(None)` instead.
    NotFound,
    /// 20: a capability limit was hit.
    CapabilityBreach,
    /// 99: the host failed.
    HostError,
    /// -2 (SDK): an argument or the host's response is not valid JSON.
    InvalidJson,
    /// Any other code; treat it as a failure.
    Unknown(i32),
}

impl Status {
    /// Maps a host status to `Ok(())` (0) or `Err(Status)`.
    pub fn check(code: i32) -> Result<(), Status> {
        match code {
            0 => Ok(()),
            1 => Err(Status::AccessDenied),
            10 => Err(Status::Validation),
            11 => Err(Status::NotFound),
            20 => Err(Status::CapabilityBreach),
            99 => Err(Status::HostError),
            -2 => Err(Status::InvalidJson),
            n => Err(Status::Unknown(n)),
        }
    }

    /// The numeric code (host codes are non-negative, SDK codes negative).
    pub fn code(self) -> i32 {
        match self {
            Status::AccessDenied => 1,
            Status::Validation => 10,
            Status::NotFound => 11,
            Status::CapabilityBreach => 20,
            Status::HostError => 99,
            Status::InvalidJson => -2,
            Status::Unknown(n) => n,
        }
    }

    /// A short stable name, e.g. `"access_denied"`; also the error code a
    /// handler fails with when it propagates a `Status` with `?`.
    pub fn name(self) -> &'static str {
        match self {
            Status::AccessDenied => "access_denied",
            Status::Validation => "validation_error",
            Status::NotFound => "not_found",
            Status::CapabilityBreach => "capability_breach",
            Status::HostError => "host_error",
            Status::InvalidJson => "invalid_json",
            Status::Unknown(_) => "unknown_status",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl std::error::Error for Status {}

// ------------------------------------------------------- nodes, outcomes

/// The per-invocation context (the request's `nodeContext`).
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The typeId being invoked.
    pub type_id: &'static str,
    /// The run this invocation belongs to.
    pub run_id: String,
    /// The node's id in the run (defaults to the typeId).
    pub node_id: String,
    /// The tenant.
    pub tenant_id: String,
    /// Attempt number, from 1.
    pub attempt: i64,
    /// ABI version of the request envelope.
    pub abi_version: i64,
    /// `configurable`, as JSON, when present.
    pub configurable: Option<String>,
    /// `agent`, as JSON, when present.
    pub agent: Option<String>,
}

/// A successful handler result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Completed with this output JSON.
    Completed(String),
    /// Suspended with this interrupt payload JSON.
    Suspended(String),
}

impl Output {
    /// Completes with `output_json` (any JSON value).
    pub fn complete(output_json: impl Into<String>) -> Output {
        Output::Completed(output_json.into())
    }
    /// Completes with a [`json::Value`].
    pub fn json(output: json::Value) -> Output {
        Output::Completed(output.to_string())
    }
    /// Suspends with `payload_json`; the host records it and the invocation
    /// ends as "suspended" until it is resumed.
    pub fn suspend(payload_json: impl Into<String>) -> Output {
        Output::Suspended(payload_json.into())
    }
}

/// A failed outcome: a stable code, a message and optional JSON details.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Stable machine-readable code, e.g. `"invalid_input"`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Optional details, as JSON.
    pub details: Option<String>,
}

impl Error {
    /// A failure with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Error {
        Error { code: code.into(), message: message.into(), details: None }
    }
    /// Adds JSON details.
    pub fn with_details(mut self, details_json: impl Into<String>) -> Error {
        self.details = Some(details_json.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<Status> for Error {
    fn from(s: Status) -> Error {
        Error::new(s.name(), format!("host call failed with status {}", s))
    }
}

impl From<json::ParseError> for Error {
    fn from(e: json::ParseError) -> Error {
        Error::new("invalid_json", e.to_string())
    }
}

/// A node handler: the context and the request's `inputs` JSON.
pub type Handler = fn(&Context, &str) -> Result<Output, Error>;

/// A node: its typeId and handler. Usually built by [`pack!`].
#[derive(Clone, Copy)]
pub struct Node {
    /// The node's typeId.
    pub type_id: &'static str,
    /// Its handler.
    pub handler: Handler,
}

/// Declares the pack and generates the module's exports. Use it once, in
/// the cdylib crate:
///
/// ```ignore
/// packrun::pack! {
///     name: "local.counter.rust",
///     nodes: {
///         "example.counter" => counter,
///         "example.gate" => gate,
///     },
/// }
/// ```
///
/// Node indexes follow the order of the list.
#[macro_export]
macro_rules! pack {
    (name: $name:expr, nodes: { $($id:expr => $handler:expr),+ $(,)? } $(,)?) => {
        static __PACKRUN_NODES: &[$crate::Node] = &[
            $($crate::Node { type_id: $id, handler: $handler }),+
        ];
        #[no_mangle]
        pub extern "C" fn openwop_abi_version() -> i32 {
            $crate::__rt::ABI_VERSION
        }
        #[no_mangle]
        pub extern "C" fn openwop_pack_name() -> u64 {
            $crate::__rt::ptr_len($name)
        }
        #[no_mangle]
        pub extern "C" fn openwop_node_count() -> i32 {
            __PACKRUN_NODES.len() as i32
        }
        #[no_mangle]
        pub extern "C" fn openwop_node_id_at(index: i32) -> u64 {
            $crate::__rt::node_id_at(__PACKRUN_NODES, index)
        }
        #[no_mangle]
        pub extern "C" fn openwop_alloc(size: i32) -> *mut u8 {
            $crate::__rt::alloc(size)
        }
        /// # Safety
        /// `ptr` must come from `openwop_alloc(size)` (the host's contract).
        #[no_mangle]
        pub unsafe extern "C" fn openwop_free(ptr: *mut u8, size: i32) {
            $crate::__rt::free(ptr, size)
        }
        /// # Safety
        /// `(req, len)` must be a buffer of this module's memory (checked).
        #[no_mangle]
        pub unsafe extern "C" fn openwop_node_invoke(index: i32, req: *const u8, len: i32) -> u64 {
            $crate::__rt::invoke(__PACKRUN_NODES, index, req, len)
        }
    };
}

/// Logs at info level with `format!` arguments.
#[macro_export]
macro_rules! info { ($($arg:tt)*) => { $crate::log($crate::Level::Info, &::std::format!($($arg)*)) }; }
/// Logs at trace level with `format!` arguments.
#[macro_export]
macro_rules! trace { ($($arg:tt)*) => { $crate::log($crate::Level::Trace, &::std::format!($($arg)*)) }; }
/// Logs at debug level with `format!` arguments.
#[macro_export]
macro_rules! debug { ($($arg:tt)*) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)*)) }; }
/// Logs at warn level with `format!` arguments.
#[macro_export]
macro_rules! warn { ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &::std::format!($($arg)*)) }; }
/// Logs at error level with `format!` arguments.
#[macro_export]
macro_rules! error { ($($arg:tt)*) => { $crate::log($crate::Level::Error, &::std::format!($($arg)*)) }; }

// ------------------------------------------------------------- imports

#[cfg(target_arch = "wasm32")]
mod sys {
    #[link(wasm_import_module = "openwop")]
    extern "C" {
        pub fn openwop_log(level: i32, ptr: *const u8, len: i32);
        pub fn openwop_now_ms() -> i64;
        pub fn openwop_random(ptr: *mut u8, len: i32) -> i32;
        pub fn openwop_variable_get(name: *const u8, len: i32) -> u64;
        pub fn openwop_variable_set(name: *const u8, len: i32, v: *const u8, vlen: i32) -> i32;
        pub fn openwop_channel_read(name: *const u8, len: i32) -> u64;
        pub fn openwop_channel_write(name: *const u8, len: i32, v: *const u8, vlen: i32) -> i32;
        pub fn openwop_interrupt(ptr: *const u8, len: i32) -> u64;
    }

    #[link(wasm_import_module = "packrun:host/v1")]
    extern "C" {
        #[link_name = "memory_get"]
        pub fn memory_get(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "memory_put"]
        pub fn memory_put(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "memory_delete"]
        pub fn memory_delete(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "memory_list"]
        pub fn memory_list(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "queue_enqueue"]
        pub fn queue_enqueue(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "adapter_invoke"]
        pub fn adapter_invoke(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "evidence_record"]
        pub fn evidence_record(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "artifact_put"]
        pub fn artifact_put(req: *const u8, len: i32, out: *mut u32) -> i32;
        #[link_name = "config_get"]
        pub fn config_get(req: *const u8, len: i32, out: *mut u32) -> i32;
    }

    pub type HostV1Fn = unsafe extern "C" fn(*const u8, i32, *mut u32) -> i32;

    pub fn memory_bytes() -> u64 {
        core::arch::wasm32::memory_size(0) as u64 * 65536
    }
}

/// Native stand-ins so the crate (and its JSON helpers) can be unit-tested
/// off wasm; every host call panics.
#[cfg(not(target_arch = "wasm32"))]
#[allow(missing_docs, clippy::missing_safety_doc)]
mod sys {
    fn no_host() -> ! {
        panic!("packrun host calls are only available in wasm32")
    }
    pub unsafe extern "C" fn openwop_log(_: i32, _: *const u8, _: i32) { no_host() }
    pub unsafe extern "C" fn openwop_now_ms() -> i64 { no_host() }
    pub unsafe extern "C" fn openwop_random(_: *mut u8, _: i32) -> i32 { no_host() }
    pub unsafe extern "C" fn openwop_variable_get(_: *const u8, _: i32) -> u64 { no_host() }
    pub unsafe extern "C" fn openwop_variable_set(_: *const u8, _: i32, _: *const u8, _: i32) -> i32 { no_host() }
    pub unsafe extern "C" fn openwop_channel_read(_: *const u8, _: i32) -> u64 { no_host() }
    pub unsafe extern "C" fn openwop_channel_write(_: *const u8, _: i32, _: *const u8, _: i32) -> i32 { no_host() }
    pub unsafe extern "C" fn openwop_interrupt(_: *const u8, _: i32) -> u64 { no_host() }
    pub unsafe extern "C" fn memory_get(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn memory_put(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn memory_delete(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn memory_list(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn queue_enqueue(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn adapter_invoke(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn evidence_record(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn artifact_put(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub unsafe extern "C" fn config_get(_: *const u8, _: i32, _: *mut u32) -> i32 { no_host() }
    pub type HostV1Fn = unsafe extern "C" fn(*const u8, i32, *mut u32) -> i32;

    pub fn memory_bytes() -> u64 {
        u64::MAX
    }
}

// ------------------------------------------------------------- runtime

/// Support for the code [`pack!`] generates. Not a stable API.
#[doc(hidden)]
pub mod __rt {
    use super::*;
    use std::alloc::{self, Layout};

    pub const ABI_VERSION: i32 = 1;

    /// Packs (ptr, len) into the i64 form: ptr low 32 bits, len high.
    pub fn ptr_len(s: &'static str) -> u64 {
        pack(s.as_ptr(), s.len())
    }

    pub(crate) fn pack(ptr: *const u8, len: usize) -> u64 {
        (ptr as usize as u64 & 0xffff_ffff) | ((len as u64) << 32)
    }

    pub fn node_id_at(nodes: &[Node], index: i32) -> u64 {
        match usize::try_from(index).ok().and_then(|i| nodes.get(i)) {
            Some(n) => ptr_len(n.type_id),
            None => 0,
        }
    }

    fn layout(size: i32) -> Option<Layout> {
        let size = usize::try_from(size).ok()?.max(1);
        Layout::from_size_align(size, 1).ok()
    }

    /// Allocates `size` bytes (alignment 1; at least one byte) for the host.
    pub fn alloc(size: i32) -> *mut u8 {
        match layout(size) {
            // SAFETY: the layout has a non-zero size.
            Some(l) => unsafe { alloc::alloc(l) },
            None => std::ptr::null_mut(),
        }
    }

    /// Frees what `alloc(size)` returned (the host passes the same size).
    ///
    /// # Safety
    /// `ptr` must come from `alloc(size)` and not be freed twice.
    pub unsafe fn free(ptr: *mut u8, size: i32) {
        if let (false, Some(l)) = (ptr.is_null(), layout(size)) {
            alloc::dealloc(ptr, l);
        }
    }

    /// Takes ownership of a (ptr, len) buffer the host allocated with
    /// openwop_alloc(len). `None` for (0, 0).
    pub(crate) fn take(ptr: u32, len: u32) -> Option<String> {
        if len == 0 {
            return None;
        }
        // SAFETY: the host allocated exactly `len` bytes through
        // openwop_alloc, i.e. with Layout(len, 1), and handed them over.
        let bytes = unsafe { Vec::from_raw_parts(ptr as usize as *mut u8, len as usize, len as usize) };
        Some(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    pub(crate) fn take_packed(v: u64) -> Option<String> {
        take(v as u32, (v >> 32) as u32)
    }

    /// Hands a response envelope to the host, which frees it with
    /// openwop_free(ptr, len).
    fn hand_over(s: String) -> u64 {
        let b = s.into_bytes().into_boxed_slice(); // Layout(len, 1)
        let len = b.len();
        let ptr = Box::into_raw(b) as *mut u8;
        pack(ptr, len)
    }

    fn install_panic_hook() {
        use std::sync::Once;
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            std::panic::set_hook(Box::new(|info| {
                log(Level::Error, &format!("panic: {}", info));
            }))
        });
    }

    /// Runs node `index` on the request at (req, len).
    ///
    /// # Safety
    /// (req, len) must be readable memory of this module; it is checked
    /// against the size of linear memory.
    pub unsafe fn invoke(nodes: &[Node], index: i32, req: *const u8, len: i32) -> u64 {
        install_panic_hook();
        let node = match usize::try_from(index).ok().and_then(|i| nodes.get(i)) {
            Some(n) => n,
            None => return hand_over(failure("unknown_node", "node index out of range", None)),
        };
        let len = len as u32 as usize;
        if req as usize as u64 + len as u64 > sys::memory_bytes() {
            return hand_over(failure("invalid_request", "request is outside the module's memory", None));
        }
        let bytes = if len == 0 { &[][..] } else { std::slice::from_raw_parts(req, len) };
        let (ctx, input) = match std::str::from_utf8(bytes).ok().and_then(|r| parse_request(r, node.type_id)) {
            Some(v) => v,
            None => return hand_over(failure("invalid_request", "request is not a valid JSON envelope", None)),
        };
        hand_over(envelope((node.handler)(&ctx, input)))
    }

    /// Splits the envelope into the context and the raw `inputs`.
    fn parse_request<'a>(req: &'a str, type_id: &'static str) -> Option<(Context, &'a str)> {
        let mut ctx = Context { type_id, attempt: 1, abi_version: 1, ..Context::default() };
        let mut inputs = "{}";
        let members = json::raw_members(req).ok()?;
        for (key, raw) in members {
            match key.as_str() {
                "inputs" => inputs = raw,
                "abiVersion" => ctx.abi_version = json::parse(raw).ok()?.as_i64().unwrap_or(1),
                "nodeContext" => {
                    let nc = match json::raw_members(raw) {
                        Ok(m) => m,
                        Err(_) => continue,
                    };
                    for (k, v) in nc {
                        match k.as_str() {
                            "runId" => ctx.run_id = json::parse(v).ok()?.as_str().unwrap_or("").to_string(),
                            "nodeId" => ctx.node_id = json::parse(v).ok()?.as_str().unwrap_or("").to_string(),
                            "tenantId" => ctx.tenant_id = json::parse(v).ok()?.as_str().unwrap_or("").to_string(),
                            "attempt" => ctx.attempt = json::parse(v).ok()?.as_i64().unwrap_or(1),
                            "configurable" => ctx.configurable = Some(v.to_string()),
                            "agent" => ctx.agent = Some(v.to_string()),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Some((ctx, inputs))
    }

    fn failure(code: &str, message: &str, details: Option<&str>) -> String {
        let mut s = String::from(r#"{"outcome":"failed","error":{"code":"#);
        json::write_str(&mut s, code);
        s.push_str(r#","message":"#);
        json::write_str(&mut s, message);
        if let Some(d) = details {
            s.push_str(r#","details":"#);
            s.push_str(d);
        }
        s.push_str("}}");
        s
    }

    /// Builds the response envelope; JSON the handler produced is checked
    /// so that a mistake is reported as a clear failure.
    pub(crate) fn envelope(r: Result<Output, Error>) -> String {
        match r {
            Ok(Output::Completed(out)) => {
                if !json::valid(&out) {
                    return failure("invalid_output", "the node's output is not valid JSON", None);
                }
                format!(r#"{{"outcome":"completed","output":{}}}"#, out)
            }
            Ok(Output::Suspended(payload)) => {
                if !json::valid(&payload) {
                    return failure("invalid_interrupt", "the node's interrupt payload is not valid JSON", None);
                }
                format!(r#"{{"outcome":"suspended","interrupt":{}}}"#, payload)
            }
            Err(e) => {
                let code = if e.code.is_empty() { "failed" } else { e.code.as_str() };
                match e.details.as_deref() {
                    Some(d) if !json::valid(d) => {
                        failure("invalid_output", "the node's error details are not valid JSON", None)
                    }
                    d => failure(code, &e.message, d),
                }
            }
        }
    }
}

// ---------------------------------------------------- openwop host calls

/// Log levels of `openwop_log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// 0
    Trace = 0,
    /// 1
    Debug = 1,
    /// 2
    Info = 2,
    /// 3
    Warn = 3,
    /// 4
    Error = 4,
}

/// Logs a message. See also the [`info!`] family of macros.
pub fn log(level: Level, message: &str) {
    // SAFETY: the host reads (ptr, len) of a live slice.
    unsafe { sys::openwop_log(level as i32, message.as_ptr(), message.len() as i32) }
}

/// The host clock in Unix milliseconds (recorded for replay).
pub fn now_ms() -> i64 {
    // SAFETY: no arguments.
    unsafe { sys::openwop_now_ms() }
}

/// Fills `buf` with bytes seeded by (runId, nodeId, attempt).
pub fn random(buf: &mut [u8]) -> Result<(), Status> {
    // SAFETY: the host writes at most len bytes into a live slice.
    Status::check(unsafe { sys::openwop_random(buf.as_mut_ptr(), buf.len() as i32) })
}

fn check_json(s: &str) -> Result<(), Status> {
    if json::valid(s) {
        Ok(())
    } else {
        Err(Status::InvalidJson)
    }
}

/// Reads a run variable (JSON); `None` when unset.
pub fn variable_get(name: &str) -> Result<Option<String>, Status> {
    // SAFETY: the host reads a live slice and returns a buffer it allocated
    // with openwop_alloc, which `take_packed` adopts.
    Ok(__rt::take_packed(unsafe { sys::openwop_variable_get(name.as_ptr(), name.len() as i32) }))
}

/// Sets a run variable to `value_json`.
pub fn variable_set(name: &str, value_json: &str) -> Result<(), Status> {
    check_json(value_json)?;
    // SAFETY: the host reads two live slices.
    Status::check(unsafe {
        sys::openwop_variable_set(name.as_ptr(), name.len() as i32, value_json.as_ptr(), value_json.len() as i32)
    })
}

/// Reads a run channel: the JSON array of the values written so far.
pub fn channel_read(name: &str) -> Result<String, Status> {
    // SAFETY: as in variable_get.
    let v = __rt::take_packed(unsafe { sys::openwop_channel_read(name.as_ptr(), name.len() as i32) });
    Ok(v.unwrap_or_else(|| "[]".to_string()))
}

/// Appends `value_json` to a run channel.
pub fn channel_write(name: &str, value_json: &str) -> Result<(), Status> {
    check_json(value_json)?;
    // SAFETY: the host reads two live slices.
    Status::check(unsafe {
        sys::openwop_channel_write(name.as_ptr(), name.len() as i32, value_json.as_ptr(), value_json.len() as i32)
    })
}

/// Asks the host to suspend the invocation with `payload_json`. When the
/// invocation is resumed the host runs it again and this returns the resume
/// value (JSON); on the first run it does not return at all: the host ends
/// the invocation as "suspended".
pub fn interrupt(payload_json: &str) -> Result<String, Status> {
    check_json(payload_json)?;
    // SAFETY: as in variable_get.
    let v = __rt::take_packed(unsafe { sys::openwop_interrupt(payload_json.as_ptr(), payload_json.len() as i32) });
    Ok(v.unwrap_or_else(|| "null".to_string()))
}

// -------------------------------------------- packrun:host/v1 host calls

/// The functions of the `packrun:host/v1` namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFn {
    /// memory_get
    MemoryGet,
    /// memory_put
    MemoryPut,
    /// memory_delete
    MemoryDelete,
    /// memory_list
    MemoryList,
    /// queue_enqueue
    QueueEnqueue,
    /// adapter_invoke
    AdapterInvoke,
    /// evidence_record
    EvidenceRecord,
    /// artifact_put
    ArtifactPut,
    /// config_get
    ConfigGet,
}

/// Raw call of an ABI 1.0 `packrun:host/v1` function (not sensor_emit or
/// message_publish): sends `request_json` as is, returns the response or `None`.
pub fn host_call(f: HostFn, request_json: &str) -> Result<Option<String>, Status> {
    let import: sys::HostV1Fn = match f {
        HostFn::MemoryGet => sys::memory_get,
        HostFn::MemoryPut => sys::memory_put,
        HostFn::MemoryDelete => sys::memory_delete,
        HostFn::MemoryList => sys::memory_list,
        HostFn::QueueEnqueue => sys::queue_enqueue,
        HostFn::AdapterInvoke => sys::adapter_invoke,
        HostFn::EvidenceRecord => sys::evidence_record,
        HostFn::ArtifactPut => sys::artifact_put,
        HostFn::ConfigGet => sys::config_get,
    };
    check_json(request_json)?;
    call_raw(import, request_json)
}

/// One call of the (req_ptr, req_len, resp_out) -> status shape. (The
/// typed wrappers pass their import directly, so a module only imports the
/// functions it uses.)
fn call_raw(import: sys::HostV1Fn, request_json: &str) -> Result<Option<String>, Status> {
    let mut out = [0u32; 2];
    // SAFETY: the host reads the request slice and writes two u32 into `out`;
    // a response buffer it allocated with openwop_alloc is adopted by `take`.
    let status = unsafe { import(request_json.as_ptr(), request_json.len() as i32, out.as_mut_ptr()) };
    let resp = __rt::take(out[0], out[1]);
    Status::check(status).map(|()| resp)
}

/// Sends a request and returns the parsed response object (`Null` when the
/// host sent none).
fn call(import: sys::HostV1Fn, req: json::Value) -> Result<json::Value, Status> {
    match call_raw(import, &req.to_string())? {
        Some(r) => json::parse(&r).map_err(|_| Status::InvalidJson),
        None => Ok(json::Value::Null),
    }
}

/// A raw JSON argument, checked and embedded without re-encoding.
fn raw(json: &str) -> Result<json::Value, Status> {
    check_json(json)?;
    Ok(json::Value::Raw(json.trim().to_string()))
}

/// Extracts member `key` of a response as JSON text.
fn member_json(resp: &json::Value, key: &str) -> Result<String, Status> {
    resp.get(key).map(|v| v.to_string()).ok_or(Status::InvalidJson)
}

fn not_found_is_none<T>(r: Result<T, Status>) -> Result<Option<T>, Status> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Status::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Options of [`memory_put`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Expiry in seconds; `None` keeps the entry.
    pub ttl_seconds: Option<u64>,
    /// Marks the entry secret (redacted from evidence).
    pub secret: bool,
}

impl PutOptions {
    /// Options with a TTL.
    pub fn ttl(seconds: u64) -> PutOptions {
        PutOptions { ttl_seconds: Some(seconds), secret: false }
    }
    /// Marks the entry secret.
    pub fn secret(mut self) -> PutOptions {
        self.secret = true;
        self
    }
}

/// Reads memory entry `key` of `namespace` (JSON); `None` when absent.
pub fn memory_get(namespace: &str, key: &str) -> Result<Option<String>, Status> {
    let req = json::object([("namespace", namespace.into()), ("key", key.into())]);
    not_found_is_none(call(sys::memory_get, req).and_then(|r| member_json(&r, "value")))
}

/// Writes memory entry `key` of `namespace`.
pub fn memory_put(namespace: &str, key: &str, value_json: &str, opts: PutOptions) -> Result<(), Status> {
    let mut m = vec![
        ("namespace".to_string(), json::Value::from(namespace)),
        ("key".to_string(), key.into()),
        ("value".to_string(), raw(value_json)?),
    ];
    if let Some(ttl) = opts.ttl_seconds {
        m.push(("ttlSeconds".to_string(), ttl.into()));
    }
    if opts.secret {
        m.push(("secret".to_string(), true.into()));
    }
    call(sys::memory_put, json::Value::Object(m)).map(|_| ())
}

/// Deletes memory entry `key` of `namespace`.
pub fn memory_delete(namespace: &str, key: &str) -> Result<(), Status> {
    let req = json::object([("namespace", namespace.into()), ("key", key.into())]);
    call(sys::memory_delete, req).map(|_| ())
}

/// Lists the keys of `namespace`, optionally only those with `prefix`.
pub fn memory_list(namespace: &str, prefix: Option<&str>) -> Result<Vec<String>, Status> {
    let mut m = vec![("namespace".to_string(), json::Value::from(namespace))];
    if let Some(p) = prefix {
        m.push(("prefix".to_string(), p.into()));
    }
    let resp = call(sys::memory_list, json::Value::Object(m))?;
    match resp.get("keys") {
        Some(json::Value::Array(keys)) => {
            keys.iter().map(|k| k.as_str().map(str::to_string).ok_or(Status::InvalidJson)).collect()
        }
        Some(json::Value::Null) | None => Ok(Vec::new()),
        _ => Err(Status::InvalidJson),
    }
}

/// Stages a follow-up task (a TaskIntent, JSON); applied only if the attempt
/// completes. Returns the number of staged tasks.
pub fn queue_enqueue(intent_json: &str) -> Result<u64, Status> {
    let resp = call(sys::queue_enqueue, raw(intent_json)?)?;
    Ok(resp.get("staged").and_then(json::Value::as_i64).unwrap_or(0).max(0) as u64)
}

/// The response of [`adapter_invoke`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterResponse {
    /// The adapter's output (JSON).
    pub output: String,
    /// The exit status (JSON), `null` when absent.
    pub exit_status: String,
}

/// Calls a granted adapter with `input_json`.
pub fn adapter_invoke(adapter: &str, input_json: &str) -> Result<AdapterResponse, Status> {
    let req = json::object([("adapter", adapter.into()), ("input", raw(input_json)?)]);
    let resp = call(sys::adapter_invoke, req)?;
    Ok(AdapterResponse {
        output: member_json(&resp, "output")?,
        exit_status: resp.get("exit_status").map(|v| v.to_string()).unwrap_or_else(|| "null".to_string()),
    })
}

/// Adds a record to the attempt's evidence.
pub fn evidence_record(kind: &str, data_json: &str) -> Result<(), Status> {
    let req = json::object([("kind", kind.into()), ("data", raw(data_json)?)]);
    call(sys::evidence_record, req).map(|_| ())
}

/// The content of an artifact.
#[derive(Clone, Copy, Debug)]
pub enum Content<'a> {
    /// UTF-8 text.
    Text(&'a str),
    /// Binary data, base64-encoded.
    Base64(&'a str),
}

/// A stored artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactRef {
    /// The artifact's id.
    pub artifact_id: String,
    /// Hex SHA-256 of the content.
    pub sha256: String,
}

/// Stores an artifact of the attempt.
pub fn artifact_put(role: &str, name: &str, content_type: Option<&str>, content: Content<'_>) -> Result<ArtifactRef, Status> {
    let mut m = vec![("role".to_string(), json::Value::from(role)), ("name".to_string(), name.into())];
    if let Some(ct) = content_type {
        m.push(("content_type".to_string(), ct.into()));
    }
    match content {
        Content::Text(t) => m.push(("text".to_string(), t.into())),
        Content::Base64(b) => m.push(("base64".to_string(), b.into())),
    }
    let resp = call(sys::artifact_put, json::Value::Object(m))?;
    let s = |k: &str| resp.get(k).and_then(json::Value::as_str).unwrap_or("").to_string();
    Ok(ArtifactRef { artifact_id: s("artifact_id"), sha256: s("sha256") })
}

/// Reads pack configuration `key` (JSON); `None` when absent.
pub fn config_get(key: &str) -> Result<Option<String>, Status> {
    let req = json::object([("key", key.into())]);
    not_found_is_none(call(sys::config_get, req).and_then(|r| member_json(&r, "value")))
}

// ------------------------------------------------------------------ JSON

/// Minimal JSON: a parser into [`Value`](json::Value), a serializer
/// (`Display`), validation and string escaping. RFC 8259, nesting up to 128.
pub mod json {
    use std::fmt;

    /// A JSON value. Numbers keep their text, so nothing is lost.
    #[derive(Clone, Debug, PartialEq)]
    pub enum Value {
        /// null
        Null,
        /// true / false
        Bool(bool),
        /// A number, as written.
        Number(String),
        /// A string (decoded).
        String(String),
        /// An array.
        Array(Vec<Value>),
        /// An object, members in order (duplicates kept; `get` returns the last).
        Object(Vec<(String, Value)>),
        /// Already-encoded JSON, written out verbatim (never produced by the
        /// parser). The caller guarantees it is valid.
        Raw(String),
    }

    impl Value {
        /// Member `key` of an object (the last one if duplicated).
        pub fn get(&self, key: &str) -> Option<&Value> {
            match self {
                Value::Object(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            }
        }
        /// Element `i` of an array.
        pub fn at(&self, i: usize) -> Option<&Value> {
            match self {
                Value::Array(a) => a.get(i),
                _ => None,
            }
        }
        /// The string, if this is one.
        pub fn as_str(&self) -> Option<&str> {
            match self {
                Value::String(s) => Some(s),
                _ => None,
            }
        }
        /// The boolean, if this is one.
        pub fn as_bool(&self) -> Option<bool> {
            match self {
                Value::Bool(b) => Some(*b),
                _ => None,
            }
        }
        /// The number as an i64, if it is an integer in range (no fraction
        /// or exponent).
        pub fn as_i64(&self) -> Option<i64> {
            match self {
                Value::Number(n) if !n.contains(|c| c == '.' || c == 'e' || c == 'E') => n.parse().ok(),
                _ => None,
            }
        }
        /// The number as an f64.
        pub fn as_f64(&self) -> Option<f64> {
            match self {
                Value::Number(n) => n.parse().ok(),
                _ => None,
            }
        }
        /// Whether this is null.
        pub fn is_null(&self) -> bool {
            matches!(self, Value::Null)
        }
    }

    impl From<&str> for Value {
        fn from(s: &str) -> Value {
            Value::String(s.to_string())
        }
    }
    impl From<String> for Value {
        fn from(s: String) -> Value {
            Value::String(s)
        }
    }
    impl From<bool> for Value {
        fn from(b: bool) -> Value {
            Value::Bool(b)
        }
    }
    macro_rules! from_int {
        ($($t:ty),*) => {$(
            impl From<$t> for Value {
                fn from(n: $t) -> Value { Value::Number(n.to_string()) }
            }
        )*};
    }
    from_int!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);
    impl From<f64> for Value {
        /// Non-finite numbers become null.
        fn from(n: f64) -> Value {
            if n.is_finite() {
                Value::Number(format!("{:?}", n))
            } else {
                Value::Null
            }
        }
    }
    impl<T: Into<Value>> From<Vec<T>> for Value {
        fn from(v: Vec<T>) -> Value {
            Value::Array(v.into_iter().map(Into::into).collect())
        }
    }
    impl<T: Into<Value>> From<Option<T>> for Value {
        fn from(v: Option<T>) -> Value {
            v.map_or(Value::Null, Into::into)
        }
    }

    /// Builds an object from (key, value) pairs.
    pub fn object<K: Into<String>, I: IntoIterator<Item = (K, Value)>>(members: I) -> Value {
        Value::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    impl fmt::Display for Value {
        /// Compact JSON.
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let mut s = String::new();
            write_value(&mut s, self);
            f.write_str(&s)
        }
    }

    fn write_value(out: &mut String, v: &Value) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) | Value::Raw(n) => out.push_str(n),
            Value::String(s) => write_str(out, s),
            Value::Array(a) => {
                out.push('[');
                for (i, e) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_value(out, e);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, e)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(out, k);
                    out.push(':');
                    write_value(out, e);
                }
                out.push('}');
            }
        }
    }

    /// Appends `s` to `out` as a quoted JSON string.
    pub fn write_str(out: &mut String, s: &str) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.push_str("\\u00");
                    out.push(HEX[(c as usize) >> 4] as char);
                    out.push(HEX[(c as usize) & 15] as char);
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }

    /// `s` as a quoted JSON string.
    pub fn quote(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        write_str(&mut out, s);
        out
    }

    /// A parse error: what and at which byte offset.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct ParseError {
        /// Byte offset.
        pub offset: usize,
        /// What was wrong.
        pub message: &'static str,
    }

    impl fmt::Display for ParseError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "invalid JSON at byte {}: {}", self.offset, self.message)
        }
    }

    impl std::error::Error for ParseError {}

    const MAX_DEPTH: usize = 128;

    struct Parser<'a> {
        s: &'a [u8],
        src: &'a str,
        i: usize,
    }

    impl<'a> Parser<'a> {
        fn err<T>(&self, message: &'static str) -> Result<T, ParseError> {
            Err(ParseError { offset: self.i, message })
        }
        fn ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
                self.i += 1;
            }
        }
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }
        fn expect(&mut self, c: u8) -> Result<(), ParseError> {
            if self.peek() == Some(c) {
                self.i += 1;
                Ok(())
            } else {
                self.err("unexpected character")
            }
        }
        fn literal(&mut self, lit: &str) -> Result<(), ParseError> {
            if self.s[self.i..].starts_with(lit.as_bytes()) {
                self.i += lit.len();
                Ok(())
            } else {
                self.err("invalid literal")
            }
        }
        fn number(&mut self) -> Result<&'a str, ParseError> {
            let start = self.i;
            let digits = |p: &mut Parser| {
                let d = p.i;
                while let Some(b'0'..=b'9') = p.peek() {
                    p.i += 1;
                }
                p.i > d
            };
            if self.peek() == Some(b'-') {
                self.i += 1;
            }
            match self.peek() {
                Some(b'0') => self.i += 1,
                Some(b'1'..=b'9') => {
                    digits(self);
                }
                _ => return self.err("invalid number"),
            }
            if self.peek() == Some(b'.') {
                self.i += 1;
                if !digits(self) {
                    return self.err("invalid number");
                }
            }
            if let Some(b'e' | b'E') = self.peek() {
                self.i += 1;
                if let Some(b'+' | b'-') = self.peek() {
                    self.i += 1;
                }
                if !digits(self) {
                    return self.err("invalid number");
                }
            }
            Ok(&self.src[start..self.i])
        }
        fn hex4(&mut self) -> Result<u32, ParseError> {
            let h = self.s.get(self.i..self.i + 4).ok_or(ParseError { offset: self.i, message: "short \\u escape" })?;
            let mut v = 0;
            for &c in h {
                v = v * 16 + (c as char).to_digit(16).ok_or(ParseError { offset: self.i, message: "invalid \\u escape" })?;
            }
            self.i += 4;
            Ok(v)
        }
        /// At the opening quote; decodes into `out` when given. Lone
        /// surrogates become U+FFFD.
        fn string(&mut self, mut out: Option<&mut String>) -> Result<(), ParseError> {
            self.i += 1;
            loop {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if c == b'"' || c == b'\\' || c < 0x20 {
                        break;
                    }
                    self.i += 1;
                }
                if let Some(o) = out.as_deref_mut() {
                    o.push_str(&self.src[start..self.i]);
                }
                match self.peek() {
                    Some(b'"') => {
                        self.i += 1;
                        return Ok(());
                    }
                    Some(b'\\') => {
                        self.i += 1;
                        let c = match self.peek() {
                            Some(c) => c,
                            None => return self.err("unterminated string"),
                        };
                        self.i += 1;
                        let ch = match c {
                            b'"' => '"',
                            b'\\' => '\\',
                            b'/' => '/',
                            b'b' => '\u{8}',
                            b'f' => '\u{c}',
                            b'n' => '\n',
                            b'r' => '\r',
                            b't' => '\t',
                            b'u' => {
                                let u = self.hex4()?;
                                let mut cp = u;
                                if (0xD800..0xDC00).contains(&u) && self.s[self.i..].starts_with(b"\\u") {
                                    let save = self.i;
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                                    } else {
                                        self.i = save;
                                    }
                                }
                                char::from_u32(cp).unwrap_or('\u{FFFD}')
                            }
                            _ => return self.err("invalid escape"),
                        };
                        if let Some(o) = out.as_deref_mut() {
                            o.push(ch);
                        }
                    }
                    Some(_) => return self.err("control character in string"),
                    None => return self.err("unterminated string"),
                }
            }
        }
        /// Parses (build = true) or only validates the value at self.i.
        fn value(&mut self, depth: usize, build: bool) -> Result<Value, ParseError> {
            if depth > MAX_DEPTH {
                return self.err("nesting too deep");
            }
            match self.peek() {
                Some(b'n') => self.literal("null").map(|_| Value::Null),
                Some(b't') => self.literal("true").map(|_| Value::Bool(true)),
                Some(b'f') => self.literal("false").map(|_| Value::Bool(false)),
                Some(b'"') => {
                    let mut s = String::new();
                    self.string(if build { Some(&mut s) } else { None })?;
                    Ok(Value::String(s))
                }
                Some(b'[') => {
                    self.i += 1;
                    let mut a = Vec::new();
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.i += 1;
                        return Ok(Value::Array(a));
                    }
                    loop {
                        self.ws();
                        let v = self.value(depth + 1, build)?;
                        if build {
                            a.push(v);
                        }
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                return Ok(Value::Array(a));
                            }
                            _ => return self.err("expected , or ]"),
                        }
                    }
                }
                Some(b'{') => {
                    self.i += 1;
                    let mut m = Vec::new();
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                        return Ok(Value::Object(m));
                    }
                    loop {
                        self.ws();
                        if self.peek() != Some(b'"') {
                            return self.err("expected a member name");
                        }
                        let mut k = String::new();
                        self.string(if build { Some(&mut k) } else { None })?;
                        self.ws();
                        self.expect(b':')?;
                        self.ws();
                        let v = self.value(depth + 1, build)?;
                        if build {
                            m.push((k, v));
                        }
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                return Ok(Value::Object(m));
                            }
                            _ => return self.err("expected , or }"),
                        }
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    let n = self.number()?;
                    Ok(if build { Value::Number(n.to_string()) } else { Value::Null })
                }
                Some(_) => self.err("unexpected character"),
                None => self.err("unexpected end of input"),
            }
        }
        fn end(&mut self) -> Result<(), ParseError> {
            self.ws();
            if self.i == self.s.len() {
                Ok(())
            } else {
                self.err("trailing data")
            }
        }
    }

    fn parser(s: &str) -> Parser<'_> {
        Parser { s: s.as_bytes(), src: s, i: 0 }
    }

    /// Parses one JSON value (surrounding whitespace allowed).
    pub fn parse(s: &str) -> Result<Value, ParseError> {
        let mut p = parser(s);
        p.ws();
        let v = p.value(0, true)?;
        p.end()?;
        Ok(v)
    }

    /// Whether `s` is exactly one valid JSON value.
    pub fn valid(s: &str) -> bool {
        let mut p = parser(s);
        p.ws();
        p.value(0, false).is_ok() && p.end().is_ok()
    }

    /// The members of a JSON object as (decoded key, raw value text), without
    /// decoding the values. Validates the whole document.
    pub fn raw_members(s: &str) -> Result<Vec<(String, &str)>, ParseError> {
        let mut p = parser(s);
        let mut m = Vec::new();
        p.ws();
        p.expect(b'{')?;
        p.ws();
        if p.peek() == Some(b'}') {
            p.i += 1;
            p.end()?;
            return Ok(m);
        }
        loop {
            p.ws();
            if p.peek() != Some(b'"') {
                return p.err("expected a member name");
            }
            let mut k = String::new();
            p.string(Some(&mut k))?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            let start = p.i;
            p.value(1, false)?;
            m.push((k, &s[start..p.i]));
            p.ws();
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b'}') => {
                    p.i += 1;
                    p.end()?;
                    return Ok(m);
                }
                _ => return p.err("expected , or }"),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn round_trip() {
            let src = r#" {"a":[1,-2.5e3,true,false,null],"b":"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800","c":{}} "#;
            let v = parse(src).unwrap();
            assert_eq!(v.get("b").unwrap().as_str().unwrap(), "x\"\\/\u{8}\u{c}\n\r\té😀\u{FFFD}");
            assert_eq!(v.get("a").unwrap().at(1).unwrap().as_f64(), Some(-2500.0));
            assert_eq!(v.get("a").unwrap().at(0).unwrap().as_i64(), Some(1));
            assert_eq!(v.to_string(), r#"{"a":[1,-2.5e3,true,false,null],"b":"x\"\\/\b\f\n\r\té😀�","c":{}}"#);
            assert_eq!(parse(&v.to_string()).unwrap(), v);
        }

        #[test]
        fn invalid() {
            for s in ["", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "\"\u{1}\"", "\"\\x\"", "nul", "1 2", "{\"a\" 1}", "\"\\u12\""] {
                assert!(!valid(s), "{:?} accepted", s);
                assert!(parse(s).is_err(), "{:?} parsed", s);
            }
            let deep = "[".repeat(200) + &"]".repeat(200);
            assert!(!valid(&deep));
        }

        #[test]
        fn members_and_duplicates() {
            let m = raw_members(r#"{"inputs": {"x" : [1, 2]} ,"k\u0065y":"v","k":1,"k":2}"#).unwrap();
            assert_eq!(m[0], ("inputs".to_string(), r#"{"x" : [1, 2]}"#));
            assert_eq!(m[1].0, "key");
            assert_eq!(parse(r#"{"k":1,"k":2}"#).unwrap().get("k").unwrap().as_i64(), Some(2));
            assert!(raw_members("[1]").is_err());
            assert!(raw_members("{} x").is_err());
        }

        #[test]
        fn build() {
            let v = object([("s", Value::from("a\u{1}\"")), ("n", 3i64.into()), ("f", 0.5f64.into()), ("none", Value::from(None::<i64>)), ("l", vec![1u8, 2].into())]);
            assert_eq!(v.to_string(), r#"{"s":"a\u0001\"","n":3,"f":0.5,"none":null,"l":[1,2]}"#);
            assert_eq!(quote("é\t"), "\"é\\t\"");
            assert_eq!(Value::from(f64::INFINITY), Value::Null);
            assert_eq!(Value::from(f64::NAN), Value::Null);
        }
    }
}

// ----------------------------------------- packrun:host/v1, ABI 1.2 calls
//
// Kept apart (and last, so the other code keeps its line numbers in panic
// locations): message_publish is not in HostFn, whose host_call references
// every import it lists, so only a module calling message_publish imports
// it and older modules still load for packs declaring ABI 1.0.

#[cfg(target_arch = "wasm32")]
mod sys12 {
    #[link(wasm_import_module = "packrun:host/v1")]
    extern "C" {
        #[link_name = "message_publish"]
        pub fn message_publish(req: *const u8, len: i32, out: *mut u32) -> i32;
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod sys12 {
    pub unsafe extern "C" fn message_publish(_: *const u8, _: i32, _: *mut u32) -> i32 {
        panic!("packrun host calls are only available in wasm32")
    }
}

/// The format of an agent message (the three formats of seeds 000–002).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageFormat {
    /// `agent-envelope` (seed 000).
    AgentEnvelope,
    /// `agent-message` (seed 001).
    AgentMessage,
    /// `bus-envelope` (seed 002).
    BusEnvelope,
}

impl MessageFormat {
    /// The name the publish form gives it.
    pub fn name(self) -> &'static str {
        match self {
            MessageFormat::AgentEnvelope => "agent-envelope",
            MessageFormat::AgentMessage => "agent-message",
            MessageFormat::BusEnvelope => "bus-envelope",
        }
    }
}

/// A message [`message_publish`] staged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The message's id.
    pub message_id: String,
    /// Lowercase hex SHA-256 of its canonical form.
    pub hash: String,
    /// How many messages the attempt has staged so far.
    pub staged: u64,
}

/// Publishes an agent message (`message_json` in `format`, with an optional
/// Ed25519 `signature`): it is staged and published only if the attempt
/// completes. Needs ABI 1.2 (`"abi":{"version":1,"minor":2}`) and the
/// `messages` grant with the message's topic: a topic outside the grant is
/// `AccessDenied`, a message its format refuses `Validation`. Only a module
/// that calls it imports `message_publish`; [`host_call`] does not reach it.
pub fn message_publish(format: MessageFormat, message_json: &str, signature: Option<&str>) -> Result<Published, Status> {
    let mut m = vec![("format".to_string(), json::Value::from(format.name())), ("message".to_string(), raw(message_json)?)];
    if let Some(sig) = signature {
        m.push(("signature".to_string(), sig.into()));
    }
    let resp = call(sys12::message_publish, json::Value::Object(m))?;
    let s = |k: &str| resp.get(k).and_then(json::Value::as_str).unwrap_or("").to_string();
    Ok(Published {
        message_id: s("message_id"),
        hash: s("hash"),
        staged: resp.get("staged").and_then(json::Value::as_i64).unwrap_or(0).max(0) as u64,
    })
}

// sensor_emit (ABI 1.1) is kept out of HostFn for the same reason: only a
// module calling it imports it.

#[cfg(target_arch = "wasm32")]
mod sys11 {
    #[link(wasm_import_module = "packrun:host/v1")]
    extern "C" {
        #[link_name = "sensor_emit"]
        pub fn sensor_emit(req: *const u8, len: i32, out: *mut u32) -> i32;
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod sys11 {
    pub unsafe extern "C" fn sensor_emit(_: *const u8, _: i32, _: *mut u32) -> i32 {
        panic!("packrun host calls are only available in wasm32")
    }
}

/// A sensor event [`sensor_emit`] staged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emitted {
    /// The event's event_id.
    pub event_id: String,
    /// How many events the attempt has staged so far.
    pub staged: u64,
}

/// Reports a SensorEvent (seed 003 §5, `event_json` sent as is after a JSON
/// check; an invalid one is `InvalidJson` and not sent): it is staged and
/// applied only if the attempt completes. `sensor_id` defaults to the node's
/// typeId and may not name another. Needs ABI 1.1
/// (`"abi":{"version":1,"minor":1}`) and the `sensors` grant, else
/// `AccessDenied`; an event the host refuses is `Validation`. Only a module
/// that calls it imports `sensor_emit`; [`host_call`] does not reach it.
pub fn sensor_emit(event_json: &str) -> Result<Emitted, Status> {
    let resp = call(sys11::sensor_emit, raw(event_json)?)?;
    Ok(Emitted {
        event_id: resp.get("event_id").and_then(json::Value::as_str).unwrap_or("").to_string(),
        staged: resp.get("staged").and_then(json::Value::as_i64).unwrap_or(0).max(0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes() {
        assert_eq!(__rt::envelope(Ok(Output::complete("{\"a\":1}"))), r#"{"outcome":"completed","output":{"a":1}}"#);
        assert_eq!(__rt::envelope(Ok(Output::suspend("1"))), r#"{"outcome":"suspended","interrupt":1}"#);
        assert_eq!(
            __rt::envelope(Err(Error::new("bad", "m\"").with_details("{\"x\":1}"))),
            r#"{"outcome":"failed","error":{"code":"bad","message":"m\"","details":{"x":1}}}"#
        );
        assert!(__rt::envelope(Ok(Output::complete("{"))).contains("invalid_output"));
        assert!(__rt::envelope(Err(Status::AccessDenied.into())).contains(r#""code":"access_denied""#));
    }

    #[test]
    fn status() {
        assert_eq!(Status::check(0), Ok(()));
        for s in [Status::AccessDenied, Status::Validation, Status::NotFound, Status::CapabilityBreach, Status::HostError, Status::InvalidJson, Status::Unknown(7)] {
            assert_eq!(Status::check(s.code()), Err(s));
        }
    }

    #[test]
    fn alloc_round_trip() {
        let p = __rt::alloc(0);
        assert!(!p.is_null());
        unsafe { __rt::free(p, 0) };
        assert!(__rt::alloc(-1).is_null());
    }
}

// ------------------------------------------ packrun:host/v1, ABI 1.3 call
//
// Appended after everything else for the same reason as above: only a
// module calling http_request imports it.

#[cfg(target_arch = "wasm32")]
mod sys13 {
    #[link(wasm_import_module = "packrun:host/v1")]
    extern "C" {
        #[link_name = "http_request"]
        pub fn http_request(req: *const u8, len: i32, out: *mut u32) -> i32;
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod sys13 {
    pub unsafe extern "C" fn http_request(_: *const u8, _: i32, _: *mut u32) -> i32 {
        panic!("packrun host calls are only available in wasm32")
    }
}

/// Outbound HTTP through the host ([`http::request`], ABI 1.3).
pub mod http {
    use super::{json, Status};
    use std::fmt;

    /// An outbound request. Build it with [`Request::get`] or
    /// [`Request::new`] and the `header`, `body`, `text` and `timeout_ms`
    /// methods.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct Request {
        /// The method; empty means `GET`.
        pub method: String,
        /// An absolute http:// or https:// URL within the pack's http grant.
        pub url: String,
        /// Headers in the order sent; a name may repeat.
        pub headers: Vec<(String, String)>,
        /// The body: sent as text when it is valid UTF-8, else base64-encoded.
        pub body: Vec<u8>,
        /// A timeout in milliseconds (the host caps it); `None` for the host's.
        pub timeout_ms: Option<u64>,
    }

    impl Request {
        /// A request with `method` to `url`.
        pub fn new(method: &str, url: &str) -> Request {
            Request { method: method.to_string(), url: url.to_string(), ..Request::default() }
        }
        /// A GET of `url`.
        pub fn get(url: &str) -> Request {
            Request::new("GET", url)
        }
        /// Appends a header.
        pub fn header(mut self, name: &str, value: &str) -> Request {
            self.headers.push((name.to_string(), value.to_string()));
            self
        }
        /// Sets the body bytes.
        pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
            self.body = body.into();
            self
        }
        /// Sets a text body.
        pub fn text(self, body: &str) -> Request {
            self.body(body.as_bytes())
        }
        /// Sets the timeout in milliseconds.
        pub fn timeout_ms(mut self, ms: u64) -> Request {
            self.timeout_ms = Some(ms);
            self
        }
    }

    /// The host's answer: any HTTP status (404, 500, ...) is a response.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct Response {
        /// The HTTP status code.
        pub status: u16,
        /// Headers in the order received.
        pub headers: Vec<(String, String)>,
        /// The body bytes.
        pub body: Vec<u8>,
        /// The host cut the body at its limit (only when the grant says so).
        pub truncated: bool,
    }

    impl Response {
        /// The body as text (invalid UTF-8 replaced by U+FFFD).
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.body).into_owned()
        }
        /// The value of the first header named `name` (case-insensitive).
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }
    }

    /// A refused request: the host's status and its `{"error","kind"}`.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Error {
        /// `AccessDenied` (no grant for the destination or method, a refused
        /// address range, a redirect outside the grant), `Validation`,
        /// `CapabilityBreach` (see `kind`), `HostError` (connection, DNS or
        /// TLS failure), or `InvalidJson` for a response that does not decode.
        pub status: Status,
        /// The host's one-line reason ("" if none).
        pub message: String,
        /// For `CapabilityBreach`: "http-requests", "http-request-bytes",
        /// "http-response-bytes" or "http-timeout".
        pub kind: String,
    }

    impl fmt::Display for Error {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "http_request: {}", self.status)?;
            if !self.kind.is_empty() {
                write!(f, " ({})", self.kind)?;
            }
            if !self.message.is_empty() {
                write!(f, ": {}", self.message)?;
            }
            Ok(())
        }
    }

    impl std::error::Error for Error {}

    impl From<Error> for super::Error {
        /// Fails with the status name as code, the host's reason as
        /// message and `{"status","kind"}` as details.
        fn from(e: Error) -> super::Error {
            let details = json::object([("status", json::Value::from(e.status.code())), ("kind", json::Value::from(e.kind.as_str()))]);
            super::Error::new(e.status.name(), if e.message.is_empty() { e.to_string() } else { e.message }).with_details(details.to_string())
        }
    }

    /// Makes an outbound HTTP request through the host. Needs ABI 1.3
    /// (`"abi":{"version":1,"minor":3}`) and an http grant naming the
    /// destination; the host adds the grant's secrets (a bearer token, a
    /// header, a query parameter) on the way out and strips them from what
    /// the module sees. Only a module that calls it imports `http_request`.
    pub fn request(req: &Request) -> Result<Response, Error> {
        let body = encode(req);
        let mut out = [0u32; 2];
        // SAFETY: as in call_raw.
        let status = unsafe { super::sys13::http_request(body.as_ptr(), body.len() as i32, out.as_mut_ptr()) };
        let resp = super::__rt::take(out[0], out[1]);
        match Status::check(status) {
            Ok(()) => decode(resp.as_deref().unwrap_or("")),
            Err(s) => Err(refusal(s, resp.as_deref())),
        }
    }

    fn refusal(status: Status, body: Option<&str>) -> Error {
        let v = body.and_then(|b| json::parse(b).ok()).unwrap_or(json::Value::Null);
        let s = |k: &str| v.get(k).and_then(json::Value::as_str).unwrap_or("").to_string();
        Error { status, message: s("error"), kind: s("kind") }
    }

    /// The request JSON of http_request.
    pub(crate) fn encode(req: &Request) -> String {
        let method = if req.method.is_empty() { "GET" } else { &req.method };
        let mut m = vec![("method".to_string(), json::Value::from(method)), ("url".to_string(), json::Value::from(req.url.as_str()))];
        if !req.headers.is_empty() {
            let hs = req.headers.iter().map(|(n, v)| json::Value::Array(vec![n.as_str().into(), v.as_str().into()])).collect();
            m.push(("headers".to_string(), json::Value::Array(hs)));
        }
        if !req.body.is_empty() {
            match std::str::from_utf8(&req.body) {
                Ok(t) => m.push(("body".to_string(), t.into())),
                Err(_) => m.push(("body_base64".to_string(), base64_encode(&req.body).into())),
            }
        }
        if let Some(ms) = req.timeout_ms {
            m.push(("timeout_ms".to_string(), ms.into()));
        }
        json::Value::Object(m).to_string()
    }

    /// Decodes the response JSON of http_request.
    pub(crate) fn decode(resp: &str) -> Result<Response, Error> {
        let bad = || Error { status: Status::InvalidJson, message: "http_request: response does not decode".to_string(), kind: String::new() };
        let v = json::parse(resp).map_err(|_| bad())?;
        let status = v.get("status").and_then(json::Value::as_i64).filter(|s| (0..=999).contains(s)).ok_or_else(bad)? as u16;
        let mut r = Response { status, truncated: v.get("truncated").and_then(json::Value::as_bool).unwrap_or(false), ..Response::default() };
        match v.get("headers") {
            None | Some(json::Value::Null) => {}
            Some(json::Value::Array(hs)) => {
                for h in hs {
                    match (h.at(0).and_then(json::Value::as_str), h.at(1).and_then(json::Value::as_str), h.at(2)) {
                        (Some(n), Some(val), None) => r.headers.push((n.to_string(), val.to_string())),
                        _ => return Err(bad()),
                    }
                }
            }
            Some(_) => return Err(bad()),
        }
        match (v.get("body"), v.get("body_base64")) {
            (Some(_), Some(_)) => return Err(bad()),
            (Some(b), None) => r.body = b.as_str().ok_or_else(bad)?.as_bytes().to_vec(),
            (None, Some(b)) => r.body = base64_decode(b.as_str().ok_or_else(bad)?).ok_or_else(bad)?,
            (None, None) => {}
        }
        Ok(r)
    }

    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    fn base64_encode(b: &[u8]) -> String {
        let mut s = String::with_capacity((b.len() + 2) / 3 * 4);
        for c in b.chunks(3) {
            let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                s.push(if i <= c.len() { B64[(v >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
            }
        }
        s
    }

    fn base64_decode(s: &str) -> Option<Vec<u8>> {
        let b = s.as_bytes();
        if b.len() % 4 != 0 {
            return None;
        }
        let mut out = Vec::with_capacity(b.len() / 4 * 3);
        for (n, c) in b.chunks(4).enumerate() {
            let last = n + 1 == b.len() / 4;
            let pad = c.iter().rev().take_while(|&&x| x == b'=').count();
            if pad > 2 || (pad > 0 && !last) {
                return None;
            }
            let mut v = 0u32;
            for &x in &c[..4 - pad] {
                v = v << 6 | B64.iter().position(|&y| y == x)? as u32;
            }
            v <<= 6 * pad as u32;
            out.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8][..3 - pad]);
        }
        Some(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn encodes() {
            let r = Request::new("POST", "http://h/").header("B", "2").header("A", "1").header("B", "3").text("hé").timeout_ms(1500);
            assert_eq!(encode(&r), r#"{"method":"POST","url":"http://h/","headers":[["B","2"],["A","1"],["B","3"]],"body":"hé","timeout_ms":1500}"#);
            assert_eq!(encode(&Request { url: "https://a/".into(), ..Request::default() }), r#"{"method":"GET","url":"https://a/"}"#);
            assert_eq!(encode(&Request::new("PUT", "http://h/").body(vec![0xff, 0])), r#"{"method":"PUT","url":"http://h/","body_base64":"/wA="}"#);
        }

        #[test]
        fn decodes() {
            let r = decode(r#"{"status":500,"headers":[["X","1"],["x","2"]],"body_base64":"AAE=","truncated":true}"#).unwrap();
            assert_eq!((r.status, r.body.clone(), r.truncated, r.header("x")), (500, vec![0, 1], true, Some("1")));
            assert_eq!(decode(r#"{"status":200,"body":"ok"}"#).unwrap().text(), "ok");
            for bad in [r#"{}"#, "[", r#"{"status":200,"body":"a","body_base64":"YQ=="}"#, r#"{"status":200,"body_base64":"!"}"#, r#"{"status":200,"headers":[["a"]]}"#, r#"{"status":200,"headers":[1]}"#] {
                assert_eq!(decode(bad).unwrap_err().status, Status::InvalidJson, "{}", bad);
            }
        }

        #[test]
        fn base64_round_trip() {
            for n in 0..8u8 {
                let b: Vec<u8> = (0..n).map(|i| i.wrapping_mul(97)).collect();
                assert_eq!(base64_decode(&base64_encode(&b)), Some(b));
            }
            assert_eq!(base64_decode("AA=A"), None);
        }

        #[test]
        fn refusals() {
            let e = refusal(Status::CapabilityBreach, Some(r#"{"error":"took over 2s","kind":"http-timeout"}"#));
            assert_eq!(e.to_string(), "http_request: capability_breach (20) (http-timeout): took over 2s");
            let f: super::super::Error = e.into();
            assert_eq!((f.code.as_str(), f.message.as_str(), f.details.as_deref()), ("capability_breach", "took over 2s", Some(r#"{"status":20,"kind":"http-timeout"}"#)));
        }
    }
}
