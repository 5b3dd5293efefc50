package main

import (
	"fmt"
	"os"
	"strings"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/runtime"
	"github.com/spf13/cobra"
)

func (a *app) inspectCommand() *cobra.Command {
	var asJSON, host bool
	cmd := &cobra.Command{
		Use:   "inspect <module.wasm> | NAME[@VERSION] | --host",
		Short: "Describe a module (ABI, pack name, nodes, imports, exports, memory), an installed pack, or this host",
		Example: `  packrun inspect examples/hello-c/hello.wasm
  packrun inspect --host --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if host && len(args) != 0 {
				return usageError("inspect --host takes no module")
			}
			if !host && len(args) != 1 {
				return usageError("inspect needs a module path, an installed pack name, or --host")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if host {
				var h runtime.HostInfo
				err := a.withHost(cmd, readWrite, func(ph *packrun.Host) (err error) {
					h, err = ph.Describe(ctx)
					return err
				})
				if err != nil {
					return err
				}
				if asJSON {
					return a.emit(h)
				}
				w := a.stdout
				fmt.Fprintf(w, "engine:       %s\n", h.Engine)
				fmt.Fprintf(w, "ABI versions: %s\n", strings.Join(h.ABIVersions, ", "))
				fmt.Fprintf(w, "cache:        %s\n", h.CacheDir)
				fmt.Fprintf(w, "limits:       memory %s, timeout %dms, output %s, host calls %d, host memory %s (max: memory %s, timeout %dms, output %s, host calls %d, host memory %s)\n",
					human(h.Limits.MemoryBytes), h.Limits.TimeoutMs, human(h.Limits.OutputBytes), h.Limits.HostCalls, human(h.Limits.HostMemoryBytes),
					human(h.MaxLimits.MemoryBytes), h.MaxLimits.TimeoutMs, human(h.MaxLimits.OutputBytes), h.MaxLimits.HostCalls, human(h.MaxLimits.HostMemoryBytes))
				ml := h.ModuleLimits
				fmt.Fprintf(w, "modules:      at most %s, %d functions, %s a body, nesting %d, br_table %d targets, %d locals, %d globals, tables %d entries, %d element entries, %d data segments, %d other entries a section, compiled within %s\n",
					human(uint64(ml.ModuleBytes)), ml.Functions, human(uint64(ml.BodyBytes)), ml.Nesting, ml.BrTableTargets, ml.Locals, ml.Globals, ml.TableEntries, ml.ElementEntries, ml.DataSegments, ml.Entries, ml.CompileTimeout)
				for _, ns := range h.Namespaces {
					fmt.Fprintf(w, "namespace %s:\n", ns.Name)
					for _, f := range ns.Functions {
						fmt.Fprintf(w, "  %s\n", f)
					}
				}
				return nil
			}
			if fi, err := os.Stat(args[0]); (err != nil || fi.IsDir()) && !strings.HasSuffix(args[0], ".wasm") {
				return a.inspectInstalled(ctx, args[0], asJSON)
			}
			var info runtime.ModuleInfo
			err := a.withHost(cmd, readWrite, func(h *packrun.Host) (err error) {
				info, err = h.InspectModule(ctx, args[0])
				return err
			})
			if err != nil {
				return a.refused(err, asJSON)
			}
			if asJSON {
				return a.emit(info)
			}
			w := a.stdout
			fmt.Fprintf(w, "module:   %s (%s, sha256 %s)\n", args[0], human(uint64(info.Size)), info.SHA256)
			if info.Extism {
				fmt.Fprintf(w, "kind:     Extism plugin (run through the Extism go-sdk; each node is an exported function)\n")
			} else {
				fmt.Fprintf(w, "pack:     %s\n", info.PackName)
				fmt.Fprintf(w, "ABI:      %d (%s returns %s)\n", info.ABIVersion, "openwop_node_invoke", info.Encoding["openwop_node_invoke"])
			}
			fmt.Fprintf(w, "nodes:    %s\n", strings.Join(info.Nodes, ", "))
			fmt.Fprintf(w, "imports:  %s\n", orNone(info.Imports))
			fmt.Fprintf(w, "exports:  %s\n", strings.Join(info.Exports, ", "))
			maxPages := "none"
			if info.MemoryMaxPages > 0 {
				maxPages = fmt.Sprint(info.MemoryMaxPages)
			}
			fmt.Fprintf(w, "memory:   %d pages minimum, maximum %s (limit %s)\n", info.MemoryMinPages, maxPages, human(info.Limits.MemoryBytes))
			fmt.Fprintf(w, "reactor:  %v\n", info.Reactor)
			return nil
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	cmd.Flags().BoolVar(&host, "host", false, "describe this host instead of a module")
	return cmd
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

func human(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
