//! counter.rs - an example node pack written with the packrun Rust SDK.
//!
//! Pack "local.counter.rust", three nodes:
//!
//! - `example.counter` `{"key":"k","by"?:n}` -> `{"key":"k","count":n}`:
//!   reads memory entry counters/<key> (absent -> 0), adds "by" (default 1),
//!   writes it back with a one-hour TTL and logs the new value. Fails with
//!   invalid_input when "key" is missing or not a string.
//! - `example.gate` `{"approved"?:true}` -> `{"approved":true}`: suspends with
//!   `{"question":"approve?"}` until called with approved=true.
//! - `example.ask` `{}` -> `{"answer":<resume value>}`: asks the host to
//!   suspend (openwop_interrupt); on resume, returns the resume value.
//!
//! Build: ./build.sh

use packrun::json::{self, Value};
use packrun::{Context, Error, Output, PutOptions};

packrun::pack! {
    name: "local.counter.rust",
    nodes: {
        "example.counter" => counter,
        "example.gate" => gate,
        "example.ask" => ask,
    },
}

const TTL_SECONDS: u64 = 3600;

fn counter(ctx: &Context, input: &str) -> Result<Output, Error> {
    let input = json::parse(input)?;
    let key = input
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::new("invalid_input", "inputs.key must be a string"))?;
    let by = match input.get("by") {
        None | Some(Value::Null) => 1,
        Some(v) => v.as_i64().ok_or_else(|| Error::new("invalid_input", "inputs.by must be an integer"))?,
    };

    // The stored value is a bare JSON integer; anything else restarts at 0.
    let stored = packrun::memory_get("counters", key)?;
    let count = stored.and_then(|v| json::parse(&v).ok()).and_then(|v| v.as_i64()).unwrap_or(0) + by;
    packrun::memory_put("counters", key, &count.to_string(), PutOptions::ttl(TTL_SECONDS))?;

    packrun::info!("counter {} = {} (run {}, attempt {})", key, count, ctx.run_id, ctx.attempt);
    Ok(Output::json(json::object([("key", key.into()), ("count", count.into())])))
}

fn gate(_ctx: &Context, input: &str) -> Result<Output, Error> {
    let input = json::parse(input)?;
    if input.get("approved").and_then(Value::as_bool) == Some(true) {
        return Ok(Output::complete(r#"{"approved":true}"#));
    }
    packrun::warn!("gate: waiting for approval");
    Ok(Output::suspend(r#"{"question":"approve?"}"#))
}

fn ask(_ctx: &Context, _input: &str) -> Result<Output, Error> {
    // Does not return on the first run: the host suspends the invocation.
    let answer = packrun::interrupt(r#"{"question":"name?"}"#)?;
    Ok(Output::complete(format!(r#"{{"answer":{}}}"#, answer)))
}
