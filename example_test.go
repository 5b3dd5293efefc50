package packrun_test

import (
	"context"
	"fmt"
	"log"
	"os"

	packrun "github.com/packrun/packrun"
)

// A Go program invokes a module file and gets the node's output and the
// recorded attempt.
func ExampleHost_Invoke() {
	ctx := context.Background()
	home, _ := os.MkdirTemp("", "packrun-example-")
	defer os.RemoveAll(home)

	h, err := packrun.Open(ctx, home, packrun.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)

	inv, err := h.Invoke(ctx, "examples/hello-c/hello.wasm", packrun.InvokeRequest{Input: []byte(`{"name":"Ada"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inv.Result.Outcome, string(inv.Result.Output))
	fmt.Println(inv.Attempt.AttemptID != "")

	// The attempt replays from its trace, with no side effects.
	v, err := h.Replay(ctx, inv.Attempt.AttemptID, packrun.ReplayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("identical:", v.Identical)
	// Output:
	// completed {"greeting":"Hello, Ada!"}
	// true
	// identical: true
}

// Opening a home that does not exist fails when the caller only means to
// read it.
func ExampleOpen_mustExist() {
	_, err := packrun.Open(context.Background(), "/nonexistent/packrun-home", packrun.Config{MustExist: true})
	fmt.Println(err)
	// Output:
	// packrun home does not exist: /nonexistent/packrun-home
}
