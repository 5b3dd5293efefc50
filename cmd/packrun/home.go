package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
)

func (a *app) homeCommand() *cobra.Command {
	home := &cobra.Command{Use: "home", Short: "Create and show the packrun home"}
	var asJSON bool
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the home (its directory and store) if it does not exist",
		Long: `Create the home named by --home / $PACKRUN_HOME (default ~/.packrun): its directory
and its store (SQLite, or the --store database's tables).
A home that exists is opened and left as it is. Commands that write create the home as
they need it; commands that only read refuse one that does not exist (exit 66), so this is
the one step before them on a fresh machine ('replay --trace' creates it too).`,
		Example: `  packrun home init
  PACKRUN_HOME=/srv/packrun packrun home init --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.open(cmd.Context(), readWrite, packrun.Config{})
			if err != nil {
				return err
			}
			if err := h.Close(context.Background()); err != nil {
				return err
			}
			if asJSON {
				return a.emit(struct {
					Home string `json:"home"`
				}{a.home})
			}
			fmt.Fprintf(a.stdout, "home %s\n", a.home)
			return nil
		},
	}
	outputVar(initCmd.Flags(), &asJSON)
	home.AddCommand(initCmd)
	return home
}
