package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
)

func (a *app) taskTypesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task-types",
		Short: "List, show, set and unset task types (their spec and the route that serves them)",
		Long: `A task type is routed to the skill node that serves it (from the installed packs'
manifests, or an operator route that wins) and may carry a spec (the agent runtime schema §13), applied to
every task of the type:

  default_profile_id    the profile a task runs under unless it requests one
  default_adapter_id    the adapter its node's calls go to unless it requests one
  default_model         the model those calls use unless it requests one
  allowed_skill_ids     the skills its intents may name (default: any installed skill)
  artifact_roles        the roles its attempts may store artifacts under (default: any)
  success_policy        require_adapter_audit, require_artifacts, verify_claimed_file_changes:
                        a completed attempt that does not satisfy it fails`,
	}
	cmd.AddCommand(a.taskTypesListCommand(), a.taskTypesShowCommand(), a.taskTypesSetCommand(), a.taskTypesUnsetCommand())
	return cmd
}

func (a *app) taskTypesListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List task types: who serves each, and whether it has a spec",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []packrun.TaskType
			err := a.withHost(cmd, readOnly, func(h *packrun.Host) (err error) {
				list, err = h.TaskTypes(cmd.Context())
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return a.emit(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK TYPE\tSERVED BY\tSPEC")
			for _, t := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.TaskType, servedBy(&t), yesNo(t.Spec != nil))
			}
			return tw.Flush()
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func servedBy(t *packrun.TaskType) string {
	if t.Resolved == nil {
		return "(" + t.Error + ")"
	}
	s := t.Resolved.Pack + " " + t.Resolved.Node
	if t.Resolved.Origin == host.OriginOperator {
		s += " (operator route)"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (a *app) taskTypesShowCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show TYPE [--json]",
		Short: "Show a task type's spec and routes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t *packrun.TaskType
			err := a.withHost(cmd, readOnly, func(h *packrun.Host) (err error) {
				t, err = h.TaskType(cmd.Context(), args[0])
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return a.emit(t)
			}
			printTaskType(a.stdout, t)
			return nil
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func printTaskType(w io.Writer, t *packrun.TaskType) {
	fmt.Fprintf(w, "task type:  %s\n", t.TaskType)
	fmt.Fprintf(w, "served by:  %s\n", servedBy(t))
	for _, r := range t.Routes {
		fmt.Fprintf(w, "route:      %s %s (%s)\n", r.Pack, r.Node, r.Origin)
	}
	s := t.Spec
	if s == nil {
		fmt.Fprintln(w, "spec:       none")
		return
	}
	field := func(name, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-21s %s\n", name+":", v)
		}
	}
	field("payload_schema_id", s.PayloadSchemaID)
	field("default_profile_id", s.DefaultProfileID)
	field("default_adapter_id", s.DefaultAdapterID)
	field("default_model", s.DefaultModel)
	field("allowed_skill_ids", strings.Join(s.AllowedSkillIDs, ", "))
	field("artifact_roles", strings.Join(s.ArtifactRoles, ", "))
	if p := s.SuccessPolicy; p != nil {
		fmt.Fprintf(w, "%-21s require_adapter_audit=%v require_artifacts=%v verify_claimed_file_changes=%v\n", "success_policy:",
			p.RequireAdapterAudit, p.RequireArtifacts, p.VerifyClaimedFileChanges)
	}
}

func (a *app) taskTypesSetCommand() *cobra.Command {
	var spec host.TaskTypeSpec
	var policy host.SuccessPolicy
	var pack, node string
	cmd := &cobra.Command{
		Use:   "set TYPE [--default-profile P] [--default-adapter A] [--default-model M] [--allow-skill S]... [--artifact-role R]... [--require-adapter-audit] [--require-artifacts] [--verify-file-changes] [--pack NAME --node TYPEID]",
		Short: "Set a task type's spec (replacing it), and optionally the pack and node that serve it",
		Example: `  packrun task-types set review --default-adapter codex --default-model gpt-5-mini --require-adapter-audit
  packrun task-types set hello.wat --pack local.hello.wat --node example.hello`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (pack == "") != (node == "") {
				return usageError("--pack and --node go together: they name the route that serves the type")
			}
			spec.TaskType = args[0]
			if policy != (host.SuccessPolicy{}) {
				spec.SuccessPolicy = &policy
			}
			var route *host.TaskTypeRoute
			if pack != "" {
				route = &host.TaskTypeRoute{Pack: pack, Node: node}
			}
			var t *packrun.TaskType
			err := a.withHost(cmd, readWrite, func(h *packrun.Host) error {
				if err := h.SetTaskType(cmd.Context(), spec, route); err != nil {
					return err
				}
				var err error
				t, err = h.TaskType(cmd.Context(), spec.TaskType)
				return err
			})
			if err != nil {
				return err
			}
			printTaskType(a.stdout, t)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.PayloadSchemaID, "payload-schema", "", "payload_schema_id (default "+packrun.NodeInputSchema+": the serving node's inputSchema)")
	f.StringVar(&spec.DefaultProfileID, "default-profile", "", "default_profile_id: a registered profile")
	f.StringVar(&spec.DefaultAdapterID, "default-adapter", "", "default_adapter_id: a configured adapter")
	f.StringVar(&spec.DefaultModel, "default-model", "", "default_model: a model the type's adapter offers")
	f.StringArrayVar(&spec.AllowedSkillIDs, "allow-skill", nil, "allowed_skill_ids: an installed skill (repeatable)")
	f.StringArrayVar(&spec.ArtifactRoles, "artifact-role", nil, "artifact_roles: a role attempts may store artifacts under (repeatable)")
	f.BoolVar(&policy.RequireAdapterAudit, "require-adapter-audit", false, "success_policy.require_adapter_audit: completion needs an adapter call in the attempt")
	f.BoolVar(&policy.RequireArtifacts, "require-artifacts", false, "success_policy.require_artifacts: completion needs an artifact")
	f.BoolVar(&policy.VerifyClaimedFileChanges, "verify-file-changes", false, "success_policy.verify_claimed_file_changes: claimed file changes must be artifacts of the attempt")
	f.StringVar(&pack, "pack", "", "serve the type with this installed pack (NAME or NAME@VERSION)")
	f.StringVar(&node, "node", "", "... and this node of it")
	return cmd
}

func (a *app) taskTypesUnsetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "unset TYPE",
		Short: "Remove a task type's spec and operator route (its manifest routes stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := a.withHost(cmd, readWrite, func(h *packrun.Host) error { return h.UnsetTaskType(cmd.Context(), args[0]) })
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "unset %s\n", args[0])
			return nil
		},
	}
}
