package main

import (
	"testing"

	"github.com/packrun/packrun/internal/api"
)

// packrun openapi prints the document GET /v1/openapi.json serves.
func TestOpenAPICommand(t *testing.T) {
	want, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "openapi")
	if code != 0 || out != string(want)+"\n" {
		t.Fatalf("packrun openapi: exit %d, stderr %q, stdout %.200q", code, errOut, out)
	}
	if code, _, _ := runCLI(t, "openapi", "extra"); code != exitUsage {
		t.Errorf("packrun openapi extra: exit %d, want %d", code, exitUsage)
	}
}
