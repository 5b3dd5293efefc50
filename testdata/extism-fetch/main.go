//go:build wasip1

// Command extism-fetch is an Extism plugin written with the Extism Go PDK
// for the outbound HTTP tests: its export fetch sends the request its
// input describes ({"method","url","headers"?,"body"?}) with the PDK's
// HTTPRequest, that is through Extism's own http_request, and outputs
// {"status","headers","body"} as the PDK returned them.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/extism/go-pdk"
)

var methods = map[string]pdk.HTTPMethod{"GET": pdk.MethodGet, "POST": pdk.MethodPost, "PUT": pdk.MethodPut, "DELETE": pdk.MethodDelete}

//go:wasmexport fetch
func fetch() int32 {
	var in struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    *string           `json:"body"`
	}
	if err := json.Unmarshal(pdk.Input(), &in); err != nil {
		pdk.SetError(fmt.Errorf("input: %w", err))
		return 1
	}
	m, ok := methods[in.Method]
	if !ok {
		m = pdk.MethodGet
	}
	req := pdk.NewHTTPRequest(m, in.URL)
	for k, v := range in.Headers {
		req.SetHeader(k, v)
	}
	if in.Body != nil {
		req.SetBody([]byte(*in.Body))
	}
	resp := req.Send()
	out, _ := json.Marshal(map[string]any{"status": resp.Status(), "headers": resp.Headers(), "body": string(resp.Body())})
	pdk.Output(out)
	return 0
}

func main() {}
