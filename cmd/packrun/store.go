package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
	"github.com/spf13/cobra"
)

func (a *app) installCommand() *cobra.Command {
	var f bundleFlags
	var of ociFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "install FILE.pack|VERSION.tgz|oci://REF [--bundle F] [--provenance F] [--signature F] [--integrity PIN] [--trust FILE]",
		Short: "Verify a signed pack and install it into the local store",
		Long: `Verify FILE.pack against the trust policy (signature, provenance, namespace, manifest,
module digests) before anything enters the store, check every module loads and serves
the nodes the manifest declares, then store it content-addressed. Installing the
identical pack again changes nothing; a different pack under the same name@version is
refused. Bundles are read from FILE.pack.sigstore.json and
FILE.pack.provenance.sigstore.json unless given.

An openwop registry pack installs as published: VERSION.tgz (its pack.json is
translated into packrun's model; install and inspect show how) with its detached
signature FILE.sig or VERSION.sig beside it. A signature over the tarball (the v1
registry tree) is checked before the archive is opened. A signature over pack.json
only (v2 ed25519-canonical-json, v1 pack.json.sig inside the archive) does not cover
the module: such a pack needs --integrity, the sha256-<base64> pin the registry's
version manifest gives. Trust the registry's key with
  packrun trust add-registry-key KEY_ID KEY --namespace vendor.openwop.*
(KEY_ID as the registry names it: v2 packs name their key by it).

oci://REGISTRY/REPO:TAG (or @sha256:DIGEST) pulls the pack and its bundle
referrers from an OCI registry (see 'packrun pull') and installs it the same way.`,
		Example: `  packrun install hello.pack
  packrun install 1.0.0.tgz --integrity sha256-oAxD58p11EJDYJ8427coH0zhULSVo/gel+MI9liC3gg=`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			h, err := a.open(ctx, readWrite, packrun.Config{})
			if err != nil {
				return err
			}
			defer h.Close(context.Background())
			var p *host.InstalledPack
			var already bool
			if ref, ok := strings.CutPrefix(args[0], ociScheme); ok {
				p, already, _, err = h.InstallOCI(ctx, ref, f.files(), of.options())
			} else {
				p, already, err = h.InstallFile(ctx, args[0], f.files())
			}
			if err != nil {
				return err
			}
			if asJSON {
				return a.emit(map[string]any{"installed": p, "already_installed": already})
			}
			if already {
				fmt.Fprintf(a.stdout, "%s already installed (sha256 %s)\n", p.Ref(), p.SHA256)
			} else {
				fmt.Fprintf(a.stdout, "installed %s (sha256 %s), signed by %s\n", p.Ref(), p.SHA256, p.Signer)
			}
			if _, m, err := h.Pack(ctx, p.Ref()); err == nil {
				printPermissions(a.stdout, m.Grants)
				if m.Openwop != nil {
					printOpenwop(a.stdout, m.Openwop)
				}
			}
			return nil
		},
	}
	f.register(cmd)
	of.register(cmd)
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List installed packs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var all []*host.InstalledPack
			err := a.withHost(cmd, readOnly, func(h *packrun.Host) (err error) {
				all, err = h.Packs(cmd.Context())
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				if all == nil {
					all = []*host.InstalledPack{}
				}
				return a.emit(all)
			}
			w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tSHA256\tSIGNER\tINSTALLED")
			for _, p := range all {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version, p.SHA256[:12], p.Signer, p.InstalledAt.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) inspectInstalled(ctx context.Context, ref string, asJSON bool) error {
	h, err := a.open(ctx, readOnly, packrun.Config{})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	p, m, err := h.Pack(ctx, ref)
	if err != nil {
		return err
	}
	if asJSON {
		return a.emit(p)
	}
	w := a.stdout
	fmt.Fprintf(w, "pack:       %s\n", p.Ref())
	fmt.Fprintf(w, "sha256:     %s (%s)\n", p.SHA256, human(uint64(p.Size)))
	fmt.Fprintf(w, "signed by:  %s\n", p.Signer)
	if pr := p.Provenance; pr != nil {
		fmt.Fprintf(w, "provenance: builder %s, built %s, source sha256 %s\n", pr.BuilderID, pr.BuiltAt.Format(time.RFC3339), pr.SourceDigest)
	}
	fmt.Fprintf(w, "installed:  %s\n", p.InstalledAt.Local().Format(time.RFC3339))
	if m.Description != "" {
		fmt.Fprintf(w, "about:      %s\n", m.Description)
	}
	for _, mod := range m.Runtime.Modules {
		fmt.Fprintf(w, "module:     %s sha256 %s\n", mod.Path, mod.SHA256)
	}
	for _, n := range m.Nodes {
		extra := ""
		if len(n.TaskTypes) > 0 {
			extra = " serves " + strings.Join(n.TaskTypes, ", ")
		}
		fmt.Fprintf(w, "node:       %s (%s)%s\n", n.TypeID, n.Kind, extra)
	}
	for _, s := range m.Skills() {
		printSkill(w, s)
	}
	printPermissions(w, m.Grants)
	if m.Openwop != nil {
		printOpenwop(w, m.Openwop)
	}
	return nil
}

// printPermissions lists the network destinations a pack's grant lets it
// reach, one a line, the way a phone lists an app's permissions.
func printPermissions(w io.Writer, g packs.Grants) {
	for _, d := range g.HTTP {
		fmt.Fprintf(w, "permission: %s\n", d.Describe())
	}
}

// printOpenwop prints how an openwop pack.json was translated.
func printOpenwop(w io.Writer, ow *packs.Openwop) {
	fmt.Fprintf(w, "openwop:    %s manifest, engines.openwop %q, RFC 0008 ABI %d\n", ow.Format, ow.Engines, ow.ABIVersion)
	fmt.Fprintf(w, "  entry:    %s -> module %s\n", ow.Entry, ow.Module)
	if ow.EntryNote != "" {
		fmt.Fprintf(w, "  note:     %s\n", ow.EntryNote)
	}
	if s := ow.Signing; s != nil {
		fmt.Fprintf(w, "  signing:  %s\n", strings.Join(nonEmpty("keyId "+s.KeyID, "scheme "+s.Scheme, "publicKeyRef "+s.PublicKeyRef, "signatureRef "+s.SignatureRef, "method "+s.Method), ", "))
	}
	for _, n := range ow.Nodes {
		fmt.Fprintf(w, "  node:     %s version %q category %q role %q\n", n.TypeID, n.Version, n.Category, n.Role)
	}
	if len(ow.Ignored) > 0 {
		fmt.Fprintf(w, "  ignored:  %s (extension keys)\n", strings.Join(ow.Ignored, ", "))
	}
}

// nonEmpty keeps the "label value" strings whose value is not empty.
func nonEmpty(fields ...string) []string {
	var out []string
	for _, f := range fields {
		if !strings.HasSuffix(f, " ") {
			out = append(out, f)
		}
	}
	return out
}

// printSkill prints a skill's SkillManifest, one field a line.
func printSkill(w io.Writer, s packs.InstalledSkill) {
	fmt.Fprintf(w, "skill:      %s (node %s)\n", s.SkillID, s.Node)
	field := func(name, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-17s %s\n", name+":", v)
		}
	}
	field("description", s.Description)
	field("tags", strings.Join(s.Tags, ", "))
	field("instruction_path", s.InstructionPath)
	field("subagent_path", s.SubagentPath)
	field("sensor_path", s.SensorPath)
	field("input_schema_id", s.InputSchemaID)
	field("output_schema_id", s.OutputSchemaID)
	for _, c := range s.CLICommands {
		field("cli "+c.Name, strings.TrimSpace(c.Command+"  "+c.Description))
	}
}

func (a *app) uninstallCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall NAME[@VERSION]",
		Short: "Remove an installed pack (every version without @VERSION)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var removed []*host.InstalledPack
			err := a.withHost(cmd, readOnly, func(h *packrun.Host) (err error) {
				removed, err = h.Uninstall(cmd.Context(), args[0])
				return err
			})
			if err != nil {
				return err
			}
			for _, p := range removed {
				fmt.Fprintf(a.stdout, "uninstalled %s\n", p.Ref())
			}
			return nil
		},
	}
}

func (a *app) exportCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export NAME[@VERSION] -o DIR",
		Short: "Write an installed pack and its bundles, byte-identical to what was installed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("export needs -o DIR")
			}
			var paths []string
			err := a.withHost(cmd, readOnly, func(h *packrun.Host) (err error) {
				paths, err = h.Export(cmd.Context(), args[0], out)
				return err
			})
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintln(a.stdout, p)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory")
	return cmd
}
