package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	extism "github.com/extism/go-sdk"

	"github.com/packrun/packrun/abi"
)

// Extism's kernel serves http_request, http_status_code and http_headers in
// extism:host/env itself, with http.DefaultClient and its own allowed
// hosts. packrun never lets a plugin reach them: before a plugin is
// compiled, its imports of the three are renamed to moduleExtismHTTP, whose
// functions below read the request the way the kernel's do and send it as
// packrun's http_request: the same grant, client, limits, secrets, trace
// and replay as any node's request.

// moduleExtismHTTP is the namespace a plugin's Extism http imports are
// moved to. A plugin naming it itself is refused as an unknown import
// (validation sees the module as written).
const moduleExtismHTTP = "packrun:extism/http"

// CodeExtismHTTP is the error code of an Extism plugin's node whose
// http_request was refused or failed: Extism's interface has no way to tell
// the plugin, so the node fails (as Extism's own host traps), naming why.
const CodeExtismHTTP = "http_request_failed"

var (
	extismHTTPImports = map[string]bool{"http_request": true, "http_status_code": true, "http_headers": true}
	extismHTTPSigs    = map[string]string{"http_request": "(i64 i64) -> (i64)", "http_status_code": "() -> (i32)", "http_headers": "() -> (i64)"}
)

// extismHTTP is what an invocation's last Extism http_request answered,
// for http_status_code and http_headers.
type extismHTTP struct {
	status  int32
	headers []byte // JSON object, lower-case names, values joined by ","
}

func extismHTTPFuncs() []extism.HostFunction {
	i64 := []extism.ValueType{extism.ValueTypeI64}
	fs := []extism.HostFunction{
		extism.NewHostFunctionWithStack("http_request", extismHTTPRequest, []extism.ValueType{extism.ValueTypeI64, extism.ValueTypeI64}, i64),
		extism.NewHostFunctionWithStack("http_status_code", func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
			stack[0] = uint64(uint32(stateOf(ctx).act.extHTTP.status))
		}, nil, []extism.ValueType{extism.ValueTypeI32}),
		extism.NewHostFunctionWithStack("http_headers", func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
			a := stateOf(ctx).act
			stack[0] = 0
			if len(a.extHTTP.headers) > 0 {
				stack[0] = writePlugin(cp, a, a.extHTTP.headers)
			}
		}, nil, i64),
	}
	for i := range fs {
		fs[i].SetNamespace(moduleExtismHTTP)
	}
	return fs
}

// extismHTTPRequest serves Extism's http_request(request, body) -> body:
// request is {"method","url","headers":{name:value}} in plugin memory,
// body a memory block or 0; the answer's body is a new block (0 when
// empty), its status and headers kept for the next two calls.
func extismHTTPRequest(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
	_, a := begin(ctx, "http_request")
	a.extHTTP = extismHTTP{}
	meta := readPlugin(cp, a, stack[0], "request")
	var body []byte
	if stack[1] != 0 {
		body = readPlugin(cp, a, stack[1], "body")
	}
	req, err := extismToRequest(meta, body)
	if err != nil {
		a.fail(CodeExtismHTTP, "Extism http_request: "+err.Error())
	}
	s, resp := extismServe(ctx, a, abi.HostHTTPRequest, req)
	if s != abi.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(resp, &e)
		code := CodeExtismHTTP
		if s == abi.StatusCapabilityBreach {
			code = abi.CodeCapBreached
		}
		a.fail(code, fmt.Sprintf("Extism http_request: %s (status %d, %s)", orText(e.Error, "refused"), int32(s), s))
	}
	st, hdr, out, err := extismFromResponse(resp)
	if err != nil {
		a.fail(abi.CodeHostError, "Extism http_request: "+err.Error())
	}
	a.extHTTP = extismHTTP{status: st, headers: hdr}
	stack[0] = 0
	if len(out) > 0 {
		stack[0] = writePlugin(cp, a, out)
	}
}

func readPlugin(cp *extism.CurrentPlugin, a *activity, off uint64, what string) []byte {
	b, err := cp.ReadBytes(off)
	if err != nil {
		a.fail(abi.CodeHostCallBounds, fmt.Sprintf("Extism http_request: cannot read the %s at offset %d: %s", what, off, firstLine(err)))
	}
	if len(b) > maxHostRequest {
		a.fail(CodeExtismHTTP, fmt.Sprintf("Extism http_request: the %s of %d bytes is over %d", what, len(b), maxHostRequest))
	}
	_ = cp.Free(off) // the block was just read: it exists
	return b
}

func writePlugin(cp *extism.CurrentPlugin, a *activity, b []byte) uint64 {
	off, err := cp.WriteBytes(b)
	if err != nil {
		a.fail(abi.CodeAllocFailed, "Extism: cannot hand the response to the plugin: "+firstLine(err))
	}
	return off
}

// extismToRequest turns Extism's request and body into packrun's
// http_request request. Headers are sorted by name, so the recorded
// request does not depend on map order.
func extismToRequest(meta, body []byte) ([]byte, error) {
	var r struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(meta, &r); err != nil {
		return nil, fmt.Errorf("the request is not {\"method\",\"url\",\"headers\"}: %s", firstLine(err))
	}
	w := struct {
		Method     string      `json:"method"`
		URL        string      `json:"url"`
		Headers    [][2]string `json:"headers,omitempty"`
		Body       *string     `json:"body,omitempty"`
		BodyBase64 *string     `json:"body_base64,omitempty"`
	}{Method: strings.ToUpper(orText(r.Method, "GET")), URL: r.URL}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.Headers {
			if !yield(k) {
				return
			}
		}
	}) {
		w.Headers = append(w.Headers, [2]string{k, r.Headers[k]})
	}
	switch {
	case body == nil:
	case utf8.Valid(body):
		s := string(body)
		w.Body = &s
	default:
		s := base64.StdEncoding.EncodeToString(body)
		w.BodyBase64 = &s
	}
	return json.Marshal(w)
}

// extismFromResponse turns packrun's http_request answer into Extism's:
// the status, the headers object and the body.
func extismFromResponse(resp []byte) (int32, []byte, []byte, error) {
	var r struct {
		Status     int32      `json:"status"`
		Headers    [][]string `json:"headers"`
		Body       *string    `json:"body"`
		BodyBase64 *string    `json:"body_base64"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return 0, nil, nil, fmt.Errorf("the answer is not http_request's: %s", firstLine(err))
	}
	h := map[string]string{}
	for _, kv := range r.Headers {
		if len(kv) != 2 {
			continue
		}
		k := strings.ToLower(kv[0])
		if v, ok := h[k]; ok {
			h[k] = v + "," + kv[1]
		} else {
			h[k] = kv[1]
		}
	}
	hdr, _ := json.Marshal(h)
	var body []byte
	switch {
	case r.Body != nil:
		body = []byte(*r.Body)
	case r.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*r.BodyBase64)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("the answer's body_base64 is not base64")
		}
		body = b
	}
	return r.Status, hdr, body, nil
}

func orText(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
