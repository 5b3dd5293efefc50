package evidence

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/packrun/packrun/host"
)

// MinSecretLen is the shortest text a Redactor replaces: shorter fragments
// of a secret value (such as "a" or "42" inside an object) would redact
// unrelated text everywhere.
const MinSecretLen = 4

// Redactor rewrites text and JSON so that the secrets read during an
// attempt are replaced by "[REDACTED:<name>]" before they reach evidence or
// logs. It is safe for concurrent use. The zero value redacts nothing.
type Redactor struct {
	mu      sync.Mutex
	secrets map[string]string // text → name
	rep     *strings.Replacer
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return &Redactor{} }

// Add registers a secret value under name (by convention
// "<namespace>/<key>"). A JSON string registers its text; any other value
// registers each string and number inside it, and its compact encoding.
// Texts shorter than MinSecretLen are ignored.
func (r *Redactor) Add(name string, value json.RawMessage) {
	var texts []string
	var v any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		texts = append(texts, string(value)) // not JSON: the raw bytes are the secret
	} else {
		if _, isString := v.(string); !isString {
			texts = append(texts, string(CompactJSON(value)))
			var c bytes.Buffer
			if json.Compact(&c, value) == nil {
				texts = append(texts, c.String())
			}
		}
		texts = collectLeaves(v, texts)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	for _, t := range texts {
		if len(t) >= MinSecretLen {
			r.secrets[t] = name
		}
	}
	r.rep = nil
}

func collectLeaves(v any, out []string) []string {
	switch x := v.(type) {
	case string:
		out = append(out, x)
	case json.Number:
		out = append(out, x.String())
	case []any:
		for _, e := range x {
			out = collectLeaves(e, out)
		}
	case map[string]any:
		for _, e := range x {
			out = collectLeaves(e, out)
		}
	}
	return out
}

// Len is the number of registered secret texts.
func (r *Redactor) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.secrets)
}

// replacer returns a single-pass replacer trying the longest secret first,
// so a secret that contains another is replaced whole and no replacement
// is itself rewritten.
func (r *Redactor) replacer() *strings.Replacer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.secrets) == 0 {
		return nil
	}
	if r.rep == nil {
		texts := make([]string, 0, len(r.secrets))
		for t := range r.secrets {
			texts = append(texts, t)
		}
		sort.Slice(texts, func(i, j int) bool {
			if len(texts[i]) != len(texts[j]) {
				return len(texts[i]) > len(texts[j])
			}
			return texts[i] < texts[j]
		})
		pairs := make([]string, 0, 2*len(texts))
		for _, t := range texts {
			pairs = append(pairs, t, "[REDACTED:"+r.secrets[t]+"]")
		}
		r.rep = strings.NewReplacer(pairs...)
	}
	return r.rep
}

// String redacts text.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	if rep := r.replacer(); rep != nil {
		return rep.Replace(s)
	}
	return s
}

// Bytes redacts text held in bytes (stdout, stderr).
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	rep := r.replacer()
	if rep == nil {
		return b
	}
	s := rep.Replace(string(b))
	if s == string(b) {
		return b
	}
	return []byte(s)
}

// JSON redacts a JSON document and keeps it valid: every string (object
// keys included) is decoded, redacted and re-encoded, and a number equal to
// a secret becomes the redaction string. Everything else is kept byte for
// byte. Invalid JSON is redacted as text.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil || len(raw) == 0 {
		return raw
	}
	rep := r.replacer()
	if rep == nil {
		return raw
	}
	if !json.Valid(raw) {
		return r.Bytes(raw)
	}
	var out []byte
	changed := false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(raw) && raw[j] != '"' {
				if raw[j] == '\\' {
					j++
				}
				j++
			}
			tok := raw[i : j+1]
			var s string
			if json.Unmarshal(tok, &s) == nil {
				if red := rep.Replace(s); red != s {
					enc, _ := json.Marshal(red)
					out = append(out, enc...)
					changed = true
					i = j + 1
					continue
				}
			}
			out = append(out, tok...)
			i = j + 1
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			tok := string(raw[i:j])
			if red := rep.Replace(tok); red != tok {
				enc, _ := json.Marshal(red)
				out = append(out, enc...)
				changed = true
			} else {
				out = append(out, tok...)
			}
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	if !changed {
		return raw
	}
	return out
}

// Attempt redacts, in place, every field of an attempt a person or a log
// reader sees: input, output, interrupt, error message and details,
// stdout, stderr, logs, events, adapter calls and diagnostics. The trace is
// left as recorded, because replay feeds it back to the module; redact it
// with JSON as well if the attempt must not keep secret values at all (its
// replay then diverges where a secret was read).
func (r *Redactor) Attempt(a *host.Attempt) {
	if r == nil || r.Len() == 0 {
		return
	}
	for _, f := range []*json.RawMessage{&a.Input, &a.Output, &a.Interrupt, &a.Logs, &a.Events, &a.AdapterCalls, &a.Diagnostics} {
		*f = r.JSON(*f)
	}
	if a.Error != nil {
		e := *a.Error
		e.Message = r.String(e.Message)
		e.Details = r.JSON(e.Details)
		a.Error = &e
	}
	a.Stdout = r.Bytes(a.Stdout)
	a.Stderr = r.Bytes(a.Stderr)
}
