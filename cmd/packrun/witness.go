package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/internal/evidence/witness"
)

func (a *app) witnessCommand() *cobra.Command {
	var addr, keyFile, stateDir, name string
	var logSpecs []string
	cmd := &cobra.Command{
		Use:   "witness --key FILE --state DIR --log ORIGIN=VKEY... [--listen ADDR]",
		Short: "Cosign other logs' checkpoints, only ever as they grow (C2SP tlog-witness)",
		Long: `Serve a C2SP tlog-witness: POST /add-checkpoint takes a log's signed checkpoint with a
consistency proof from the last checkpoint this witness cosigned for that log, and
answers with a cosignature (C2SP tlog-cosignature, cosignature/v1) only if the log's
signature verifies and the proof shows the log only grew. A fork (422), a rollback
or stale size (409, with the size held), an unknown log (404) or a bad signature
(403) is refused. The last cosigned size and root of each log are written durably
under --state before the answer, so a crash never makes the witness forget them.

--key is the witness's own Ed25519 signed-note key: created on first use (mode 0600,
named --name), refused if others may read it. --log names a log to witness: its
origin line and its signed-note Ed25519 verifier key (name+hash+base64),
repeatable. The witness's verifier key, what a checker passes to
verify its cosignatures, is printed on stdout.`,
		Example: `  packrun witness --key /srv/witness/key --state /srv/witness/state \
    --log "packrun.example/home=$(cat home.vkey)" --listen 0.0.0.0:7380`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if keyFile == "" {
				return usageError("--key FILE: the witness's own key file is required (created on first use)")
			}
			if stateDir == "" {
				return usageError("--state DIR: the directory of the witness's state is required")
			}
			if len(logSpecs) == 0 {
				return usageError("--log ORIGIN=VKEY: at least one log to witness")
			}
			var logs []witness.Log
			for _, s := range logSpecs {
				l, err := witness.ParseLog(s)
				if err != nil {
					return usageError("--log: %w", err)
				}
				logs = append(logs, l)
			}
			key, created, err := witness.LoadOrCreateKey(keyFile, name)
			if err != nil {
				return err
			}
			w, err := witness.New(key, logs, stateDir)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return withCode(listenExitCode(err), fmt.Errorf("--listen %s: %w", addr, err))
			}
			if created {
				fmt.Fprintf(a.stderr, "packrun: created witness key %s\n", keyFile)
			}
			fmt.Fprintln(a.stdout, key.VKey())
			fmt.Fprintf(a.stderr, "packrun witness on http://%s%s for %d log(s) (state %s)\n", ln.Addr(), witness.AddCheckpointPath, len(logs), stateDir)
			srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			serveErr := make(chan error, 1)
			go func() { serveErr <- srv.Serve(ln) }()
			select {
			case err = <-serveErr:
			case <-ctx.Done():
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(shutdown)
			if ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:7380", "listen address")
	cmd.Flags().StringVar(&keyFile, "key", "", "the witness's own key file (created on first use, mode 0600)")
	cmd.Flags().StringVar(&stateDir, "state", "", "directory of the last checkpoint cosigned for each log (created if missing)")
	cmd.Flags().StringArrayVar(&logSpecs, "log", nil, "a log to witness: ORIGIN=VKEY (repeatable)")
	cmd.Flags().StringVar(&name, "name", "packrun-witness", "the name of a key --key creates (cosignature lines carry it)")
	return cmd
}
