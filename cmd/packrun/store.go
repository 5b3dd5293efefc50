package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

func (a *app) installCommand() *cobra.Command {
	var f bundleFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "install FILE.pack [--bundle F] [--provenance F] [--trust FILE]",
		Short: "Verify a signed pack and install it into the local store",
		Long: `Verify FILE.pack against the trust policy (signature, provenance, namespace, manifest,
module digests) before anything enters the store, check every module loads and serves
the nodes the manifest declares, then store it content-addressed. Installing the
identical pack again changes nothing; a different pack under the same name@version is
refused. Bundles are read from FILE.pack.sigstore.json and
FILE.pack.provenance.sigstore.json unless given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			req, policy, err := a.request(args[0], f)
			if err != nil {
				return err
			}
			st, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			p, already, err := st.Install(ctx, policy, req, registry.InstallOptions{
				VerifyOptions: registry.VerifyOptions{AllowUnsignedUnsafe: f.unsafe},
				Check:         a.checkModules,
			})
			if err != nil {
				return refusal(err)
			}
			if err := a.refreshTaskTypes(ctx, st, nil); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]any{"installed": p, "alreadyInstalled": already})
			}
			if already {
				fmt.Fprintf(a.stdout, "%s already installed (sha256 %s)\n", p.Ref(), p.SHA256)
			} else {
				fmt.Fprintf(a.stdout, "installed %s (sha256 %s), signed by %s\n", p.Ref(), p.SHA256, p.Signer)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// checkModules loads every module of a pack and checks it serves the
// manifest's nodes under the manifest's name. It also warms the
// compilation cache.
func (a *app) checkModules(ctx context.Context, arch *packs.Archive) error {
	m := arch.Manifest
	if v := m.ABI(); !abi.Serves(v.Major) || v.Minor > abi.Newest().Minor {
		return withCode(exitRefused, fmt.Errorf("refused: %s@%s needs host ABI %s; this host serves %s", m.Name, m.Version, v, abi.ServedList()))
	}
	rt, err := a.newRuntime(ctx, 0)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	for _, mod := range m.Runtime.Modules {
		wasm, _ := arch.File(mod.Path)
		lm, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: m.Name + "/" + mod.Path, Limits: packLimits(m), PackName: m.Name, Exports: m.Exports(mod.Path)})
		if err != nil {
			return withCode(exitRefused, fmt.Errorf("refused: %w", err))
		}
		info := lm.Info()
		lm.Close(ctx)
		if info.PackName != m.Name {
			return withCode(exitRefused, fmt.Errorf("refused: %s: module %s says its pack is %q", m.Name, mod.Path, info.PackName))
		}
		for _, n := range m.Nodes {
			if nm, _ := m.NodeModule(n.TypeID); nm.Path != mod.Path {
				continue
			}
			found := false
			for _, id := range info.Nodes {
				found = found || id == n.TypeID
			}
			if !found {
				return withCode(exitRefused, fmt.Errorf("refused: %s: manifest node %q is not exported by %s (it has %s)", m.Name, n.TypeID, mod.Path, strings.Join(info.Nodes, ", ")))
			}
		}
	}
	return nil
}

func packLimits(m *packs.Manifest) runtime.Limits {
	l := m.Limits()
	return runtime.Limits{MemoryBytes: l.MemoryBytes, Timeout: l.Timeout, OutputBytes: l.OutputBytes, HostCalls: l.HostCalls}
}

func (a *app) listCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List installed packs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			all, err := st.List(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if all == nil {
					all = []*registry.Installed{}
				}
				return writeJSON(a.stdout, all)
			}
			w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tSHA256\tSIGNER\tINSTALLED")
			for _, p := range all {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version, p.SHA256[:12], p.Signer, p.InstalledAt.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) inspectInstalled(ctx context.Context, ref string, asJSON bool) error {
	st, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := st.Resolve(ctx, ref)
	if err != nil {
		return refusal(err)
	}
	if asJSON {
		return writeJSON(a.stdout, p)
	}
	arch, err := st.Open(ctx, p)
	if err != nil {
		return err
	}
	m := arch.Manifest
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
	return nil
}

func (a *app) uninstallCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall NAME[@VERSION]",
		Short: "Remove an installed pack (every version without @VERSION)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			removed, err := st.Uninstall(cmd.Context(), args[0])
			if err != nil {
				return refusal(err)
			}
			var names []string
			for _, p := range removed {
				names = append(names, p.Name)
			}
			if err := a.refreshTaskTypes(cmd.Context(), st, names); err != nil {
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
			st, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			paths, err := st.Export(cmd.Context(), args[0], out)
			if err != nil {
				return refusal(err)
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

// refreshTaskTypes re-derives the task-type registry from installed packs;
// names whose last version was removed lose their routes.
func (a *app) refreshTaskTypes(ctx context.Context, st *registry.Store, removed []string) error {
	b, err := a.openBackend(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, name := range removed {
		if _, err := st.Resolve(ctx, name); err == nil {
			continue
		}
		if err := b.SetPackTaskTypes(ctx, name, nil); err != nil {
			return err
		}
	}
	return syncTaskTypes(ctx, st, b)
}
