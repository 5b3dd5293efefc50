package registry

import (
	"encoding/json"
	"fmt"
	"time"
)

// Names fixed by the in-toto and SLSA specifications.
const (
	InTotoPayloadType     = "application/vnd.in-toto+json"
	InTotoStatementType   = "https://in-toto.io/Statement/v1"
	SLSAProvenanceV1      = "https://slsa.dev/provenance/v1"
	DefaultBuildType      = "https://github.com/packrun/packrun/buildtypes/pack/v1"
	sourceDependencyURI   = "file:source"
	bundleMediaTypeV03    = "application/vnd.dev.sigstore.bundle.v0.3+json"
	maxProvenanceSubjects = 64
)

// Provenance is what a verified SLSA provenance statement says about how a
// pack was built.
type Provenance struct {
	BuilderID    string    // runDetails.builder.id
	BuildType    string    // buildDefinition.buildType
	SourceDigest string    // sha256 hex of the source, from resolvedDependencies "file:source"
	BuiltAt      time.Time // runDetails.metadata.finishedOn (else startedOn); zero if absent
	Signer       string    // who signed the provenance, as in Verdict.Signer
}

type digestSet map[string]string

type resourceDescriptor struct {
	Name   string    `json:"name,omitempty"`
	URI    string    `json:"uri,omitempty"`
	Digest digestSet `json:"digest,omitempty"`
}

type statement struct {
	Type          string               `json:"_type"`
	Subject       []resourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     json.RawMessage      `json:"predicate"`
}

type slsaPredicate struct {
	BuildDefinition struct {
		BuildType            string               `json:"buildType"`
		ExternalParameters   json.RawMessage      `json:"externalParameters"`
		ResolvedDependencies []resourceDescriptor `json:"resolvedDependencies,omitempty"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
		Metadata *struct {
			StartedOn  string `json:"startedOn,omitempty"`
			FinishedOn string `json:"finishedOn,omitempty"`
		} `json:"metadata,omitempty"`
	} `json:"runDetails"`
}

// externalParameters is what packrun records as the inputs of a pack build.
type externalParameters struct {
	Pack   string              `json:"pack"`
	Source *resourceDescriptor `json:"source,omitempty"`
}

// buildStatement renders the in-toto Statement v1 with a SLSA Provenance v1
// predicate for an archive.
func buildStatement(name, archiveSHA256 string, opts SignOptions) ([]byte, error) {
	var pred slsaPredicate
	pred.BuildDefinition.BuildType = opts.BuildType
	ext := externalParameters{Pack: name}
	if opts.SourceDigest != "" {
		src := resourceDescriptor{URI: sourceDependencyURI, Digest: digestSet{"sha256": opts.SourceDigest}}
		ext.Source = &src
		pred.BuildDefinition.ResolvedDependencies = []resourceDescriptor{src}
	}
	extJSON, err := json.Marshal(ext)
	if err != nil {
		return nil, err
	}
	pred.BuildDefinition.ExternalParameters = extJSON
	pred.RunDetails.Builder.ID = opts.BuilderID
	at := opts.BuiltAt.UTC().Format(time.RFC3339)
	pred.RunDetails.Metadata = &struct {
		StartedOn  string `json:"startedOn,omitempty"`
		FinishedOn string `json:"finishedOn,omitempty"`
	}{StartedOn: at, FinishedOn: at}
	predJSON, err := json.Marshal(pred)
	if err != nil {
		return nil, err
	}
	return json.Marshal(statement{
		Type:          InTotoStatementType,
		Subject:       []resourceDescriptor{{Name: name, Digest: digestSet{"sha256": archiveSHA256}}},
		PredicateType: SLSAProvenanceV1,
		Predicate:     predJSON,
	})
}

// checkStatement checks a verified DSSE payload against the pack: it must be
// an in-toto Statement v1 with a SLSA Provenance v1 predicate whose subject
// names this pack with this archive's sha256. It returns the provenance, or
// a reason and the check that failed.
func checkStatement(payload []byte, name, archiveSHA256 string) (*Provenance, string, string) {
	var st statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, CheckProvenance, fmt.Sprintf("payload is not an in-toto statement: %v", err)
	}
	if st.Type != InTotoStatementType {
		return nil, CheckProvenance, fmt.Sprintf("statement _type is %s, want %q", quote(st.Type), InTotoStatementType)
	}
	if st.PredicateType != SLSAProvenanceV1 {
		return nil, CheckProvenance, fmt.Sprintf("predicateType is %s, want %q", quote(st.PredicateType), SLSAProvenanceV1)
	}
	if len(st.Subject) == 0 || len(st.Subject) > maxProvenanceSubjects {
		return nil, CheckProvenance, fmt.Sprintf("statement has %d subjects, want 1..%d", len(st.Subject), maxProvenanceSubjects)
	}
	matched := false
	var others []string
	for _, s := range st.Subject {
		if s.Digest["sha256"] != archiveSHA256 {
			others = append(others, s.Name+"@sha256:"+s.Digest["sha256"])
			continue
		}
		if s.Name != name {
			return nil, CheckProvenance, fmt.Sprintf("subject with this archive's sha256 is named %s, want %q", quote(s.Name), name)
		}
		matched = true
	}
	if !matched {
		return nil, CheckProvenance, fmt.Sprintf("no subject has this archive's sha256 %s (subjects: %s)", archiveSHA256, list(others))
	}
	var pred slsaPredicate
	if err := json.Unmarshal(st.Predicate, &pred); err != nil {
		return nil, CheckProvenance, fmt.Sprintf("SLSA predicate: %v", err)
	}
	if pred.RunDetails.Builder.ID == "" {
		return nil, CheckProvenance, "SLSA predicate has no runDetails.builder.id"
	}
	if pred.BuildDefinition.BuildType == "" {
		return nil, CheckProvenance, "SLSA predicate has no buildDefinition.buildType"
	}
	prov := &Provenance{
		BuilderID: pred.RunDetails.Builder.ID,
		BuildType: pred.BuildDefinition.BuildType,
	}
	for _, d := range pred.BuildDefinition.ResolvedDependencies {
		if d.URI == sourceDependencyURI {
			prov.SourceDigest = d.Digest["sha256"]
			break
		}
	}
	if m := pred.RunDetails.Metadata; m != nil {
		ts := m.FinishedOn
		if ts == "" {
			ts = m.StartedOn
		}
		if ts != "" {
			t, err := time.Parse(time.RFC3339, ts)
			if err != nil {
				return nil, CheckProvenance, fmt.Sprintf("runDetails.metadata time %s is not an RFC 3339 time", quote(ts))
			}
			prov.BuiltAt = t
		}
	}
	return prov, "", ""
}
