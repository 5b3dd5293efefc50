//go:build wasip1

// Command extism-go is an Extism plugin written with the Extism Go PDK and
// run by packrun as a pack: its exported function count serves the node
// extism.count. It keeps a counter per name in packrun memory through the
// packrun:host/v1 host functions, which Extism plugins call with the Extism
// convention (request offset in, response offset out).
package main

import (
	"encoding/json"
	"fmt"

	"github.com/extism/go-pdk"
)

//go:wasmimport packrun:host/v1 memory_get
func memoryGet(offset uint64) uint64

//go:wasmimport packrun:host/v1 memory_put
func memoryPut(offset uint64) uint64

// hostResponse is what every packrun:host/v1 function returns to a plugin.
type hostResponse struct {
	Status int32           `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// call sends a JSON request to a packrun host function and decodes the reply.
func call(fn func(uint64) uint64, req any) (hostResponse, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return hostResponse{}, err
	}
	in := pdk.AllocateBytes(b)
	defer in.Free()
	out := pdk.FindMemory(fn(in.Offset()))
	defer out.Free()
	var r hostResponse
	err = json.Unmarshal(out.ReadBytes(), &r)
	return r, err
}

//go:wasmexport count
func count() int32 {
	var in struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(pdk.Input(), &in); err != nil {
		pdk.SetError(fmt.Errorf("input: %w", err))
		return 1
	}
	if in.Name == "" {
		in.Name = "world"
	}
	key := map[string]any{"namespace": "counters", "key": in.Name}
	got, err := call(memoryGet, key)
	if err != nil {
		pdk.SetError(err)
		return 1
	}
	n := 0
	switch got.Status {
	case 0:
		var v struct {
			Value int `json:"value"`
		}
		json.Unmarshal(got.Body, &v)
		n = v.Value
	case 11: // not found: first call
	default:
		pdk.SetError(fmt.Errorf("memory_get: status %d", got.Status))
		return 1
	}
	n++
	put, err := call(memoryPut, map[string]any{"namespace": "counters", "key": in.Name, "value": n, "ttlSeconds": 3600})
	if err != nil || put.Status != 0 {
		pdk.SetError(fmt.Errorf("memory_put: status %d %v", put.Status, err))
		return 1
	}
	out, _ := json.Marshal(map[string]any{"name": in.Name, "count": n})
	pdk.Output(out)
	return 0
}

func main() {}
