//go:build wasip1

// Command fetch is a packrun skill written with the Go guest SDK that
// reaches the network through its http grant (see pack.json).
//
//	example.fetch  {"url":"http://...","field":"name"}
//	               -> {"status":n,"length":bytes,"value":<the field of the JSON body, null if absent>}
//
// The grant names the destination and a secret the host sends as a bearer
// token: the module never sees it. Build with ../build.sh.
package main

import (
	"encoding/json"

	"github.com/packrun/packrun/abi/guest/go/packrun"
)

func init() {
	packrun.Pack("local.fetch.go")
	packrun.Handle("example.fetch", fetch)
}

func main() {}

type input struct {
	URL   string `json:"url"`
	Field string `json:"field"`
}

type output struct {
	Status int             `json:"status"`
	Length int             `json:"length"`
	Value  json.RawMessage `json:"value"`
}

func fetch(ctx *packrun.Context, in input) (output, error) {
	r, err := ctx.HTTPRequest(packrun.HTTPRequest{URL: in.URL, Headers: []packrun.Header{{Name: "Accept", Value: "application/json"}}})
	if err != nil {
		return output{}, err // a *StatusError: the host's reason and kind
	}
	out := output{Status: r.Status, Length: len(r.Body), Value: json.RawMessage("null")}
	var doc map[string]json.RawMessage
	if json.Unmarshal(r.Body, &doc) == nil {
		if v, ok := doc[in.Field]; ok {
			out.Value = v
		}
	}
	return out, nil
}
