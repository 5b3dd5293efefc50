package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

func (a *app) trustPath(flag string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(a.home, "trust.json")
}

func (a *app) keysCommand() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage signing keys"}
	var out string
	gen := &cobra.Command{
		Use:     "generate --out PREFIX",
		Short:   "Generate an ECDSA P-256 key pair: PREFIX.key (0600) and PREFIX.pub (PEM)",
		Example: "  packrun keys generate --out acme",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError("keys generate needs --out PREFIX")
			}
			if err := registry.GenerateKey(out); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s.key and %s.pub\n", out, out)
			return nil
		},
	}
	gen.Flags().StringVar(&out, "out", "", "path prefix of the key files")
	keys.AddCommand(gen)
	return keys
}

func (a *app) packCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "pack <dir> [-o FILE]",
		Short: "Build a deterministic .pack from a directory with a pack.json",
		Long: `Build a .pack (gzip'd tar, sorted entries, fixed times, owners and modes) from a
directory holding pack.json, the modules it lists and an optional assets/ tree.
Packing the same directory twice gives identical bytes. The default output is
<dir>/dist/<name>-<version>.pack.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(args[0]); errors.Is(err, fs.ErrNotExist) {
				return withCode(exitNotFound, fmt.Errorf("pack %s: no such directory", args[0]))
			}
			src, err := packs.Collect(args[0])
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				return err
			}
			b := buf.Bytes()
			arch, err := packs.Read(bytes.NewReader(b), packs.DefaultLimits())
			if err != nil {
				return err
			}
			if len(src.Skipped) > 0 {
				a.log.Info("not packed (not a module, pack.json or under assets/)", "files", strings.Join(src.Skipped, ", "))
			}
			if out == "" {
				out = filepath.Join(args[0], "dist", arch.Manifest.Name+"-"+arch.Manifest.Version+".pack")
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s (%s, sha256 %s)\n", out, human(uint64(len(b))), arch.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file")
	return cmd
}

func readPackFile(path string) ([]byte, error) {
	return packrun.ReadFile(path, packs.DefaultLimits().ArchiveBytes)
}

func (a *app) signCommand() *cobra.Command {
	var key, builder, buildType string
	cmd := &cobra.Command{
		Use:   "sign FILE.pack --key PREFIX.key [--builder-id URI]",
		Short: "Sign a pack: a Sigstore bundle and a SLSA provenance attestation beside it",
		Long: `Sign FILE.pack with an ECDSA P-256 key. Writes FILE.pack.sigstore.json (a Sigstore
bundle over the archive) and FILE.pack.provenance.sigstore.json (a DSSE-signed in-toto
Statement with a SLSA Provenance v1 predicate). Both verify offline with cosign:
  cosign verify-blob --key PREFIX.pub --bundle FILE.pack.sigstore.json --insecure-ignore-tlog=true --offline FILE.pack`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usageError("sign needs --key PREFIX.key")
			}
			b, err := readPackFile(args[0])
			if err != nil {
				return err
			}
			arch, err := packs.Read(strings.NewReader(string(b)), packs.DefaultLimits())
			if err != nil {
				return err
			}
			signer, err := registry.LoadPrivateKey(key)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if builder == "" {
				host, _ := os.Hostname()
				builder = "local:packrun@" + host
			}
			bundle, prov, err := registry.Sign(cmd.Context(), b, arch.Manifest.Name, signer, registry.SignOptions{
				BuilderID: builder, BuildType: buildType, SourceDigest: arch.SourceDigest(), BuiltAt: time.Now(),
			})
			if err != nil {
				return err
			}
			for path, data := range map[string][]byte{args[0] + ".sigstore.json": bundle, args[0] + ".provenance.sigstore.json": prov} {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, path)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "private key file (from packrun keys generate)")
	cmd.Flags().StringVar(&builder, "builder-id", "", "builder id recorded in the provenance (default local:packrun@<host>)")
	cmd.Flags().StringVar(&buildType, "build-type", "", "build type URI recorded in the provenance")
	return cmd
}

// bundleFlags are the ways to find a pack's bundles.
type bundleFlags struct {
	bundle, provenance, signature, trust, integrity string
	unsafe                                          bool
}

func (f *bundleFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "signature bundle (default FILE.sigstore.json beside the pack)")
	cmd.Flags().StringVar(&f.provenance, "provenance", "", "provenance bundle (default FILE.provenance.sigstore.json beside the pack)")
	cmd.Flags().StringVar(&f.signature, "signature", "", "detached Ed25519 signature of an openwop registry .tgz (default FILE.sig, or VERSION.sig beside VERSION.tgz)")
	cmd.Flags().StringVar(&f.integrity, "integrity", "", "pin the archive: sha256-<base64> of its bytes (an openwop version manifest's integrity); needed for an openwop pack signed over its pack.json")
	cmd.Flags().StringVar(&f.trust, "trust", "", "trust policy file (default $PACKRUN_HOME/trust.json)")
	cmd.Flags().BoolVar(&f.unsafe, "allow-unsigned-unsafe", false, "UNSAFE: accept a pack that has no signature at all")
}

// files are the pack file options of a command.
func (f *bundleFlags) files() packrun.PackFiles {
	return packrun.PackFiles{Bundle: f.bundle, Provenance: f.provenance, Signature: f.signature, Integrity: f.integrity, TrustFile: f.trust, AllowUnsignedUnsafe: f.unsafe}
}

func (a *app) verifyCommand() *cobra.Command {
	var f bundleFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify FILE.pack [--trust FILE] [--json]",
		Short: "Verify a pack's signature, provenance, namespace permission, manifest and module digests",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files := f.files()
			files.TrustFile = a.trustPath(f.trust)
			v, arch, err := packrun.VerifyFile(cmd.Context(), args[0], files)
			if err != nil {
				return err
			}
			if asJSON {
				return a.emit(map[string]any{"pack": arch.Manifest.Name + "@" + arch.Manifest.Version, "sha256": arch.SHA256, "verdict": v})
			}
			if v.Unsigned {
				fmt.Fprintf(a.stdout, "UNSIGNED %s@%s (sha256 %s): accepted only because of --allow-unsigned-unsafe\n", arch.Manifest.Name, arch.Manifest.Version, arch.SHA256)
				return nil
			}
			fmt.Fprintf(a.stdout, "verified %s@%s (sha256 %s)\n  signed by %s\n", arch.Manifest.Name, arch.Manifest.Version, arch.SHA256, v.Signer)
			if p := v.Provenance; p != nil {
				fmt.Fprintf(a.stdout, "  provenance: builder %s, built %s, source sha256 %s\n", p.BuilderID, p.BuiltAt.Format(time.RFC3339), p.SourceDigest)
			}
			if ow := arch.Manifest.Openwop; ow != nil {
				printOpenwop(a.stdout, ow)
			}
			return nil
		},
	}
	f.register(cmd)
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) trustCommand() *cobra.Command {
	var trustFile string
	trust := &cobra.Command{Use: "trust", Short: "Manage the trust policy (trusted keys and the namespaces they may sign)"}
	trust.PersistentFlags().StringVar(&trustFile, "trust", "", "trust policy file (default $PACKRUN_HOME/trust.json)")
	var namespaces []string
	edit := func(f func(p *registry.Policy) error) error {
		path := a.trustPath(trustFile)
		p, err := registry.LoadPolicy(path)
		if err != nil {
			return err
		}
		if err := f(p); err != nil {
			return withCode(exitUsage, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		return p.Save(path)
	}
	add := &cobra.Command{
		Use:     "add-key NAME PREFIX.pub --namespace PATTERN...",
		Short:   "Trust a public key for packs whose names match the patterns",
		Example: "  packrun trust add-key acme acme.pub --namespace 'vendor.acme.*'",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(namespaces) == 0 {
				return usageError("add-key needs at least one --namespace")
			}
			pem, err := packrun.ReadFile(args[1], 64<<10)
			if err != nil {
				return withCode(exitUsage, err)
			}
			return edit(func(p *registry.Policy) error { return p.AddKey(args[0], pem, namespaces) })
		},
	}
	add.Flags().StringArrayVar(&namespaces, "namespace", nil, "name pattern, e.g. vendor.acme.* (repeatable)")
	addReg := &cobra.Command{
		Use:   "add-registry-key KEY_ID KEY --namespace PATTERN...",
		Short: "Trust an openwop registry Ed25519 public key (file or base64) for packs matching the patterns",
		Long: `Trust an openwop registry's Ed25519 key (a PEM "PUBLIC KEY" file, such as the
registry's keys/<keyId>.pub, or the base64 of the raw 32-byte key) for the pack
names matching the patterns: the key's permittedNamespaces in the registry's
.well-known/openwop-registry.json signingKeys[]. Name it by the registry's keyId:
a v2 pack's signing.keyId selects the key by that name. A pack whose name no
pattern matches is refused with pack_namespace_unauthorized.`,
		Example: `  packrun trust add-registry-key openwop-registry-root openwop-registry-root.pub --namespace vendor.openwop.* --namespace core.*`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(namespaces) == 0 {
				return usageError("add-registry-key needs at least one --namespace")
			}
			key := []byte(args[1])
			if b, err := packrun.ReadFile(args[1], 64<<10); err == nil {
				key = b
			}
			return edit(func(p *registry.Policy) error { return p.AddRegistryKey(args[0], key, namespaces) })
		},
	}
	addReg.Flags().StringArrayVar(&namespaces, "namespace", nil, "name pattern (repeatable)")
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List trusted keys and identities",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := registry.LoadPolicy(a.trustPath(trustFile))
			if err != nil {
				return err
			}
			entries := p.List()
			if asJSON {
				return a.emit(map[string]any{"requireProvenance": p.RequireProvenance, "builderIds": p.BuilderIDs, "entries": entries})
			}
			w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KIND\tNAME\tID\tNAMESPACES")
			for _, e := range entries {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Kind, e.Name, e.ID, strings.Join(e.Namespaces, ","))
			}
			_ = w.Flush() // terminal text, as fmt.Fprint* (.golangci.yml)
			fmt.Fprintf(a.stdout, "provenance required: %v\n", p.RequireProvenance)
			return nil
		},
	}
	outputVar(list.Flags(), &asJSON)
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Stop trusting a key or identity",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return edit(func(p *registry.Policy) error { return p.Remove(args[0]) })
		},
	}
	trust.AddCommand(add, addReg, list, remove)
	return trust
}
