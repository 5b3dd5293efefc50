// Package openapitest checks an HTTP API's answers against its OpenAPI
// document in tests: a handler wrapped by Checker.Handler has every
// response it writes validated (kin-openapi) against the schema its
// operation gives its status, and a test that sees one the document does
// not describe fails.
//
// Tests only: the binary does not import it.
package openapitest
