package runtime

import (
	"encoding/json"
	"sync"
)

// RunState holds the openwop variables and channels of one run. Invocations
// of the same run share it; the host decides how long it lives. It must be
// safe for concurrent use.
type RunState interface {
	Variable(name string) (json.RawMessage, bool)
	SetVariable(name string, value json.RawMessage) error
	// ReadChannel returns a JSON array of every value written to the channel
	// so far (an empty array for an unknown channel).
	ReadChannel(name string) json.RawMessage
	WriteChannel(name string, value json.RawMessage) error
}

// MemoryRunState is an in-memory RunState.
type MemoryRunState struct {
	mu       sync.Mutex
	vars     map[string]json.RawMessage
	channels map[string][]json.RawMessage
}

var _ RunState = (*MemoryRunState)(nil)

// NewMemoryRunState returns an empty in-memory run state.
func NewMemoryRunState() *MemoryRunState {
	return &MemoryRunState{vars: map[string]json.RawMessage{}, channels: map[string][]json.RawMessage{}}
}

func (s *MemoryRunState) Variable(name string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vars[name]
	return v, ok
}

func (s *MemoryRunState) SetVariable(name string, value json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vars[name] = append(json.RawMessage(nil), value...)
	return nil
}

func (s *MemoryRunState) ReadChannel(name string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []byte{'['}
	for i, v := range s.channels[name] {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, v...)
	}
	return append(out, ']')
}

func (s *MemoryRunState) WriteChannel(name string, value json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[name] = append(s.channels[name], append(json.RawMessage(nil), value...))
	return nil
}
