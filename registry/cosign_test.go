package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// findCosign locates the reference client: $PACKRUN_COSIGN, then PATH, then
// /tmp/cosign-bin/cosign (where .ci builds it with
// `GOBIN=/tmp/cosign-bin go install github.com/sigstore/cosign/v3/cmd/cosign@v3.1.3`).
// Without it the test is skipped, unless PACKRUN_REQUIRE_COSIGN=1.
func findCosign(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PACKRUN_COSIGN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PACKRUN_COSIGN=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("cosign"); err == nil {
		return p
	}
	if _, err := os.Stat("/tmp/cosign-bin/cosign"); err == nil {
		return "/tmp/cosign-bin/cosign"
	}
	if os.Getenv("PACKRUN_REQUIRE_COSIGN") == "1" {
		t.Fatal("cosign not found (PACKRUN_COSIGN, PATH, /tmp/cosign-bin/cosign) and PACKRUN_REQUIRE_COSIGN=1")
	}
	t.Skip("cosign not found; set PACKRUN_COSIGN or build it with GOBIN=/tmp/cosign-bin go install github.com/sigstore/cosign/v3/cmd/cosign@v3.1.3")
	return ""
}

func runCosign(t *testing.T, cosign, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cosign, args...)
	cmd.Dir = dir
	// Offline and non-interactive: an empty key password, no TUF cache
	// refresh, no update checks, a private home.
	cmd.Env = append(os.Environ(),
		"COSIGN_PASSWORD=",
		"HOME="+dir,
		"TUF_ROOT="+filepath.Join(dir, ".sigstore"),
		"COSIGN_EXPERIMENTAL=0",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("cosign %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

func TestCosignInterop(t *testing.T) {
	cosign := findCosign(t)
	dir := t.TempDir()
	ctx := context.Background()
	archive := []byte("pretend this is a deterministic .pack archive\x00\x01\x02")
	const name = "vendor.acme.hello"

	t.Run("cosign verifies packrun bundles", func(t *testing.T) {
		prefix := filepath.Join(dir, "packrun")
		if err := GenerateKey(prefix); err != nil {
			t.Fatal(err)
		}
		key, err := LoadPrivateKey(prefix + ".key")
		if err != nil {
			t.Fatal(err)
		}
		sig, prov, err := Sign(ctx, archive, name, key, testSignOptions())
		if err != nil {
			t.Fatal(err)
		}
		pack := filepath.Join(dir, "hello.pack")
		for path, data := range map[string][]byte{
			pack:                               archive,
			pack + ".sigstore.json":            sig,
			pack + ".provenance.sigstore.json": prov,
		} {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out := runCosign(t, cosign, dir, "verify-blob", "--key", prefix+".pub",
			"--bundle", pack+".sigstore.json", "--insecure-ignore-tlog=true", "--offline", pack)
		t.Logf("verify-blob: %s", out)
		out = runCosign(t, cosign, dir, "verify-blob-attestation", "--key", prefix+".pub",
			"--bundle", pack+".provenance.sigstore.json", "--type", "slsaprovenance1",
			"--insecure-ignore-tlog=true", "--offline", pack)
		t.Logf("verify-blob-attestation: %s", out)

		// And cosign refuses a tampered archive, so the check above means something.
		if err := os.WriteFile(pack, append([]byte("X"), archive[1:]...), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(cosign, "verify-blob", "--key", prefix+".pub",
			"--bundle", pack+".sigstore.json", "--insecure-ignore-tlog=true", "--offline", pack)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("cosign accepted a tampered archive:\n%s", out)
		}
	})

	t.Run("packrun verifies cosign bundles", func(t *testing.T) {
		cdir := filepath.Join(dir, "cosign")
		if err := os.Mkdir(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		runCosign(t, cosign, cdir, "generate-key-pair")
		blob := filepath.Join(cdir, "blob.pack")
		if err := os.WriteFile(blob, archive, 0o644); err != nil {
			t.Fatal(err)
		}
		runCosign(t, cosign, cdir, "sign-blob", "--key", "cosign.key", "--bundle", "out.json",
			"--use-signing-config=false", "--tlog-upload=false", "--yes", blob)
		bundle, err := os.ReadFile(filepath.Join(cdir, "out.json"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cosign bundle: %s", bundle)
		pub, err := os.ReadFile(filepath.Join(cdir, "cosign.pub"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPublicKey(filepath.Join(cdir, "cosign.pub")); err != nil {
			t.Fatal(err)
		}
		p := NewPolicy()
		p.RequireProvenance = false
		if err := p.AddKey("cosign-user", pub, []string{"vendor.acme.*"}); err != nil {
			t.Fatal(err)
		}
		v, err := Verify(ctx, p, Signed{Archive: archive, Bundle: bundle}, name, VerifyOptions{})
		if err != nil {
			t.Fatalf("Verify(cosign bundle): %v", err)
		}
		if v.Signer != "key:cosign-user" {
			t.Errorf("Signer = %q, want key:cosign-user", v.Signer)
		}
		// cosign's key hint is the same as packrun's key id.
		var parsed struct {
			VerificationMaterial struct {
				PublicKey struct{ Hint string }
			}
		}
		if err := json.Unmarshal(bundle, &parsed); err != nil {
			t.Fatal(err)
		}
		if h := parsed.VerificationMaterial.PublicKey.Hint; h != v.KeyID {
			t.Errorf("cosign hint %q != packrun KeyID %q", h, v.KeyID)
		}
		// The same bundle does not vouch for other bytes.
		_, err = Verify(ctx, p, Signed{Archive: append(archive, 0), Bundle: bundle}, name, VerifyOptions{})
		if !errors.Is(err, ErrUntrusted) {
			t.Fatalf("Verify(tampered, cosign bundle) = %v, want ErrUntrusted", err)
		}
	})
}
