//! http.rs - test module: makes the requests of internal/testing/guesttest
//! (HTTPRequests) through packrun::http::request and reports what each
//! answer decoded to (HTTPWant). Built by sdk_test.go.

use packrun::http::{request, Request};
use packrun::json::{self, Value};
use packrun::{Context, Error, Output};

const BASE: &str = "http://127.0.0.1:8080";

packrun::pack! {
    name: "local.sdk.rust.http",
    nodes: {
        "test.http" => run,
    },
}

fn run(_: &Context, _: &str) -> Result<Output, Error> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut put = |k: &str, v: Value| out.push((k.to_string(), v));

    let r = request(&Request::get(&format!("{}/json", BASE)).header("Accept", "application/json").header("X-Tag", "a").header("X-Tag", "b").timeout_ms(1500))?;
    let doc = json::parse(&r.text())?;
    put("get_status", r.status.into());
    put("get_headers", r.headers.len().into());
    put("get_tag2", r.headers[2].1.as_str().into());
    put("get_len", r.body.len().into());
    put("get_name", doc.get("name").cloned().unwrap_or(Value::Null));

    let r = request(&Request::new("POST", &format!("{}/echo", BASE)).header("Content-Type", "text/plain; charset=utf-8").text("héllo"))?;
    put("post_status", r.status.into());
    put("post_body", r.text().into());

    let r = request(&Request::new("PUT", &format!("{}/bin", BASE)).body(vec![0u8, 1, 255]))?;
    put("bin_status", r.status.into());
    put("bin_bytes", Value::Array(r.body.iter().map(|&b| b.into()).collect()));
    put("bin_truncated", r.truncated.into());

    let e = request(&Request::new("", &format!("{}/denied", BASE))).unwrap_err();
    put("denied_status", e.status.code().into());
    put("denied_error", e.message.into());

    let e = request(&Request::get(&format!("{}/big", BASE))).unwrap_err();
    put("big_status", e.status.code().into());
    put("big_kind", e.kind.as_str().into());
    put("big_error", e.message.into());
    Ok(Output::json(Value::Object(out)))
}
