package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
)

func (a *app) tokensCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke the API tokens packrun serve accepts",
		Long: `Every route of the HTTP API needs a bearer token (Authorization: Bearer <token>). A
token acts for one tenant (what it enqueues, invokes and reads is that tenant's, whatever a
request body says) and carries scopes:

  invoke          POST /v1/invoke
  tasks:write     enqueue and cancel tasks
  tasks:read      read tasks
  memory:read     read the tenant's memory
  memory:write    write the tenant's memory
  evidence:read   attempts, artifacts, events and replays
  messages:read   read the tenant's agent messages
  messages:write  publish agent messages (POST /v1/messages)
  packs:admin     manage packs
  admin           every scope above (and secret memory values), for its tenant
  operator        with evidence:read, GET /v1/events lists every tenant's events and the
                  host's own (dispatch_*, task types, pack installs); admin does not
                  imply it: give it by name, to operators only

A token is shown once, when it is created; only its SHA-256 is stored. Revoking one takes
effect at the next request, in every packrun serving this home.`,
	}
	cmd.AddCommand(a.tokensCreateCommand(), a.tokensListCommand(), a.tokensRevokeCommand())
	return cmd
}

func (a *app) tokensCreateCommand() *cobra.Command {
	var tenant, scopes, name string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create --tenant T --scopes S[,S...] [--expires 30d] [--name N]",
		Short: "Create a token; it is printed alone on the last line (shown this once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" {
				return usageError("--tenant is required: every call made with the token acts for it")
			}
			if scopes == "" {
				return usageError("--scopes is required, e.g. --scopes invoke,tasks:read (see packrun tokens --help)")
			}
			sc, err := packrun.ParseScopes(scopes)
			if err != nil {
				return usageError("--scopes: %v", err)
			}
			if cmd.Flags().Changed("expires") && (ttl <= 0 || ttl > maxTokenLifetime) {
				return usageError("--expires %s: want a positive lifetime up to 3650d, such as 30d, 12h or 90m", cmd.Flags().Lookup("expires").Value)
			}
			h, err := a.open(cmd.Context(), readWrite, packrun.Config{})
			if err != nil {
				return err
			}
			defer h.Close(cmd.Context())
			secret, t, err := h.CreateToken(cmd.Context(), packrun.TokenSpec{Tenant: tenant, Scopes: sc, Name: name, TTL: ttl})
			if err != nil {
				return err
			}
			exp := "never"
			if t.ExpiresAt != nil {
				exp = t.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(a.stdout, "created token %s for tenant %s, scopes %s, expires %s\n", t.ID, t.Tenant, joinScopes(t.Scopes), exp)
			fmt.Fprintln(a.stdout, "it is shown this once; keep it secret:")
			fmt.Fprintln(a.stdout, secret)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&tenant, "tenant", "", "the tenant the token acts for (required)")
	fl.StringVar(&scopes, "scopes", "", "comma-separated scopes (required): "+scopeList()+" (admin is every scope but operator)")
	fl.StringVar(&name, "name", "", "a name for people: who or what holds the token")
	durationVar(fl, &ttl, "expires", 0, "lifetime, e.g. 30d, 12h, 90m (default: never)")
	return cmd
}

// maxTokenLifetime is the longest --expires: ten years.
const maxTokenLifetime = 3650 * host.Day

func joinScopes(sc []packrun.Scope) string {
	s := make([]string, len(sc))
	for i, x := range sc {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

func (a *app) tokensListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the tokens (never their secrets), newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.open(cmd.Context(), readOnly, packrun.Config{})
			if err != nil {
				return err
			}
			defer h.Close(cmd.Context())
			ts, err := h.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if ts == nil {
					ts = []*packrun.Token{}
				}
				return a.emit(ts)
			}
			w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tTENANT\tSCOPES\tCREATED\tSTATE")
			now := time.Now()
			for _, t := range ts {
				state := "active"
				switch {
				case t.RevokedAt != nil:
					state = "revoked " + t.RevokedAt.Format(time.RFC3339)
				case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
					state = "expired " + t.ExpiresAt.Format(time.RFC3339)
				case t.ExpiresAt != nil:
					state = "expires " + t.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Tenant, joinScopes(t.Scopes), t.CreatedAt.Format(time.RFC3339), state)
			}
			return w.Flush()
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) tokensRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: the next request made with it is refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.open(cmd.Context(), readWrite, packrun.Config{})
			if err != nil {
				return err
			}
			defer h.Close(cmd.Context())
			t, err := h.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "revoked token %s (tenant %s) at %s\n", t.ID, t.Tenant, t.RevokedAt.Format(time.RFC3339))
			return nil
		},
	}
}

// scopeList names every scope a token may carry, as ParseScopes takes them.
func scopeList() string {
	names := make([]string, len(packrun.Scopes))
	for i, s := range packrun.Scopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
