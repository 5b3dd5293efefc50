//go:build wasip1

// Command example is a packrun node pack written with the Go guest SDK.
//
//	example.counter  {"key":"k","by":n} -> {"key":"k","count":c}
//	                 adds n (default 1) to the counter in memory namespace
//	                 "counters" (kept for a day) and logs the new value
//	example.fail     always fails with code "not_allowed"
//	example.suspend  suspends the run with {"question":"approve?"}
//	example.approve  asks the host for approval through an interrupt and
//	                 returns {"approved":<resume value>}
//
// Build with ../build.sh.
package main

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/abi/guest/go/packrun"
)

func init() {
	packrun.Pack("local.counter.go")
	packrun.Handle("example.counter", counter)
	packrun.Node("example.fail", func(ctx *packrun.Context, in json.RawMessage) (any, error) {
		ctx.Log(packrun.LevelWarn, "about to fail")
		return nil, packrun.Fail("not_allowed", "this node always fails").WithDetails(map[string]any{"input": in})
	})
	packrun.Node("example.suspend", func(ctx *packrun.Context, in json.RawMessage) (any, error) {
		return nil, packrun.Suspend(map[string]string{"question": "approve?"})
	})
	packrun.Handle("example.approve", func(ctx *packrun.Context, in struct{}) (map[string]json.RawMessage, error) {
		v, err := ctx.Interrupt(map[string]string{"question": "approve?"})
		if err != nil {
			return nil, err
		}
		return map[string]json.RawMessage{"approved": v}, nil
	})
}

func main() {}

type counterIn struct {
	Key string `json:"key"`
	By  int    `json:"by"`
}

type counterOut struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
}

func counter(ctx *packrun.Context, in counterIn) (counterOut, error) {
	if in.Key == "" {
		in.Key = "default"
	}
	if in.By == 0 {
		in.By = 1
	}
	n, err := packrun.As[int](ctx.MemoryGet("counters", in.Key))
	if err != nil && !errors.Is(err, packrun.ErrNotFound) {
		return counterOut{}, err
	}
	n += in.By
	if err := ctx.MemoryPut("counters", in.Key, n, packrun.TTL(24*time.Hour)); err != nil {
		return counterOut{}, err
	}
	ctx.Logf(packrun.LevelInfo, "counter %s = %d", in.Key, n)
	return counterOut{Key: in.Key, Count: n}, nil
}
