// Package packrun is the Go guest SDK for packrun node packs: it implements
// the packrun host ABI v1 (the openwop_* exports, buffer allocation, the JSON
// request and response envelopes, packed (ptr,len) returns and host status
// codes) so that a pack is a set of plain Go handlers.
//
// A pack is a main package built as a WASI reactor:
//
//	//go:build wasip1
//
//	package main
//
//	import "github.com/packrun/packrun/abi/guest/go/packrun"
//
//	func init() {
//		packrun.Pack("local.greeter")
//		packrun.Handle("example.greet", func(ctx *packrun.Context, in struct{ Name string }) (string, error) {
//			ctx.Log(packrun.LevelInfo, "greeting "+in.Name)
//			return "Hello, " + in.Name, nil
//		})
//	}
//
//	func main() {}
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o pack.wasm .
//
// Nodes are registered in init functions: the host runs package
// initialisation (the reactor's _initialize) once per instance and then reads
// the pack name and node list. Handlers run one at a time; a *Context gives
// the invocation's identity and the host services (log, clock, random,
// variables, channels, interrupt, and packrun:host/v1 memory, queue,
// adapters, evidence, artifacts, config). Host calls return a *StatusError
// for a non-zero status.
//
// Everything that touches the ABI is built only for GOOS=wasip1; the status,
// error and level types build everywhere.
package packrun
