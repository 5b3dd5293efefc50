//! all.rs - test module: one node that calls every host function of the
//! Rust SDK and reports what it got, plus nodes for handler mistakes. Built
//! by sdk_test.go when the toolchain is available (no committed .wasm).

use packrun::json::{self, Value};
use packrun::{Content, Context, Error, HostFn, Level, MessageFormat, Output, PutOptions, Status};

// The messages of internal/guesttest (OpsAlert, OffGrant, InvalidMsg): within the grant, outside
// it, refused by its seed.
const OPS_ALERT: &str = r#"{"metadata":{"message_id":"11111111-2222-3333-4444-555555555555","timestamp":"2026-01-02T15:04:05Z","source":"probe","message_type":"ops.alert","version":"1.0"},"payload":{"n":1}}"#;
const OFF_GRANT: &str = r#"{"metadata":{"message_id":"11111111-2222-3333-4444-666666666666","timestamp":"2026-01-02T15:04:05Z","source":"probe","message_type":"billing.charge","version":"1.0"},"payload":{"n":2}}"#;
const INVALID: &str = r#"{"metadata":{"source":"probe"},"payload":{}}"#;
// The sensor events of internal/guesttest (SensorEvent, InvalidEvent).
const SENSOR_EVENT: &str = r#"{"event_id":"ev-1","observed_at":"2026-01-02T15:04:05Z","source_ref":"probe:1","dedupe_key":"k1","payload":{"n":1}}"#;
const INVALID_EVENT: &str = r#"{"event_id":"ev-2","payload":{}}"#;

packrun::pack! {
    name: "local.sdk.rust.all",
    nodes: {
        "test.all" => all,
        "test.bad_output" => |_: &Context, _: &str| Ok(Output::complete("{not json")),
        "test.details" => |_: &Context, _: &str| Err(Error::new("quota", "too \"many\"").with_details(r#"{"limit":3}"#)),
        "test.panic" => |_: &Context, _: &str| panic!("boom {}", 42),
    },
}

fn status<T>(r: Result<T, Status>) -> Value {
    match r {
        Ok(_) => 0.into(),
        Err(s) => s.code().into(),
    }
}

fn raw(s: String) -> Value {
    Value::Raw(s)
}

fn all(ctx: &Context, _input: &str) -> Result<Output, Error> {
    let mut o: Vec<(String, Value)> = Vec::new();
    let mut put = |k: &str, v: Value| o.push((k.to_string(), v));
    for (i, l) in [Level::Trace, Level::Debug, Level::Info, Level::Warn, Level::Error].iter().enumerate() {
        packrun::log(*l, &format!("level {}", i));
    }
    packrun::info!("formatted {} {:?}", 1, "x");
    put("now", packrun::now_ms().into());
    let mut r = [0u8; 4];
    put("random", status(packrun::random(&mut r)));
    put("varUnset", Value::from(packrun::variable_get("v")?.is_none()));
    put("varSet", status(packrun::variable_set("v", r#"{"a":[1,2]}"#)));
    put("varBad", status(packrun::variable_set("v", "{bad")));
    put("var", raw(packrun::variable_get("v")?.unwrap_or_default()));
    put("chanEmpty", raw(packrun::channel_read("c")?));
    packrun::channel_write("c", "1")?;
    packrun::channel_write("c", "\"two\"")?;
    put("chan", raw(packrun::channel_read("c")?));
    put("putA", status(packrun::memory_put("ns", "a", r#"{"x":1}"#, PutOptions::default().secret())));
    put("putB", status(packrun::memory_put("ns", "b", "2", PutOptions::ttl(60))));
    put("memA", raw(packrun::memory_get("ns", "a")?.unwrap_or_default()));
    put("memMissing", Value::from(packrun::memory_get("ns", "zz")?.is_none()));
    put("list", packrun::memory_list("ns", None)?.into());
    put("listB", packrun::memory_list("ns", Some("b"))?.into());
    put("del", status(packrun::memory_delete("ns", "a")));
    put("memAfterDel", Value::from(packrun::memory_get("ns", "a")?.is_none()));
    put("staged", packrun::queue_enqueue(r#"{"task_type":"t","payload":{}}"#)?.into());
    let a = packrun::adapter_invoke("echo", r#"{"q":"hi"}"#)?;
    put("adapterOut", raw(a.output));
    put("adapterExit", raw(a.exit_status));
    put("evidence", status(packrun::evidence_record("note", r#"{"n":1}"#)));
    let art = packrun::artifact_put("output", "a.txt", Some("text/plain"), Content::Text("hello \"x\"\n"))?;
    put("artifactId", art.artifact_id.into());
    put("sha256", art.sha256.into());
    put("artifact64", status(packrun::artifact_put("output", "b.bin", None, Content::Base64("AAE="))));
    put("config", raw(packrun::config_get("greeting")?.unwrap_or_default()));
    put("configMissing", Value::from(packrun::config_get("missing")?.is_none()));
    put("rawResp", raw(packrun::host_call(HostFn::ConfigGet, r#"{"key":"greeting"}"#)?.unwrap_or_default()));
    put("rawMissing", status(packrun::host_call(HostFn::ConfigGet, r#"{"key":"missing"}"#)));
    put("badArg", status(packrun::evidence_record("note", "{")));
    let p = packrun::message_publish(MessageFormat::BusEnvelope, OPS_ALERT, None)?;
    put("pubId", p.message_id.into());
    put("pubHash", p.hash.into());
    put("pubStaged", p.staged.into());
    put("pubDenied", status(packrun::message_publish(MessageFormat::BusEnvelope, OFF_GRANT, Some("c2ln"))));
    put("pubInvalid", status(packrun::message_publish(MessageFormat::AgentEnvelope, INVALID, None)));
    put("pubBadJson", status(packrun::message_publish(MessageFormat::BusEnvelope, "{", None)));
    let e = packrun::sensor_emit(SENSOR_EVENT)?;
    put("sensorId", e.event_id.into());
    put("sensorStaged", e.staged.into());
    put("sensorInvalid", status(packrun::sensor_emit(INVALID_EVENT)));
    put("sensorBadJson", status(packrun::sensor_emit("{")));
    put("typeId", ctx.type_id.into());
    put("runId", ctx.run_id.clone().into());
    put("nodeId", ctx.node_id.clone().into());
    put("tenantId", ctx.tenant_id.clone().into());
    put("attempt", ctx.attempt.into());
    put("configurable", raw(ctx.configurable.clone().unwrap_or_else(|| "null".into())));
    Ok(Output::json(json::Value::Object(o)))
}
