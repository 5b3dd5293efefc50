package api

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
)

// openwop's pack registry read API (node-packs.md, "Registry HTTP API"),
// served from the packs installed in this home: they are home-wide, so
// every tenant sees the same catalog. Only packs whose name is in
// openwop's grammar and whose version is SemVer are in it (a packrun
// local.* pack is not); publishing is packrun install, not a PUT. The
// routes answer in openwop's envelope (openwopRoute) with openwop's codes:
// pack_not_found, invalid_pack_name, invalid_version,
// signature_not_available.
//
//	GET /v1/packs/-/search?q=                {results:[{name, version, description}], total}
//	GET /v1/packs/{name}                     {name, dist-tags:{latest}, versions:{V:{name, version, dist, signer, ...}}}
//	GET /v1/packs/{name}/-/{version}.json    the pack.json installed, byte for byte
//	GET /v1/packs/{name}/-/{version}.sig     the detached Ed25519 signature it was installed with
//	GET /v1/packs/{name}/-/{version}.tgz     the archive installed (its digest in X-Pack-Sha256)
//	GET /v1/packs/{name}/-/keychain          404 keychain_not_available (trust keys stay private)

// Registry codes of openwop's catalog.
const (
	owCodePackNotFound      = "pack_not_found"
	owCodeInvalidPackName   = "invalid_pack_name"
	owCodeInvalidVersion    = "invalid_version"
	owCodeSigNotAvailable   = "signature_not_available"
	owCodeKeychainNotServed = "keychain_not_available"
)

// maxSearchQuery bounds the search query.
const maxSearchQuery = 256

var (
	// registryNamePattern is openwop's pack name grammar (node-packs.md
	// "Naming"), as packs.Manifest checks an openwop pack's name.
	registryNamePattern = regexp.MustCompile(`^(?:core|vendor|community|private)\.[a-z][a-z0-9_-]*(?:\.[a-z][a-zA-Z0-9_-]*)+$`)
	// registryVersionPattern is SemVer 2.0.0, as openwop's catalog keys.
	registryVersionPattern = regexp.MustCompile(`^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)
)

// registryRoutes are the read API's route patterns: served without a
// token when Config.PublicPackRegistry.
var registryRoutes = map[string]bool{
	"GET /v1/packs/-/search":        true,
	"GET /v1/packs/{name}":          true,
	"GET /v1/packs/{name}/-/{file}": true,
}

// registrySearch is GET /v1/packs/-/search's answer.
type registrySearch struct {
	Results []registryResult `json:"results"`
	Total   int              `json:"total"`
}

// registryResult is one pack of a search: its newest version.
type registryResult struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// registryCatalog is GET /v1/packs/{name}'s answer.
type registryCatalog struct {
	Name     string                     `json:"name"`
	DistTags map[string]string          `json:"dist-tags"`
	Versions map[string]registryVersion `json:"versions"`
}

// registryVersion is one installed version: where its files are, their
// digests, and who signed it (the key or identity verified at install,
// with its SLSA provenance when it had one).
type registryVersion struct {
	Name        string               `json:"name"`
	Version     string               `json:"version"`
	Dist        registryDist         `json:"dist"`
	Signer      string               `json:"signer,omitempty"`
	KeyID       string               `json:"keyId,omitempty"`
	Provenance  *host.PackProvenance `json:"provenance,omitempty"`
	InstalledAt string               `json:"installedAt"`
}

// registryDist is a version's downloads.
type registryDist struct {
	Tarball   string `json:"tarball"`
	Manifest  string `json:"manifest"`
	Signature string `json:"signature,omitempty"`
	Integrity string `json:"integrity"`
	Shasum    string `json:"shasum"`
	Size      int64  `json:"size"`
}

// registryPacks returns the installed packs in openwop's catalog, by
// name, newest version first.
func (s *server) registryPacks(r *http.Request) ([]*host.InstalledPack, error) {
	if s.cfg.Backend == nil {
		return nil, nil
	}
	all, err := s.cfg.Backend.ListPacks(r.Context())
	if err != nil {
		return nil, err
	}
	var out []*host.InstalledPack
	for _, p := range all {
		if registryNamePattern.MatchString(p.Name) && registryVersionPattern.MatchString(p.Version) {
			out = append(out, p)
		}
	}
	return out, nil
}

// registrySearch is GET /v1/packs/-/search: the packs whose name holds q
// (case-insensitive; empty: every pack).
func (s *server) registrySearch(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query().Get("q")
	if len(q) > maxSearchQuery {
		return refuse(http.StatusBadRequest, CodeInvalid, "q", "q is longer than "+strconv.Itoa(maxSearchQuery)+" bytes")
	}
	list, err := s.registryPacks(r)
	if err != nil {
		return err
	}
	res := registrySearch{Results: []registryResult{}}
	q = strings.ToLower(q)
	for i, p := range list {
		if i > 0 && list[i-1].Name == p.Name || !strings.Contains(strings.ToLower(p.Name), q) {
			continue // newest version first: the first of a name is its latest
		}
		res.Results = append(res.Results, registryResult{Name: p.Name, Version: p.Version, Description: manifestDescription(p)})
	}
	res.Total = len(res.Results)
	reply(w, http.StatusOK, res)
	return nil
}

// manifestDescription is the description of p's pack.json, if any.
func manifestDescription(p *host.InstalledPack) string {
	var m struct {
		Description string `json:"description"`
	}
	if json.Unmarshal(p.Manifest, &m) != nil {
		return ""
	}
	return m.Description
}

// registryName reads and checks the {name} of a registry path.
func registryName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !registryNamePattern.MatchString(name) {
		return "", refuse(http.StatusBadRequest, owCodeInvalidPackName, "name", "pack name "+strconv.Quote(host.ShortName(name))+" is not an openwop pack name (core., vendor., community. or private.<org>.<pack>)")
	}
	return name, nil
}

// registryCatalog is GET /v1/packs/{name}.
func (s *server) registryCatalog(w http.ResponseWriter, r *http.Request) error {
	name, err := registryName(r)
	if err != nil {
		return err
	}
	list, err := s.registryPacks(r)
	if err != nil {
		return err
	}
	cat := registryCatalog{Name: name, DistTags: map[string]string{}, Versions: map[string]registryVersion{}}
	for _, p := range list {
		if p.Name != name {
			continue
		}
		if len(cat.Versions) == 0 {
			cat.DistTags["latest"] = p.Version
		}
		cat.Versions[p.Version] = registryVersionOf(p)
	}
	if len(cat.Versions) == 0 {
		return refuse(http.StatusNotFound, owCodePackNotFound, "name", "no pack "+name+" is installed")
	}
	reply(w, http.StatusOK, cat)
	return nil
}

func registryVersionOf(p *host.InstalledPack) registryVersion {
	base := "/v1/packs/" + url.PathEscape(p.Name) + "/-/" + url.PathEscape(p.Version)
	v := registryVersion{Name: p.Name, Version: p.Version, Signer: p.Signer, KeyID: p.KeyID, Provenance: p.Provenance,
		InstalledAt: p.InstalledAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Dist:        registryDist{Tarball: base + ".tgz", Manifest: base + ".json", Integrity: integrityOf(p.SHA256), Shasum: p.SHA256, Size: p.Size}}
	if p.SignatureSHA256 != "" {
		v.Dist.Signature = base + ".sig"
	}
	return v
}

// integrityOf is the Subresource Integrity form of a hex SHA-256.
func integrityOf(hexSum string) string {
	b, err := hex.DecodeString(hexSum)
	if err != nil {
		return ""
	}
	return "sha256-" + base64.StdEncoding.EncodeToString(b)
}

// registryFile is GET /v1/packs/{name}/-/{file}: {version}.json, .sig,
// .tgz, or keychain.
func (s *server) registryFile(w http.ResponseWriter, r *http.Request) error {
	name, err := registryName(r)
	if err != nil {
		return err
	}
	file := r.PathValue("file")
	if file == "keychain" {
		return refuse(http.StatusNotFound, owCodeKeychainNotServed, "", "this host does not publish the keys it trusts for "+name)
	}
	dot := strings.LastIndexByte(file, '.')
	kind := ""
	if dot > 0 {
		kind = file[dot+1:]
	}
	if kind != "json" && kind != "sig" && kind != "tgz" {
		return refuse(http.StatusNotFound, owCodePackNotFound, "", "no file "+strconv.Quote(host.ShortName(file))+" in a pack's registry entry: use {version}.json, .sig or .tgz")
	}
	version := file[:dot]
	if !registryVersionPattern.MatchString(version) {
		return refuse(http.StatusBadRequest, owCodeInvalidVersion, "version", "version "+strconv.Quote(host.ShortName(version))+" is not SemVer 2.0.0")
	}
	list, err := s.registryPacks(r)
	if err != nil {
		return err
	}
	var p *host.InstalledPack
	for _, c := range list {
		if c.Name == name && c.Version == version {
			p = c
			break
		}
	}
	if p == nil && kind == "sig" {
		return refuse(http.StatusNotFound, owCodeSigNotAvailable, "", "no signature of "+name+"@"+version+": it is not installed")
	}
	if p == nil {
		return refuse(http.StatusNotFound, owCodePackNotFound, "", "no pack "+name+"@"+version+" is installed")
	}
	h := w.Header()
	switch kind {
	case "json":
		h.Set("Content-Type", "application/json")
		return writeBlob(w, r, p.Manifest)
	case "sig":
		if p.SignatureSHA256 == "" {
			return refuse(http.StatusNotFound, owCodeSigNotAvailable, "", name+"@"+version+" was not installed with a detached signature")
		}
		b, err := s.cfg.Backend.PackBlob(r.Context(), p.SignatureSHA256)
		if err != nil {
			return err
		}
		h.Set("Content-Type", "application/octet-stream")
		return writeBlob(w, r, b)
	}
	b, err := s.cfg.Backend.PackBlob(r.Context(), p.SHA256)
	if err != nil {
		return err
	}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Pack-Sha256", p.SHA256)
	// PackBlob checked the bytes against this digest.
	h.Set("Digest", "sha-256="+strings.TrimPrefix(integrityOf(p.SHA256), "sha256-"))
	h.Set("ETag", `"sha256:`+p.SHA256+`"`)
	return writeBlob(w, r, b)
}

// writeBlob writes b, an immutable file of an installed pack.
func writeBlob(w http.ResponseWriter, r *http.Request, b []byte) error {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return nil
}

// packsCaps is discovery's packs: the registry read API, served from
// the installed packs (publishing is packrun install, so publish and
// openwop's test-mode namespace are false).
type packsCaps struct {
	Registry registryCaps  `json:"registry"`
	TestMode supportedCaps `json:"testMode"`
}

// registryCaps says what the read API serves: anonymousRead when it
// needs no token (Config.PublicPackRegistry), and the algorithm of the
// detached signatures it serves.
type registryCaps struct {
	Supported           bool     `json:"supported"`
	Publish             bool     `json:"publish"`
	AnonymousRead       bool     `json:"anonymousRead"`
	SignatureAlgorithms []string `json:"signatureAlgorithms"`
	BasePath            string   `json:"basePath"`
}

// supportedCaps is a capability's {supported}.
type supportedCaps struct {
	Supported bool `json:"supported"`
}

// advertiseRegistry adds packs to d, at its root and under capabilities.
func (s *server) advertiseRegistry(d *openwopDiscovery) {
	c := &packsCaps{Registry: registryCaps{Supported: true, AnonymousRead: s.cfg.PublicPackRegistry,
		SignatureAlgorithms: []string{"ed25519"}, BasePath: "/v1/packs"}}
	d.Packs = c
	d.Capabilities.Packs = c
}
