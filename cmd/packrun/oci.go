package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/registry"
)

// ociScheme prefixes an OCI reference where a pack file could be named
// (packrun install oci://REF).
const ociScheme = "oci://"

// ociFlags are the registry options of push, pull and install oci://.
type ociFlags struct {
	plainHTTP    bool
	dockerConfig string
}

func (f *ociFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.plainHTTP, "plain-http-unsafe", false, "UNSAFE: speak plain HTTP to a registry that is not on a loopback address (loopback registries always get plain HTTP)")
	cmd.Flags().StringVar(&f.dockerConfig, "docker-config", "", "Docker config file with the registry credentials (default $DOCKER_CONFIG/config.json, else ~/.docker/config.json)")
}

func (f *ociFlags) options() packrun.OCIOptions {
	return packrun.OCIOptions{PlainHTTPUnsafe: f.plainHTTP, DockerConfig: f.dockerConfig}
}

// ociCommands are push and pull.
func (a *app) ociCommands() []*cobra.Command {
	return []*cobra.Command{a.pushCommand(), a.pullCommand()}
}

func (a *app) pushCommand() *cobra.Command {
	var of ociFlags
	var bf bundleFlags
	cmd := &cobra.Command{
		Use:   "push NAME@VERSION|FILE.pack REGISTRY/REPO[:TAG]",
		Short: "Push a signed pack to an OCI registry, its bundles as referrers",
		Long: `Push a pack to an OCI registry as an artifact of type ` + "application/vnd.packrun.pack.v1" + `
(one layer, the .pack archive byte for byte), with its Sigstore signature bundle and
its SLSA provenance bundle as referrers of the pack's manifest, laid out as cosign
lays out its bundles (artifactType application/vnd.dev.sigstore.bundle.v0.3+json).
A registry without the referrers API gets them under the sha256-<digest> tag.

The pack is an installed one (NAME@VERSION, pushed as installed) or, when the
argument is an existing file, a pack file with its bundles beside it
(FILE.sigstore.json, FILE.provenance.sigstore.json). Only signed packs are
pushed; nothing is verified here: whoever pulls verifies. The tag defaults to the
pack's version. Prints the pushed reference pinned by digest.

Credentials come from the Docker config file (docker login, oras login).`,
		Example: `  packrun push local.hello.c@1.0.0 ghcr.io/acme/hello
  packrun push dist/hello-1.0.0.pack localhost:5000/hello:1.0.0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var pinned string
			var err error
			if fi, statErr := os.Stat(args[0]); statErr == nil && !fi.IsDir() {
				pinned, err = packrun.PushOCIFile(ctx, args[0], bf.files(), args[1], of.options())
			} else {
				h, openErr := a.open(ctx, readOnly, packrun.Config{})
				if openErr != nil {
					return openErr
				}
				defer h.Close(ctx)
				pinned, err = h.PushOCI(ctx, args[0], args[1], of.options())
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, pinned)
			return nil
		},
	}
	of.register(cmd)
	cmd.Flags().StringVar(&bf.bundle, "bundle", "", "signature bundle of FILE.pack (default FILE.sigstore.json beside it)")
	cmd.Flags().StringVar(&bf.provenance, "provenance", "", "provenance bundle of FILE.pack (default FILE.provenance.sigstore.json beside it)")
	return cmd
}

func (a *app) pullCommand() *cobra.Command {
	var of ociFlags
	var out, trust string
	cmd := &cobra.Command{
		Use:   "pull REGISTRY/REPO:TAG|REGISTRY/REPO@sha256:DIGEST [-o FILE.pack]",
		Short: "Pull a pack from an OCI registry into a file, verified against the trust policy",
		Long: `Pull a pack and its bundle referrers from an OCI registry, check every byte against
its digest (a @sha256: reference pins the manifest), verify it against the trust
policy as 'packrun verify' does, and only then write FILE.pack (default
NAME-VERSION.pack) with FILE.pack.sigstore.json and FILE.pack.provenance.sigstore.json
beside it. Install it with 'packrun install FILE.pack', or pull and install at once
with 'packrun install oci://REF'.`,
		Example: `  packrun pull localhost:5000/hello:1.0.0
  packrun pull ghcr.io/acme/hello@sha256:5b0e… -o hello.pack`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			policy, err := registry.LoadPolicy(a.trustPath(trust))
			if err != nil {
				return err
			}
			p, err := packrun.PullOCI(ctx, strings.TrimPrefix(args[0], ociScheme), policy, of.options())
			if err != nil {
				return err
			}
			path := out
			if path == "" {
				path = p.Archive.Manifest.Name + "-" + p.Archive.Manifest.Version + ".pack"
			}
			if _, err := p.WriteFiles(path); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s: %s@%s from %s, signed by %s\n", path, p.Archive.Manifest.Name, p.Archive.Manifest.Version, p.Ref, p.Verdict.Signer)
			return nil
		},
	}
	of.register(cmd)
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (default NAME-VERSION.pack)")
	cmd.Flags().StringVar(&trust, "trust", "", "trust policy file (default $PACKRUN_HOME/trust.json)")
	return cmd
}
