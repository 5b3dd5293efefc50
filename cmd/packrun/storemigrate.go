package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
)

// storeCommand groups the commands about the home's store as a whole.
func (a *app) storeCommand() *cobra.Command {
	st := &cobra.Command{Use: "store", Short: "Move the home's store (packrun.db) into PostgreSQL"}
	st.AddCommand(a.storeMigrateCommand())
	return st
}

func (a *app) storeMigrateCommand() *cobra.Command {
	var to string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "migrate --to postgres://USER@HOST:PORT/DB [--json]",
		Short: "Copy the home's SQLite store into an empty PostgreSQL database",
		Long: `Copy this home's own SQLite store into the PostgreSQL database --to names, which
must be empty: installed packs and their blobs, tasks, attempts and the evidence chain
(every seq and hash as recorded), memory (secret values stay sealed with the home's
secret.key), artifacts and their bytes, schedules, sensor events, workflows, runs,
messages, API tokens, agents and task types. Every blob file is checked against its
sha256 on the way. The copy is one transaction, and the evidence chain is verified in
it before it commits: if the target is not empty, a blob is missing or does not match,
or the chain does not verify, nothing is written (exit 5; 66 for a missing blob).

The home itself is only read (but for a missing secret.key or host.key, made as by any
command with --store): it keeps its trust policy, configuration and key files, and
packrun.db stays as it was. Stop every packrun using the home first. Afterwards use
the same home with --store (or $PACKRUN_STORE) set to the database; give every other
node a copy of the home's secret.key and trust.json. The head printed here is the
chain's as it was in the home: pin it with 'packrun evidence verify --head SEQ:HASH'.`,
		Example: `  packrun store migrate --to postgres://packrun@db.internal:5432/packrun
  packrun --store postgres://packrun@db.internal:5432/packrun evidence verify
  packrun --store postgres://packrun@db.internal:5432/packrun serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageError("store migrate needs --to postgres://…, the database to copy into")
			}
			if a.store != "" {
				return usageError("store migrate copies the home's own SQLite store: leave out --store (the target is --to)")
			}
			rep, err := packrun.MigrateStore(cmd.Context(), a.home, to, packrun.Config{})
			if err != nil {
				return err
			}
			if asJSON {
				return a.emit(rep)
			}
			return a.printMigration(rep)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the PostgreSQL database to copy into (a postgres:// URL; it must be empty)")
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// printMigration prints each table's row counts, the blobs copied and
// the chain as verified in PostgreSQL.
func (a *app) printMigration(rep *packrun.StoreMigration) error {
	w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tIN THE HOME\tCOPIED")
	var rows int64
	for _, t := range rep.Tables {
		fmt.Fprintf(w, "%s\t%d\t%d\n", t.Table, t.Source, t.Target)
		rows += t.Target
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c := rep.Chain
	fmt.Fprintf(a.stdout, "copied %d rows of %d tables, %d pack blobs and %d artifacts (%s)\n", rows, len(rep.Tables), rep.PackBlobs, rep.Artifacts, human(uint64(rep.Bytes)))
	fmt.Fprintf(a.stdout, "evidence intact in PostgreSQL: %d events, %d attempts, %d artifacts\nhead %d:%s\n", c.Events, c.Attempts, c.Artifacts, c.HeadSeq, c.Head)
	return nil
}
