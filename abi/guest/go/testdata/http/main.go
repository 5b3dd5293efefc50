//go:build wasip1

// Command http is a test pack for sdk_test.go: it makes the requests of
// internal/testing/guesttest (HTTPRequests) through Context.HTTPRequest and
// reports what each answer decoded to (HTTPWant).
package main

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/abi/guest/go/packrun"
)

func main() {}

const base = "http://127.0.0.1:8080"

func init() {
	packrun.Pack("local.sdk.http.go")
	packrun.Node("test.http", run)
}

func run(ctx *packrun.Context, _ json.RawMessage) (any, error) {
	out := map[string]any{}
	r, err := ctx.HTTPRequest(packrun.HTTPRequest{
		URL:     base + "/json",
		Headers: []packrun.Header{{Name: "Accept", Value: "application/json"}, {Name: "X-Tag", Value: "a"}, {Name: "X-Tag", Value: "b"}},
		Timeout: 1500 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	var doc struct{ Name string }
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		return nil, err
	}
	out["get_status"], out["get_headers"], out["get_tag2"], out["get_len"], out["get_name"] = r.Status, len(r.Headers), r.Headers[2].Value, len(r.Body), doc.Name

	r, err = ctx.HTTPRequest(packrun.HTTPRequest{Method: "POST", URL: base + "/echo",
		Headers: []packrun.Header{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}}, Body: []byte("héllo")})
	if err != nil {
		return nil, err
	}
	out["post_status"], out["post_body"] = r.Status, r.Text()

	r, err = ctx.HTTPRequest(packrun.HTTPRequest{Method: "PUT", URL: base + "/bin", Body: []byte{0, 1, 255}})
	if err != nil {
		return nil, err
	}
	bytes := make([]int, len(r.Body))
	for i, b := range r.Body {
		bytes[i] = int(b)
	}
	out["bin_status"], out["bin_bytes"], out["bin_truncated"] = r.Status, bytes, r.Truncated

	var se *packrun.StatusError
	if _, err = ctx.HTTPRequest(packrun.HTTPRequest{URL: base + "/denied"}); !errors.As(err, &se) || !errors.Is(err, packrun.ErrAccessDenied) {
		return nil, errors.New("denied: no *StatusError")
	}
	out["denied_status"], out["denied_error"] = se.Status, se.Message

	if _, err = ctx.HTTPRequest(packrun.HTTPRequest{Method: "GET", URL: base + "/big"}); !errors.As(err, &se) || !errors.Is(err, packrun.ErrCapabilityBreach) {
		return nil, errors.New("big: no *StatusError")
	}
	out["big_status"], out["big_kind"], out["big_error"] = se.Status, se.Kind, se.Message
	return out, nil
}
