package main

import (
	"github.com/spf13/cobra"

	"github.com/packrun/packrun/internal/api"
)

func (a *app) openapiCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "openapi",
		Short: "Print the OpenAPI 3.1 document of the HTTP API (what GET /v1/openapi.json serves)",
		Long: `Print the OpenAPI 3.1 document of the HTTP API as JSON: every route, its scope, query
parameters, request and response schemas and refusals. packrun serve answers the same
document at GET /v1/openapi.json, without a token.`,
		Example: `  packrun openapi > openapi.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := api.OpenAPI()
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(append(b, '\n'))
			return err
		},
	}
}
