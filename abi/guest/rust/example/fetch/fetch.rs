//! fetch.rs - an example skill written with the packrun Rust SDK that
//! reaches the network through its http grant (see pack.json).
//!
//! Pack "local.fetch.rust", one node:
//!
//!   example.fetch  {"url":"http://...","field":"name"}
//!       -> {"status":n,"length":bytes,"value":<the field of the JSON body, null if absent>}
//!
//! The grant names the destination and a secret the host sends as a bearer
//! token: the module never sees it. A refusal fails the invocation with the
//! host's reason. Build: ../build.sh

use packrun::http::{request, Request};
use packrun::json::{self, Value};
use packrun::{Context, Error, Output};

packrun::pack! {
    name: "local.fetch.rust",
    nodes: {
        "example.fetch" => fetch,
    },
}

fn fetch(_: &Context, input: &str) -> Result<Output, Error> {
    let input = json::parse(input)?;
    let (url, field) = match (input.get("url").and_then(Value::as_str), input.get("field").and_then(Value::as_str)) {
        (Some(u), Some(f)) => (u, f),
        _ => return Err(Error::new("invalid_input", "inputs.url and inputs.field must be strings")),
    };
    let resp = request(&Request::get(url).header("Accept", "application/json"))?;
    let value = json::parse(&resp.text()).ok().and_then(|doc| doc.get(field).cloned()).unwrap_or(Value::Null);
    Ok(Output::json(json::object([
        ("status", Value::from(resp.status)),
        ("length", Value::from(resp.body.len())),
        ("value", value),
    ])))
}
