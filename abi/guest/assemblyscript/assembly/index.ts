// @packrun/as-sdk: write packrun node packs in AssemblyScript.
//
//   import { Context, Result, node, pack, parseJson, JsonObject } from "@packrun/as-sdk/assembly";
//   export * from "@packrun/as-sdk/assembly/exports";
//
//   pack("local.greeter");
//   node("example.greet", (ctx: Context, input: string): Result => {
//     const name = parseJson(input)!.getString("name", "world");
//     return Result.ok(new JsonObject().str("greeting", "Hello, " + name + "!").toString());
//   });

export { Status, Level, statusName } from "./abi";
export { Context, HostResult, HostFn, hostFnName, MessageFormat, messageFormatName } from "./context";
export { Result, Handler, node, pack } from "./node";
export { JsonKind, JsonValue, JsonObject, JsonArray, parseJson, isValidJson, quote, numberJson, base64 } from "./json";
export { HttpRequest, HttpResponse, HttpResult } from "./http";
