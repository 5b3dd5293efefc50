// Package hosttest is test support for guest modules: a map-backed fake of
// runtime.Services that records every host call, helpers that load and
// invoke a module under the packrun runtime, and a check that a committed
// module rebuilds from source to the same bytes. Only tests import it.
package hosttest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/packrun/packrun/abi"
)

// Call is one packrun:host/v1 call a module made.
type Call struct {
	Fn  string                     // e.g. abi.HostMemoryPut
	Raw json.RawMessage            // the request as the module sent it
	Req map[string]json.RawMessage // its top-level fields; nil when it is not an object
}

// String is fn and the request, for failure messages.
func (c Call) String() string { return c.Fn + " " + string(c.Raw) }

// Value decodes the request field name (nil when absent): strings, float64s,
// bools, []any and map[string]any as encoding/json decodes them.
func (c Call) Value(name string) any {
	var v any
	if raw, ok := c.Req[name]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}

// Services serves packrun:host/v1 from memory, like the host would with
// every service granted, and records every call. It is safe for
// concurrent use.
//
//   - memory_get/put/delete/list: a map keyed by namespace and key (a put
//     without a value is a validation error);
//   - queue_enqueue: counts the staged follow-ups, {"staged":n};
//   - adapter_invoke: echoes the input, {"output":input,"exit_status":"ok",
//     "exit_code":0,"error":""} (see WithAdapterResult);
//   - evidence_record: accepts;
//   - artifact_put: {"artifact_id":"art-<name>","sha256":"00"};
//   - config_get: the values given with WithConfig.
//
// A request that is not a JSON object gets abi.StatusValidation.
type Services struct {
	mu          sync.Mutex
	mem         map[string]json.RawMessage
	config      map[string]json.RawMessage
	calls       []Call
	staged      int
	adapter     string
	responses   map[string]response
	granted     map[string]bool
	requireKeys bool
}

type response struct {
	status abi.Status
	body   []byte
}

// Option configures Services.
type Option func(*Services)

// WithConfig sets config value key (JSON text) for config_get.
func WithConfig(key, value string) Option {
	return func(s *Services) { s.config[key] = json.RawMessage(value) }
}

// WithAdapterResult replaces what adapter_invoke answers next to the echoed
// "output": fields is the rest of the JSON object, e.g. `"exit_status":"ok"`.
func WithAdapterResult(fields string) Option {
	return func(s *Services) { s.adapter = fields }
}

// WithResponse makes fn answer status and body whatever the request.
func WithResponse(fn string, status abi.Status, body string) Option {
	return func(s *Services) { s.responses[fn] = response{status, []byte(body)} }
}

// Grant serves only fns; every other function gets abi.StatusAccessDenied.
func Grant(fns ...string) Option {
	return func(s *Services) {
		s.granted = map[string]bool{}
		for _, fn := range fns {
			s.granted[fn] = true
		}
	}
}

// RequireMemoryKeys rejects a memory_get, memory_put or memory_delete
// without a namespace or key (and a memory_list without a namespace) with
// abi.StatusValidation, as the host does.
func RequireMemoryKeys() Option {
	return func(s *Services) { s.requireKeys = true }
}

// Granted reports whether fn is served (every function unless Grant
// narrowed the set).
func (s *Services) Granted(fn string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted == nil || s.granted[fn]
}

// NewServices returns empty Services configured by opts.
func NewServices(opts ...Option) *Services {
	s := &Services{
		mem:       map[string]json.RawMessage{},
		config:    map[string]json.RawMessage{},
		adapter:   `"exit_status":"ok","exit_code":0,"error":""`,
		responses: map[string]response{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func memKey(ns, key string) string { return ns + "/" + key }

// Serve implements runtime.Services.
func (s *Services) Serve(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Call{Fn: fn, Raw: append(json.RawMessage(nil), req...)}
	if json.Unmarshal(req, &c.Req) != nil {
		c.Req = nil
	}
	s.calls = append(s.calls, c)
	if s.granted != nil && !s.granted[fn] {
		return abi.StatusAccessDenied, nil
	}
	if c.Req == nil {
		return abi.StatusValidation, nil
	}
	if r, ok := s.responses[fn]; ok {
		return r.status, r.body
	}
	str := func(name string) string {
		var v string
		_ = json.Unmarshal(c.Req[name], &v)
		return v
	}
	ns, key := str("namespace"), str("key")
	switch fn {
	case abi.HostMemoryGet, abi.HostMemoryPut, abi.HostMemoryDelete:
		if s.requireKeys && (ns == "" || key == "") {
			return abi.StatusValidation, nil
		}
	case abi.HostMemoryList:
		if s.requireKeys && ns == "" {
			return abi.StatusValidation, nil
		}
	}
	switch fn {
	case abi.HostMemoryGet:
		v, ok := s.mem[memKey(ns, key)]
		if !ok {
			return abi.StatusNotFound, nil
		}
		return abi.StatusOK, []byte(`{"value":` + string(v) + `}`)
	case abi.HostMemoryPut:
		v, ok := c.Req["value"]
		if !ok {
			return abi.StatusValidation, nil
		}
		s.mem[memKey(ns, key)] = v
		return abi.StatusOK, nil
	case abi.HostMemoryDelete:
		delete(s.mem, memKey(ns, key))
		return abi.StatusOK, nil
	case abi.HostMemoryList:
		keys := []string{}
		for k := range s.mem {
			if rest, ok := strings.CutPrefix(k, ns+"/"); ok && strings.HasPrefix(rest, str("prefix")) {
				keys = append(keys, rest)
			}
		}
		slices.Sort(keys)
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return abi.StatusOK, b
	case abi.HostQueueEnqueue:
		s.staged++
		b, _ := json.Marshal(map[string]int{"staged": s.staged})
		return abi.StatusOK, b
	case abi.HostAdapterInvoke:
		in := c.Req["input"]
		if in == nil {
			in = json.RawMessage(`null`)
		}
		return abi.StatusOK, []byte(`{"output":` + string(in) + `,` + s.adapter + `}`)
	case abi.HostEvidenceRecord:
		return abi.StatusOK, nil
	case abi.HostArtifactPut:
		b, _ := json.Marshal(map[string]string{"artifact_id": "art-" + str("name"), "sha256": "00"})
		return abi.StatusOK, b
	case abi.HostConfigGet:
		v, ok := s.config[key]
		if !ok {
			return abi.StatusNotFound, nil
		}
		return abi.StatusOK, []byte(`{"value":` + string(v) + `}`)
	}
	return abi.StatusAccessDenied, nil
}

// Calls returns every call so far, in order.
func (s *Services) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsOf returns the calls of fn, in order.
func (s *Services) CallsOf(fn string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Fn == fn {
			out = append(out, c)
		}
	}
	return out
}

// Last returns the latest call of fn (the zero Call when there is none).
func (s *Services) Last(fn string) Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].Fn == fn {
			return s.calls[i]
		}
	}
	return Call{}
}

// Memory returns the value stored under namespace ns and key.
func (s *Services) Memory(ns, key string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.mem[memKey(ns, key)]
	return v, ok
}

// SetMemory stores value (JSON text) under namespace ns and key.
func (s *Services) SetMemory(ns, key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem[memKey(ns, key)] = json.RawMessage(value)
}
