// Package registry will hold trust policy, Sigstore signing and verification,
// SLSA provenance and the local pack store (install, list, export).
//
// Status: not built yet.
package registry
