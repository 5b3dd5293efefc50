package oci

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
)

func TestPlainHTTPOnlyForLoopback(t *testing.T) {
	for _, c := range []struct {
		ref   string
		flag  bool
		plain bool
	}{
		{"127.0.0.1:5000/p/hello:1", false, true},
		{"localhost:5000/p/hello:1", false, true},
		{"[::1]:5000/p/hello:1", false, true},
		{"127.9.9.9/p/hello:1", false, true},
		{"registry.example:5000/p/hello:1", false, false},
		{"10.0.0.1:5000/p/hello:1", false, false},
		{"localhost.example.com/p/hello:1", false, false},
		{"registry.example/p/hello:1", true, true},
	} {
		repo, _, err := open(c.ref, Options{PlainHTTPUnsafe: c.flag, DockerConfig: t.TempDir() + "/config.json"})
		if err != nil {
			t.Fatalf("%s: %v", c.ref, err)
		}
		if repo.PlainHTTP != c.plain {
			t.Errorf("%s (flag %v): plain HTTP %v, want %v", c.ref, c.flag, repo.PlainHTTP, c.plain)
		}
	}
}

func TestBadReferences(t *testing.T) {
	o := Options{DockerConfig: t.TempDir() + "/config.json", Limits: DefaultLimits(1<<20, 1<<20)}
	for _, ref := range []string{"hello", "127.0.0.1:5000/Hello:1", "127.0.0.1:5000/hello@sha256:abc", "127.0.0.1:5000/hello"} {
		_, err := Pull(t.Context(), ref, o)
		if !errors.Is(err, ErrUsage) || strings.Contains(err.Error(), "\n") {
			t.Errorf("pull %q: %v, want a one-line ErrUsage", ref, err)
		}
	}
	_, err := Push(t.Context(), "127.0.0.1:5000/hello@sha256:"+strings.Repeat("a", 64), Pack{Version: "1.0.0"}, o)
	if !errors.Is(err, ErrUsage) {
		t.Errorf("push to a digest: %v", err)
	}
}

func TestParseManifests(t *testing.T) {
	layer := content.NewDescriptorFromBytes(PackMediaType, []byte("pack"))
	_, good, _ := encode(manifest(ArtifactType, layer, nil, map[string]string{AnnotationPackName: "local.x"}))
	if m, err := parsePackManifest(good); err != nil || m.Annotations[AnnotationPackName] != "local.x" {
		t.Fatalf("good pack manifest: %v", err)
	}
	subject := digest.FromString("subject")
	bl := content.NewDescriptorFromBytes(BundleType, []byte("{}"))
	_, goodBundle, _ := encode(manifest(BundleType, bl, &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: subject, Size: 1}, nil))
	if l, err := parseBundleManifest(goodBundle, subject); err != nil || l.Digest != bl.Digest {
		t.Fatalf("good bundle manifest: %v", err)
	}
	if _, err := parseBundleManifest(goodBundle, digest.FromString("other")); !errors.Is(err, ErrRefused) {
		t.Fatalf("bundle of another subject: %v", err)
	}
	image, _ := json.Marshal(ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer, layer}})
	for name, b := range map[string][]byte{"garbage": []byte("<html>"), "image": image, "bundle as pack": goodBundle} {
		if _, err := parsePackManifest(b); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", name, err)
		}
	}
}

// FuzzParseManifest feeds untrusted manifest bytes to both decoders: they
// return a manifest or an ErrRefused error of one line, never panic.
func FuzzParseManifest(f *testing.F) {
	layer := content.NewDescriptorFromBytes(PackMediaType, []byte("pack"))
	_, good, _ := encode(manifest(ArtifactType, layer, nil, nil))
	subject := digest.FromString("subject")
	_, bundle, _ := encode(manifest(BundleType, content.NewDescriptorFromBytes(BundleType, []byte("{}")), &ocispec.Descriptor{Digest: subject}, nil))
	f.Add(good)
	f.Add(bundle)
	f.Add([]byte(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.packrun.pack.v1.tar+gzip","digest":"sha256:x","size":-1}],"artifactType":"application/vnd.packrun.pack.v1"}`))
	f.Add([]byte(`{"subject":null,"layers":null}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, err := range []error{
			func() error { _, err := parsePackManifest(b); return err }(),
			func() error { _, err := parseBundleManifest(b, subject); return err }(),
		} {
			if err != nil && (!errors.Is(err, ErrRefused) || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("%q: %v", b, err)
			}
		}
	})
}
