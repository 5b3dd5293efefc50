// Package oci moves packs through OCI registries with oras-go: a pack is an
// OCI artifact of packrun's own media types, and its Sigstore bundles (the
// signature over the archive and the SLSA provenance) are referrers of it,
// laid out as cosign lays out its bundles. It only transports bytes and
// checks them against their digests and size limits; judging signatures is
// the caller's (the root package's install path).
package oci
