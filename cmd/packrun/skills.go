package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
)

func (a *app) skillsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "skills [--json]",
		Short: "List the installed skills (their SkillManifest, pack, node and task types)",
		Long: `A skill is a skill node of an installed pack's newest version. Its SkillManifest (the agent runtime schema
§4) is the node's "skill" object in pack.json: skill_id (default: the typeId), description,
tags, instruction_path (SKILL.md), subagent_path, cli_commands, sensor_path, schema ids; paths
are files under the pack's assets/. Intents name skills by skill_id (skill_ids).`,
		Example: `  packrun skills
  packrun inspect local.hello.wat     # one pack's skills, with every field`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				list, err := h.Skills(cmd.Context())
				if err != nil || asJSON {
					return orJSON(a, list, err)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SKILL\tPACK\tNODE\tTASK TYPES\tINSTRUCTIONS")
				for _, s := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.SkillID, s.Pack, s.Node, strings.Join(s.TaskTypes, ","), orNoneStr(s.InstructionPath))
				}
				return tw.Flush()
			})
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}
