package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// generateRequest is the body POSTed to {endpoint}/api/generate.
type generateRequest struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	Stream bool   `json:"stream"`
}

// runOllama POSTs the prompt to Ollama's /api/generate without streaming and
// returns its "response" string. The raw response body goes to outF.
func (r *Registry) runOllama(ctx context.Context, a *AdapterConfig, prompt string, call *Call, outF *os.File) error {
	url := strings.TrimRight(a.Endpoint, "/") + "/api/generate"
	call.Endpoint = &url
	body, err := json.Marshal(generateRequest{Model: a.Model, Prompt: prompt, Stream: false})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, time.Duration(a.TimeoutMS)*time.Millisecond, errTimeoutCause)
	defer cancel()
	req, err := http.NewRequestWithContext(runCtx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	resp, err := r.client.Do(req)
	if err != nil {
		if runCtx.Err() != nil {
			return ended(runCtx, a.TimeoutMS)
		}
		return fmt.Errorf("%w: POST %s: %w", ErrFailed, url, err)
	}
	defer resp.Body.Close()
	status := resp.StatusCode
	call.HTTPStatus = &status

	out := &capture{f: outF, limit: r.capture, buf: &bytes.Buffer{}}
	_, err = io.Copy(out, io.LimitReader(resp.Body, r.capture+1))
	call.StdoutBytes, call.StdoutTruncated = out.n, out.truncated()
	if out.err != nil {
		return fmt.Errorf("%w: evidence: %w", ErrFailed, out.err)
	}
	if err != nil {
		if runCtx.Err() != nil {
			return ended(runCtx, a.TimeoutMS)
		}
		return fmt.Errorf("%w: reading the response of %s: %w", ErrFailed, url, err)
	}
	if status < 200 || status > 299 {
		return fmt.Errorf("%w: %s answered HTTP %d: %s", ErrFailed, url, status, bodyExcerpt(out.buf.Bytes()))
	}
	if out.truncated() {
		return fmt.Errorf("%w: response of %s passed the capture limit of %d bytes", ErrFailed, url, r.capture)
	}
	var g struct {
		Response *string `json:"response"`
	}
	if err := json.Unmarshal(out.buf.Bytes(), &g); err != nil {
		return fmt.Errorf("%w: response of %s is not JSON: %w", ErrFailed, url, err)
	}
	if g.Response == nil {
		return fmt.Errorf("%w: response of %s has no \"response\" string: %s", ErrFailed, url, bodyExcerpt(out.buf.Bytes()))
	}
	call.Response, err = json.Marshal(*g.Response)
	if err != nil {
		return errors.Join(ErrFailed, err)
	}
	return nil
}

// bodyExcerpt is the start of an HTTP body, on one line.
func bodyExcerpt(b []byte) string {
	if len(b) > excerptBytes {
		b = append(b[:excerptBytes:excerptBytes], "..."...)
	}
	if len(b) == 0 {
		return "(empty body)"
	}
	return oneLine(strings.ToValidUTF8(string(b), "\uFFFD"))
}
