package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// The OpenAPI document (GET /v1/openapi.json, packrun openapi) is built
// from three sources, so that little of it is written by hand:
//
//   - the routes as registered: method, path, scope and query parameters
//     come from the same scoped and takes calls that enforce them
//     (describeRoute);
//   - the Go types the handlers decode and reply with: their schemas are
//     derived by jsonschema-go (operations lists them per route);
//   - a table of the few words a route needs (operations), the query
//     parameters' meanings (queryParams) and the statuses each route may
//     answer besides the ones every route may.
//
// TestOpenAPIDescribesEveryRoute fails on a route without an entry, and
// the API tests check every response they receive against the document.

// publicRoutes are served without a token and without a rate: openwop's
// clients look for the API's description at GET /v1/openapi.json, and
// read discovery (GET /.well-known/openwop: nothing tenant-scoped in it),
// before they have one (openwop auth.md §2).
var publicRoutes = map[string]bool{"GET /v1/openapi.json": true, "GET /.well-known/openwop": true}

// routeMeta is what a route's handler enforces: its scope (scoped) and
// the query parameters it takes (takes).
type routeMeta struct {
	scoped bool
	scope  auth.Scope
	params []string
}

type describeKey struct{}

// describing is the routeMeta a describe request carries (nil for a
// request to serve).
func describing(r *http.Request) *routeMeta {
	d, _ := r.Context().Value(describeKey{}).(*routeMeta)
	return d
}

// describeRoute asks h what it enforces: scoped and takes record their
// arguments in the routeMeta a describe request carries and serve
// nothing.
func describeRoute(h handler, method, path string) *routeMeta {
	d := &routeMeta{}
	r, _ := http.NewRequestWithContext(context.WithValue(context.Background(), describeKey{}, d), method, "http://describe"+strings.ReplaceAll(path, "...", ""), nil)
	_ = h(nil, r) // a describe request serves nothing and fails nothing: only d counts
	return d
}

// op is what the document says of one operation beyond what its route
// enforces.
type op struct {
	summary string
	// body is the Go type of the request body (nil: none), bodyOptional
	// when it may be left out.
	body         any
	bodyOptional bool
	// ok maps a success status to the Go type of its body (nil: no body).
	ok map[int]any
	// errs are the statuses of refusals beyond those every route may
	// answer (see commonStatuses).
	errs []int
	// plain, if set, describes a text/plain alternative of the 200 body.
	plain string
	// sse, if set, describes a text/event-stream alternative of the 200
	// body (Accept: text/event-stream).
	sse string
	// octets, if set, describes an application/octet-stream alternative
	// of the 200 body (a pack's file).
	octets string
}

// anyObject is a body that is some JSON object the document does not
// describe further (a message document in its own format).
type anyObject map[string]any

// anyOf is a body that is one of several Go types.
type anyOf []any

// messageView is GET /v1/messages/{id}: a MessageRecord with view=record,
// the document (an object in its format) otherwise.
type messageView struct{}

// openAPIDoc is the document itself.
type openAPIDoc = anyObject

var (
	st200 = http.StatusOK
	st201 = http.StatusCreated
	st204 = http.StatusNoContent
	st404 = http.StatusNotFound
	st405 = http.StatusMethodNotAllowed
	st409 = http.StatusConflict
	st422 = http.StatusUnprocessableEntity
)

// operations has an entry for every route of Routes(), by method and
// OpenAPI path (docPath).
var operations = map[string]op{
	"GET /v1/tasks":                       {summary: "List the tenant's tasks, newest first", ok: map[int]any{st200: taskList{}}},
	"POST /v1/tasks":                      {summary: "Enqueue a task intent", body: host.TaskIntent{}, ok: map[int]any{st201: host.TaskRecord{}}, errs: []int{st409, st422}},
	"GET /v1/tasks/{id}":                  {summary: "Get a task", ok: map[int]any{st200: host.TaskRecord{}}, errs: []int{st404, st405}},
	"POST /v1/tasks/{id}":                 {summary: "Act on a task: {id} is ID:cancel, ID:retry (permanent_failure, retryable_failure or blocked) or ID:resume (blocked by openwop_interrupt; body {\"value\"})", body: resumeBody{}, bodyOptional: true, ok: map[int]any{st200: host.TaskRecord{}}, errs: []int{st404, st405, st409}},
	"GET /v1/tasks/{id}/events":           {summary: "The task's runtime events", ok: map[int]any{st200: eventList{}}, errs: []int{st404}},
	"GET /v1/events":                      {summary: "Runtime events in chain order, a page at a time; the token's tenant's (every tenant's and the host's own need the operator scope)", ok: map[int]any{st200: eventPage{}}},
	"GET /v1/attempts":                    {summary: "List the tenant's attempts (evidence records)", ok: map[int]any{st200: attemptList{}}},
	"GET /v1/attempts/{id}":               {summary: "Get an attempt", ok: map[int]any{st200: host.Attempt{}}, errs: []int{st404, st405}},
	"POST /v1/attempts/{id}":              {summary: "ID:replay: check the attempt against the evidence chain and re-execute it from its trace (no side effects)", ok: map[int]any{st200: ReplayVerdict{}}, errs: []int{st404, st405, st409, st422}},
	"GET /v1/artifacts/{id}":              {summary: "Get an artifact record", ok: map[int]any{st200: host.Artifact{}}, errs: []int{st404}},
	"GET /v1/evidence/checkpoint":         {summary: "The evidence log's newest signed checkpoint (a C2SP tlog-checkpoint signed note, text/plain); with Accept: application/json its size, root, note and verifier key. Every token may read it", ok: map[int]any{st200: logCheckpoint{}}, plain: "the signed checkpoint note"},
	"GET /v1/evidence/proof/inclusion":    {summary: "The inclusion proof bundle of an evidence entry (an attempt id or an event seq) in the log of a size (default the newest): what 'packrun evidence check' verifies offline. A tenant's token proves its tenant's entries only", ok: map[int]any{st200: logInclusionProof{}}, errs: []int{st404}},
	"GET /v1/evidence/proof/consistency":  {summary: "The proof that the evidence log of size from is a prefix of the log of size to (default the newest), with both signed checkpoints", ok: map[int]any{st200: logConsistencyProof{}}, errs: []int{st404}},
	"GET /v1/memory/{namespace}":          {summary: "List the keys of a memory namespace", ok: map[int]any{st200: keyList{}}},
	"GET /v1/memory/{namespace}/{key}":    {summary: "Get a memory entry (a secret's value to an admin token only)", ok: map[int]any{st200: host.Entry{}}, errs: []int{st404}},
	"PUT /v1/memory/{namespace}/{key}":    {summary: "Put a memory entry", body: putBody{}, ok: map[int]any{st200: host.Entry{}}, errs: []int{st409}},
	"DELETE /v1/memory/{namespace}/{key}": {summary: "Delete a memory entry", ok: map[int]any{st204: nil}, errs: []int{st404}},
	"GET /v1/schedules":                   {summary: "List recurring schedules, by name", ok: map[int]any{st200: scheduleList{}}},
	"POST /v1/schedules":                  {summary: "Create a recurring schedule", body: scheduleBody{}, ok: map[int]any{st201: host.RecurringSchedule{}}, errs: []int{st409, st422}},
	"GET /v1/schedules/{id}":              {summary: "Get a recurring schedule ({id}: its id or name)", ok: map[int]any{st200: host.RecurringSchedule{}}, errs: []int{st404}},
	"PATCH /v1/schedules/{id}":            {summary: "Change a recurring schedule", body: scheduleBody{}, ok: map[int]any{st200: host.RecurringSchedule{}}, errs: []int{st404, st409, st422}},
	"DELETE /v1/schedules/{id}":           {summary: "Delete a recurring schedule (the tasks it created stay)", ok: map[int]any{st200: host.RecurringSchedule{}}, errs: []int{st404}},
	"POST /v1/sensor-events":              {summary: "Record a sensor event: 201 its record, 200 a duplicate's record, 422 invalid or expired", body: host.SensorEvent{}, ok: map[int]any{st201: host.SensorEventRecord{}, st200: host.SensorEventRecord{}, st422: anyOf{expiredBody{}, errorBody{}}}, errs: []int{st409}},
	"GET /v1/messages":                    {summary: "List accepted agent messages, oldest first, a page at a time; topic is a pattern (crisis.*)", ok: map[int]any{st200: messagePage{}}},
	"POST /v1/messages":                   {summary: "Accept an agent message, its format named by Content-Type's profile (agent-envelope, agent-message, bus-envelope) or by the publish form {format, message, signature?}: 201, or 200 for a resent duplicate", body: anyObject{}, ok: map[int]any{st201: messageReceipt{}, st200: messageReceipt{}}, errs: []int{st409, st422}},
	"GET /v1/messages/{id}":               {summary: "A message's document in a format (default its own; Content-Type application/json; profile=<format>, Packrun-Lost-Fields: what the format cannot carry), or with view=record its MessageRecord", ok: map[int]any{st200: messageView{}}, errs: []int{st404, st422}},
	"POST /v1/invoke":                     {summary: "Run one node of an installed pack outside the queue", body: invokeRequest{}, ok: map[int]any{st200: invokeResponse{}}, errs: []int{st404, st409, st422}},
	"GET /v1/packs":                       {summary: "List the installed packs", ok: map[int]any{st200: packList{}}},
	"GET /v1/task-types":                  {summary: "List the task types", ok: map[int]any{st200: taskTypeList{}}},
	"GET /v1/task-types/{type}":           {summary: "Get a task type: its spec, routes and the route that wins", ok: map[int]any{st200: host.TaskTypeInfo{}}, errs: []int{st404}},
	"PUT /v1/task-types/{type}":           {summary: "Put a task type's spec and, with pack and node, its operator route", body: taskTypeBody{}, ok: map[int]any{st200: host.TaskTypeInfo{}}, errs: []int{st404, st409, st422}},
	"DELETE /v1/task-types/{type}":        {summary: "Remove a task type's spec and operator route", ok: map[int]any{st204: nil}, errs: []int{st404}},
	"GET /v1/workflows":                   {summary: "List workflow definitions, by workflow_type", ok: map[int]any{st200: workflowList{}}},
	"POST /v1/workflows":                  {summary: "Store a workflow definition: 201, or 200 when it replaced one of its type", body: host.WorkflowDefinition{}, ok: map[int]any{st201: host.WorkflowDefinition{}, st200: host.WorkflowDefinition{}}, errs: []int{st409, st422}},
	"GET /v1/workflows/{type}":            {summary: "Get a workflow definition", ok: map[int]any{st200: host.WorkflowDefinition{}}, errs: []int{st404}},
	"POST /v1/workflows/{type}/records":   {summary: "Start a workflow record (its first state's task enqueued): 201, or 200 the tenant's existing record of that instance_key", body: workflowStartBody{}, ok: map[int]any{st201: host.WorkflowRecord{}, st200: host.WorkflowRecord{}}, errs: []int{st404, st409, st422}},
	"GET /v1/workflow-records":            {summary: "List workflow records, newest first", ok: map[int]any{st200: workflowRecordList{}}},
	"GET /v1/workflow-records/{id}":       {summary: "Get a workflow record", ok: map[int]any{st200: host.WorkflowRecord{}}, errs: []int{st404, st405}},
	"POST /v1/workflow-records/{id}":      {summary: "ID:cancel: cancel a workflow record (409 completed or canceled already)", ok: map[int]any{st200: host.WorkflowRecord{}}, errs: []int{st404, st405, st409}},
	"GET /v1/agents":                      {summary: "List the agents: agent, wallets, constitution", ok: map[int]any{st200: agentList{}}},
	"GET /v1/profiles":                    {summary: "List the subagent profiles", ok: map[int]any{st200: profileList{}}},
	"GET /v1/skills":                      {summary: "List the installed skills and their SkillManifest", ok: map[int]any{st200: skillList{}}},
	"GET /.well-known/packrun":            {summary: "The host's capabilities", ok: map[int]any{st200: capabilities{}}},
	"GET /.well-known/openwop":            {summary: "openwop discovery (no token needed): protocolVersion, limits, nodePackRuntimes.wasm (RFC 0008 §H), loaded packs, fixtures runnable here (with a valid token, also its tenant's registered definitions)", ok: map[int]any{st200: openwopDiscovery{}}},
	"POST /v1/openwop/workflows":          {summary: "Store an openwop workflow definition (openwop's published shape, or {workflowId, nodes}) whose nodes are core types or installed pack typeIds; 422 names a construct packrun cannot execute", body: anyOf{host.OpenwopDefinition{}, host.OpenwopWorkflow{}}, ok: map[int]any{st201: host.OpenwopWorkflow{}}, errs: []int{st409, st422}},
	"POST /v1/runs":                       {summary: "Start an openwop run; it executes in the background", body: runStartBody{}, ok: map[int]any{st201: runStarted{}}, errs: []int{st404, st409, st422}},
	"GET /v1/runs/{id}":                   {summary: "Get an openwop run", ok: map[int]any{st200: host.Run{}}, errs: []int{st404, st405}},
	"POST /v1/runs/{id}":                  {summary: "ID:cancel (200 the run, 409 once terminal) or ID:fork ({mode: replay, fromSeq?} → 201 a new run)", body: runActionBody{}, bodyOptional: true, ok: map[int]any{st200: host.Run{}, st201: runForked{}}, errs: []int{st404, st405, st409, st422}},
	"GET /v1/runs/{id}/events": {summary: "An openwop run's events; with Accept: text/event-stream, streamed as server-sent events until the run is terminal", ok: map[int]any{st200: runEventList{}}, errs: []int{st404},
		sse: "server-sent events: id is the event's seq (Last-Event-ID resumes after it), event its type, data the event; a comment every 15 s while idle"},
	"GET /v1/runs/{id}/events/poll":        {summary: "An openwop run's events after lastSequence (RunEventDoc), waiting up to timeout seconds for one", ok: map[int]any{st200: runEventPoll{}}, errs: []int{st404}},
	"POST /v1/runs/{id}/cancel":            {summary: "Cancel an openwop run (409 once terminal)", body: runActionBody{}, bodyOptional: true, ok: map[int]any{st200: host.Run{}}, errs: []int{st404, st409}},
	"GET /v1/openapi.json":                 {summary: "This document (no token needed)", ok: map[int]any{st200: openAPIDoc{}}},
	"GET /v1/evidence/checkpoint/cosigned": {summary: "The newest evidence log checkpoint a witness cosigned (serve --witness), with every cosignature of it, and each witness's state", ok: map[int]any{st200: CosignedCheckpoint{}}, errs: []int{st404}},

	// openwop's audit-log-integrity check (advertise.go).
	"GET /v1/audit/verify": {summary: "openwop's audit-log-integrity check: the evidence chain walked (chainValid, its first broken link as an anomaly) and the log's newest signed checkpoint", ok: map[int]any{st200: auditVerify{}}},
	// Runs waiting for a person (interrupts.go).
	// openwop's pack registry read API (openwopregistry.go).
	"GET /v1/packs/-/search": {summary: "openwop registry search: the installed packs with an openwop name whose name holds q, each at its newest version", ok: map[int]any{st200: registrySearch{}}},
	"GET /v1/packs/{name}":   {summary: "openwop registry catalog of an installed pack: its versions, downloads, digests and signer (400 invalid_pack_name, 404 pack_not_found)", ok: map[int]any{st200: registryCatalog{}}, errs: []int{st404}},
	"GET /v1/packs/{name}/-/{file}": {summary: "A file of an installed version: {version}.json its pack.json, {version}.sig its detached Ed25519 signature (404 signature_not_available), {version}.tgz its archive (X-Pack-Sha256); keychain is 404", ok: map[int]any{st200: anyObject{}}, errs: []int{st404},
		octets: "the signature (.sig) or the archive (.tgz), byte for byte as installed"},
	"POST /v1/runs/{id}/interrupts/{nodeId}": {summary: "Resolve the interrupt an openwop run waits on at nodeId ({resumeValue}; kind approval: {action}): 200 the run, running again; 404 no interrupt waits at nodeId, 409 the run does not wait", body: interruptBody{}, ok: map[int]any{st200: host.Run{}}, errs: []int{st404, st409}},
}

// queryParam describes a query parameter; ref names a shared component
// (components/parameters) instead.
type queryParam struct {
	desc       string
	schema     map[string]any
	deprecated bool
}

var (
	str  = map[string]any{"type": "string"}
	cur  = map[string]any{"type": "string", "description": "the next_cursor of the previous page"}
	lim  = map[string]any{"type": "integer", "minimum": 1}
	seqs = map[string]any{"type": "integer", "minimum": 0}
)

// sharedParams are the query parameters described once, as components,
// because several routes take them with one meaning: paging.
var sharedParams = map[string]queryParam{
	"cursor": {desc: "Where the page starts: the next_cursor of the previous page (absent: the first page). Paged lists answer next_cursor.", schema: cur},
	"limit":  {desc: "The most items a page holds; each list has its cap (a 400 over it).", schema: lim},
	"after":  {desc: "Deprecated alias of cursor: the next_after (/v1/events) or next (/v1/messages) of the previous page.", schema: seqs, deprecated: true},
}

// queryParams describes every other query parameter a route takes.
var queryParams = map[string]queryParam{
	"status":       {desc: "Only tasks in this status.", schema: str},
	"task_type":    {desc: "Only tasks of this task type.", schema: str},
	"max_attempts": {desc: "How many attempts the task gets.", schema: map[string]any{"type": "integer", "minimum": 1, "maximum": host.MaxMaxAttempts}},
	"type":         {desc: "Only items of this type.", schema: str},
	"task_id":      {desc: "Only those of this task.", schema: str},
	"since":        {desc: "Only those at or after this time (RFC 3339).", schema: str},
	"pack":         {desc: "Only those of this pack (name or name@version).", schema: str},
	"tenant":       {desc: "Only this tenant's (must be the token's own).", schema: str},
	"prefix":       {desc: "Only keys with this prefix.", schema: str},
	"ttl":          {desc: "How long the entry lives (a duration: 90s, 10m, 2h).", schema: str},
	"topic":        {desc: "Only messages whose topic matches this pattern (crisis.*).", schema: str},
	"from":         {desc: "Only messages from this sender (/v1/messages); the older log size (/v1/evidence/proof/consistency).", schema: str},
	"to":           {desc: "The newer log size (absent: the newest).", schema: map[string]any{"type": "integer", "minimum": 1}},
	"entry":        {desc: "The evidence entry: an attempt id or an event seq.", schema: str},
	"size":         {desc: "The log size the proof is against (absent: the newest).", schema: map[string]any{"type": "integer", "minimum": 1}},
	"reply_to":     {desc: "Only replies to this message id.", schema: str},
	"dead":         {desc: "true: only dead-lettered messages.", schema: map[string]any{"type": "string", "enum": []string{"true", "false"}}},
	"format":       {desc: "The format to render the document in (agent-envelope, agent-message or bus-envelope).", schema: str},
	"q":            {desc: "openwop registry search: only packs whose name holds it (case-insensitive; empty: every pack).", schema: map[string]any{"type": "string", "maxLength": maxSearchQuery}},
	"streamMode":   {desc: "With Accept: text/event-stream, which events are streamed (openwop stream-modes): updates (the default), values, messages or debug.", schema: map[string]any{"type": "string", "enum": streamModes}},
	"view":         {desc: "record: the stored MessageRecord instead of the document.", schema: map[string]any{"type": "string", "enum": []string{"record"}}},
	"lastSequence": {desc: "Only events whose sequence is over this (absent: 0, all).", schema: seqs},
	"timeout":      {desc: "Seconds to wait for an event when there is none yet and the run is not terminal (0 to 30; absent: 0).", schema: map[string]any{"type": "integer", "minimum": 0, "maximum": maxPollTimeout}},

	// GET /v1/audit/verify (advertise.go).
	"fromSeq": {desc: "The first evidence event seq of the range checked (absent: 0).", schema: map[string]any{"type": "integer", "minimum": 0}},
	"toSeq":   {desc: "The last evidence event seq of the range checked (absent: the chain's head).", schema: map[string]any{"type": "integer", "minimum": 0}},
}

// deprecatedFields are response fields kept for old clients, by the Go
// type that has them: the paging cursor is next_cursor on every paged
// route.
var deprecatedFields = map[reflect.Type][]string{
	reflect.TypeFor[eventPage]():        {"next_after"},
	reflect.TypeFor[host.MessagePage](): {"next"},
}

// commonStatuses are the refusals any route may answer: a bad query or
// body (400), no valid token (401), a token without the scope (403), a
// Host that is not a loopback name on a loopback server (421), over the
// rate (429), a host error (500), a service not configured, closing or out
// of disk space (503).
var commonStatuses = []int{400, 401, 403, 421, 429, 500, 503}

// bodyStatuses are those of any route that reads a body: over the size
// limit (413), not declared application/json (415).
var bodyStatuses = []int{413, 415}

var (
	openAPICache struct {
		once sync.Once
		doc  []byte
		err  error
	}
	openAPITypes = map[reflect.Type]*jsonschema.Schema{
		// Raw JSON is any JSON value, not the bytes' array.
		reflect.TypeFor[json.RawMessage](): {},
		reflect.TypeFor[[]byte]():          {Type: "string", ContentEncoding: "base64"},
	}
)

// OpenAPI is the OpenAPI 3.1 document of the API (GET /v1/openapi.json),
// indented JSON.
func OpenAPI() ([]byte, error) {
	openAPICache.once.Do(func() { openAPICache.doc, openAPICache.err = buildOpenAPI() })
	return openAPICache.doc, openAPICache.err
}

// openAPI is GET /v1/openapi.json.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) error {
	b, err := OpenAPI()
	if err != nil {
		return internal(err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	// The document changes only with the binary.
	h.Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return nil
}

// docPath is the OpenAPI path of a ServeMux pattern: {type...} is {type}.
func docPath(pattern string) string { return strings.ReplaceAll(pattern, "...}", "}") }

// schemaSet derives component schemas from Go types, one per named type.
type schemaSet struct {
	components map[string]any
	types      map[string]reflect.Type // component name -> its type
}

// ref is the schema of a body of Go type v: a $ref to its component.
func (ss *schemaSet) ref(v any, request bool) (map[string]any, error) {
	if alts, ok := v.(anyOf); ok {
		var refs []any
		for _, a := range alts {
			r, err := ss.ref(a, request)
			if err != nil {
				return nil, err
			}
			refs = append(refs, r)
		}
		return map[string]any{"anyOf": refs}, nil
	}
	t := reflect.TypeOf(v)
	switch t {
	case reflect.TypeFor[anyObject]():
		return map[string]any{"type": "object"}, nil
	case reflect.TypeFor[messageView]():
		rec, err := ss.ref(host.MessageRecord{}, false)
		if err != nil {
			return nil, err
		}
		return map[string]any{"anyOf": []any{rec, map[string]any{"type": "object", "description": "the document, in the format asked for"}}}, nil
	}
	name := exportedName(t.Name())
	if request {
		name += "Request"
	}
	have, ok := ss.types[name]
	if ok && have != t {
		return nil, fmt.Errorf("two types are named %s in the OpenAPI document: %s and %s", name, have, t)
	}
	if !ok {
		{
			s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: openAPITypes})
			if err != nil {
				return nil, fmt.Errorf("schema of %s: %w", t, err)
			}
			for _, f := range deprecatedFields[t] {
				if p := s.Properties[f]; p != nil {
					p.Deprecated = true
				}
			}
			if request {
				// A request's fields may be left out: the handler
				// says which it needs, naming the field.
				dropRequired(s)
			}
			var m map[string]any
			if err := remarshal(s, &m); err != nil {
				return nil, err
			}
			ss.types[name], ss.components[name] = t, m
		}
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}, nil
}

func dropRequired(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for _, p := range s.Properties {
		dropRequired(p)
	}
	dropRequired(s.Items)
	dropRequired(s.AdditionalProperties)
}

func exportedName(n string) string {
	if n == "" {
		return n
	}
	return strings.ToUpper(n[:1]) + n[1:]
}

func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// openwopErrPrefix names the error responses in openwop's envelope.
const openwopErrPrefix = "openwop_"

// buildOpenAPI builds the document from the routes' metadata and the
// operations table.
func buildOpenAPI() ([]byte, error) {
	s, _ := build(Config{})
	ss := &schemaSet{components: map[string]any{}, types: map[string]reflect.Type{}}
	errRef, err := ss.ref(errorBody{}, false)
	if err != nil {
		return nil, err
	}
	owErrRef, err := ss.ref(openwopErrorBody{}, false)
	if err != nil {
		return nil, err
	}
	paths := map[string]map[string]any{}
	described := map[string]bool{}
	for _, rt := range s.routes {
		method, pattern, _ := strings.Cut(rt, " ")
		p := docPath(pattern)
		o, ok := operations[method+" "+p]
		if !ok {
			return nil, fmt.Errorf("route %s has no entry in operations", rt)
		}
		described[method+" "+p] = true
		meta := s.meta[rt]
		if !meta.scoped {
			return nil, fmt.Errorf("route %s: its handler is not wrapped in scoped", rt)
		}
		operation := map[string]any{"summary": o.summary, "operationId": operationID(method, p)}
		switch {
		case publicRoutes[rt]:
			operation["security"] = []any{}
		default:
			scopes := []string{}
			if meta.scope != "" {
				scopes = append(scopes, string(meta.scope))
			}
			operation["security"] = []any{map[string]any{"bearer": scopes}}
		}
		var params []any
		for _, name := range pathParams(p) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": str})
		}
		for _, name := range meta.params {
			if _, ok := sharedParams[name]; ok {
				params = append(params, map[string]any{"$ref": "#/components/parameters/" + name})
				continue
			}
			q, ok := queryParams[name]
			if !ok {
				return nil, fmt.Errorf("route %s takes query parameter %q, which queryParams does not describe", rt, name)
			}
			params = append(params, paramDoc(name, q))
		}
		if params != nil {
			operation["parameters"] = params
		}
		statuses := slices.Clone(commonStatuses)
		if o.body != nil {
			b, err := ss.ref(o.body, true)
			if err != nil {
				return nil, err
			}
			operation["requestBody"] = map[string]any{"required": !o.bodyOptional, "content": map[string]any{"application/json": map[string]any{"schema": b}}}
			statuses = append(statuses, bodyStatuses...)
		}
		responses := map[string]any{}
		for st, v := range o.ok {
			r := map[string]any{"description": http.StatusText(st)}
			if v != nil {
				b, err := ss.ref(v, false)
				if err != nil {
					return nil, err
				}
				content := map[string]any{"application/json": map[string]any{"schema": b}}
				if o.plain != "" && st == st200 {
					content["text/plain; charset=utf-8"] = map[string]any{"schema": map[string]any{"type": "string", "description": o.plain}}
				}
				if o.octets != "" && st == st200 {
					content["application/octet-stream"] = map[string]any{"schema": map[string]any{"type": "string", "format": "binary", "description": o.octets}}
				}
				if o.sse != "" && st == st200 {
					content["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string", "description": o.sse}}
				}
				r["content"] = content
			}
			responses[strconv.Itoa(st)] = r
		}
		errPrefix := "" // the openwop routes answer errors in openwop's envelope (writeError)
		if openwopRoute(p) {
			errPrefix = openwopErrPrefix
		}
		for _, st := range append(statuses, o.errs...) {
			if _, ok := responses[strconv.Itoa(st)]; !ok {
				responses[strconv.Itoa(st)] = map[string]any{"$ref": "#/components/responses/" + errPrefix + strconv.Itoa(st)}
			}
		}
		operation["responses"] = responses
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		paths[p][strings.ToLower(method)] = operation
	}
	for rt := range operations {
		if !described[rt] {
			return nil, fmt.Errorf("operations has %s, which is not a route", rt)
		}
	}
	errResponses := map[string]any{}
	for _, st := range []int{400, 401, 403, 404, 405, 409, 413, 415, 421, 422, 429, 500, 503} {
		errResponses[strconv.Itoa(st)] = map[string]any{
			"description": http.StatusText(st) + ": the error envelope; code says which refusal",
			"content":     map[string]any{"application/json": map[string]any{"schema": errRef}},
		}
		errResponses[openwopErrPrefix+strconv.Itoa(st)] = map[string]any{
			"description": http.StatusText(st) + ": openwop's error envelope (on the openwop routes); error says which refusal",
			"content":     map[string]any{"application/json": map[string]any{"schema": owErrRef}},
		}
	}
	shared := map[string]any{}
	for name, q := range sharedParams {
		shared[name] = paramDoc(name, q)
	}
	var scopes []string
	for _, sc := range auth.Scopes {
		scopes = append(scopes, string(sc))
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "packrun HTTP API",
			"version": "v1",
			"description": "Every operation needs a bearer token (packrun tokens create) carrying the scope its security " +
				"requirement names; admin holds every scope but operator. A token acts for its tenant only. Errors are " +
				"{\"error\":{\"code\",\"message\",\"field\"}}, on the openwop routes (/.well-known/openwop, /v1/runs, " +
				"/v1/openwop) openwop's {\"error\",\"message\",\"details\"}. Paged lists take cursor and limit and answer next_cursor.",
		},
		"security": []any{map[string]any{"bearer": []string{}}},
		"paths":    paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{
				"type": "http", "scheme": "bearer",
				"description": "A packrun API token. Its scopes: " + strings.Join(scopes, ", ") + ".",
			}},
			"schemas":    ss.components,
			"parameters": shared,
			"responses":  errResponses,
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

func paramDoc(name string, q queryParam) map[string]any {
	p := map[string]any{"name": name, "in": "query", "description": q.desc, "schema": q.schema}
	if q.deprecated {
		p["deprecated"] = true
	}
	return p
}

// pathParams are the {names} in an OpenAPI path.
func pathParams(p string) []string {
	var names []string
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			names = append(names, seg[1:len(seg)-1])
		}
	}
	return names
}

// operationID is a unique name of an operation: get_v1_tasks_id.
func operationID(method, p string) string {
	f := func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}
	id := strings.ToLower(method) + "_" + strings.Trim(strings.Map(f, p), "_")
	for strings.Contains(id, "__") {
		id = strings.ReplaceAll(id, "__", "_")
	}
	return id
}
