package storecore

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// The rules of host.TaskTypes, host.Memory and the API tokens every
// backend applies.

// PackRoutes validates the manifest routes of pack (errors under op) and
// returns them by task type, each naming pack, of origin manifest.
func PackRoutes(op, pack string, routes []host.TaskTypeRoute) (map[string]host.TaskTypeRoute, error) {
	if err := host.CheckID(op, "pack", pack); err != nil {
		return nil, err
	}
	want := map[string]host.TaskTypeRoute{}
	for i := range routes {
		r := routes[i]
		if r.Pack == "" {
			r.Pack = pack
		}
		if r.Pack != pack {
			return nil, host.Invalid(op, "pack", "route for %s names pack %s, not %s", r.TaskType, r.Pack, pack)
		}
		if err := host.CheckRoute(op, &r); err != nil {
			return nil, err
		}
		if _, dup := want[r.TaskType]; dup {
			return nil, host.Invalid(op, "task_type", "%s is routed twice", r.TaskType)
		}
		r.Origin = host.OriginManifest
		want[r.TaskType] = r
	}
	return want, nil
}

// RouteSpec is the stored form of a route's spec.
func RouteSpec(r *host.TaskTypeRoute) string {
	b, _ := json.Marshal(r.TaskTypeSpec)
	return string(b)
}

// SameRoutes reports whether the stored routes have are the routes want:
// setting want would change nothing.
func SameRoutes(have []host.TaskTypeRoute, want map[string]host.TaskTypeRoute) bool {
	if len(have) != len(want) {
		return false
	}
	for _, h := range have {
		r, ok := want[h.TaskType]
		if !ok || h.Node != r.Node || RouteSpec(&h) != RouteSpec(&r) {
			return false
		}
	}
	return true
}

// Resolve answers host.TaskTypes.Resolve from the routes found for
// taskType: an operator override if there is one, else the one manifest
// route; none is ErrNotFound, several ErrConflict naming the packs.
func Resolve(op, taskType string, found []host.TaskTypeRoute) (host.TaskTypeRoute, error) {
	var manifest []host.TaskTypeRoute
	for _, r := range found {
		if r.Origin == host.OriginOperator {
			return r, nil
		}
		manifest = append(manifest, r)
	}
	switch len(manifest) {
	case 0:
		return host.TaskTypeRoute{}, host.Errorf(op, taskType, host.ErrNotFound, "no installed pack serves this task type; install one that does, or route it: packrun task-types set TYPE --pack NAME --node TYPEID")
	case 1:
		return manifest[0], nil
	}
	packs := make([]string, len(manifest))
	for i, f := range manifest {
		packs[i] = f.Pack
	}
	sort.Strings(packs)
	return host.TaskTypeRoute{}, host.Errorf(op, taskType, host.ErrConflict, "served by %s; choose one: packrun task-types set TYPE --pack NAME --node TYPEID", strings.Join(packs, ", "))
}

// SortRoutes orders routes as ListTaskTypes lists them: by task type, the
// override first, then by pack.
func SortRoutes(out []host.TaskTypeRoute) {
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].TaskType != out[j].TaskType {
			return out[i].TaskType < out[j].TaskType
		}
		if out[i].Origin != out[j].Origin {
			return out[i].Origin == host.OriginOperator
		}
		return out[i].Pack < out[j].Pack
	})
}

// MemorySubject is the subject of a memory error: "<namespace>/<key>",
// the caller's own names.
func MemorySubject(sc host.Scope, key string) string { return sc.Namespace + "/" + key }

// CheckPut validates a memory put (errors under op, value over maxValue
// bytes ErrTooLarge) and returns the bytes it counts against the
// namespace's usage: its key and value, the caller's (not a sealed form).
func CheckPut(op string, sc host.Scope, key string, value json.RawMessage, opts host.PutOptions, maxValue int64) (int64, error) {
	if err := host.CheckScope(op, sc); err != nil {
		return 0, err
	}
	if err := host.CheckKey(op, key, false); err != nil {
		return 0, err
	}
	if int64(len(value)) > maxValue {
		return 0, host.Errorf(op, MemorySubject(sc, key), host.ErrTooLarge, "value is %d bytes; the limit is %d", len(value), maxValue)
	}
	if len(value) == 0 || !json.Valid(value) {
		return 0, host.Invalid(op, "value", "must be valid JSON")
	}
	if opts.TTL < 0 {
		return 0, host.Invalid(op, "ttl", "must not be negative")
	}
	return int64(len(key) + len(value)), nil
}

// CheckEntry validates the scope and key of a memory get or delete.
func CheckEntry(op string, sc host.Scope, key string) error {
	if err := host.CheckScope(op, sc); err != nil {
		return err
	}
	return host.CheckKey(op, key, false)
}

// CheckToken validates an API token to store (errors under op) and
// returns its scopes as stored: comma-separated.
func CheckToken(op string, t *auth.Token) (string, error) {
	if err := host.CheckTenant(op, t.Tenant); err != nil {
		return "", err
	}
	if len(t.Name) > 200 {
		return "", host.Invalid(op, "name", "is %d bytes; the limit is 200", len(t.Name))
	}
	scopes := make([]string, len(t.Scopes))
	for i, sc := range t.Scopes {
		scopes[i] = string(sc)
	}
	return strings.Join(scopes, ","), nil
}

// TokenScopes reads a token's stored scopes.
func TokenScopes(stored string) []auth.Scope {
	var out []auth.Scope
	for _, s := range strings.Split(stored, ",") {
		if s != "" {
			out = append(out, auth.Scope(s))
		}
	}
	return out
}
