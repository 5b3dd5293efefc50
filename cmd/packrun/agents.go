package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
)

func (a *app) agentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Register, list and show agents (identity, wallets, constitution)",
		Long: `An agent is configuration, not engine code (the agent runtime schema §1, §1a, §1b). A FILE holds one
agent, its wallets and its constitution, field names as the schema writes them:

  {"agent": {"agent_id": "arc", "internal_name": "arc", "display_name": "Arc", ...},
   "wallets": [{"agent_id": "arc", "chain": "stacks", "address": "SP...", ...}],
   "constitution": {"agent_id": "arc", "soul_path": "SOUL.md", "purpose_path": "PURPOSE.md",
                    "version": "1", "revised_at": "2026-01-01T00:00:00Z"}}

agent_id must equal internal_name; wallets and the constitution belong to the agent; a
wallet's onchain_identity_contract must match the agent's onchain_identity.contract. The
constitution's files are read relative to FILE and pinned by content hash (soul_hash and
purpose_hash are computed; given ones must match). Adding an agent with the same agent_id
replaces it. A task runs as the agent its profile's integration_policy.agent_id names, else
the only registered agent.`,
	}
	var asJSON bool
	add := &cobra.Command{
		Use:     "add FILE",
		Short:   "Register (or replace) the agent FILE holds",
		Example: `  packrun agents add arc.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHost(cmd, readWrite, func(h *packrun.Host) error {
				rec, replaced, err := h.AddAgent(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s agent %s (constitution %s)\n", addedOrReplaced(replaced), rec.Agent.AgentID, orNoneStr(rec.Constitution.Hash()))
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the registered agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				all, err := h.Agents(cmd.Context())
				if err != nil || asJSON {
					return orJSON(a, all, err)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "AGENT\tDISPLAY NAME\tWALLETS\tCONSTITUTION")
				for _, r := range all {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Agent.AgentID, r.Agent.DisplayName, len(r.Wallets), orNoneStr(r.Constitution.Hash()))
				}
				return tw.Flush()
			})
		},
	}
	show := a.showCommand("Show a registered agent (JSON)", func(h *packrun.Host, cmd *cobra.Command, id string) (any, error) {
		return h.Agent(cmd.Context(), id)
	})
	outputVar(list.Flags(), &asJSON)
	cmd.AddCommand(add, list, show)
	return cmd
}

func (a *app) profilesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "Register, list and show subagent profiles",
		Long: `A subagent profile (the agent runtime schema §3) says how a task runs: its adapter and model, skills,
prompt framing and policies. A FILE holds one SubagentProfile, field names as the schema writes
them. default_adapter_id must be a configured adapter, default_model one it offers, skill_ids
installed skills. Applied at claim: context_policy.max_prompt_chars bounds the prompt handed to
the node (prompt_parts, then the task's subject and description), include_recent_memory adds
the latest settled tasks of the same type; result_policy.allow_follow_up_tasks false refuses
the follow-ups a node stages. A task uses requested_profile_id, else its type's
default_profile_id. Adding a profile with the same profile_id replaces it.`,
	}
	var asJSON bool
	add := &cobra.Command{
		Use:     "add FILE",
		Short:   "Register (or replace) the profile FILE holds",
		Example: `  packrun profiles add writer.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHost(cmd, readWrite, func(h *packrun.Host) error {
				p, replaced, err := h.AddProfile(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s profile %s\n", addedOrReplaced(replaced), p.ProfileID)
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the registered profiles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				all, err := h.Profiles(cmd.Context())
				if err != nil || asJSON {
					return orJSON(a, all, err)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PROFILE\tSTYLE\tROLE\tADAPTER\tMODEL\tSKILLS")
				for _, p := range all {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ProfileID, p.Style, p.Role, p.DefaultAdapterID, orNoneStr(p.DefaultModel), strings.Join(p.SkillIDs, ","))
				}
				return tw.Flush()
			})
		},
	}
	show := a.showCommand("Show a registered profile (JSON)", func(h *packrun.Host, cmd *cobra.Command, id string) (any, error) {
		return h.Profile(cmd.Context(), id)
	})
	outputVar(list.Flags(), &asJSON)
	cmd.AddCommand(add, list, show)
	return cmd
}

// showCommand is "show ID": get's answer printed as JSON (by default).
func (a *app) showCommand(short string, get func(h *packrun.Host, cmd *cobra.Command, id string) (any, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				v, err := get(h, cmd, args[0])
				if err != nil {
					return err
				}
				return a.emitRecord(v)
			})
		},
	}
	outputVarDefault(cmd.Flags(), outJSON, nil)
	return cmd
}

// orJSON prints v as JSON unless err.
func orJSON(a *app, v any, err error) error {
	if err != nil {
		return err
	}
	return a.emit(v)
}

func addedOrReplaced(replaced bool) string {
	if replaced {
		return "replaced"
	}
	return "added"
}

func orNoneStr(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
