package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
)

// Error codes of the message routes.
const (
	// CodeMessageRefused (422): the message breaks a rule of its spec, of
	// the bus (format, signature) or of its sender's chain; "rule" names
	// the rule and "path" the JSON path at fault.
	CodeMessageRefused = "message_refused"
	// CodeTopicNotAllowed (403): the sender may not publish the topic
	// (its agent's messaging.topics); rule TOPIC_NOT_ALLOWED.
	CodeTopicNotAllowed = "topic_not_allowed"
)

// HeaderLostFields lists, in GET /v1/messages/{id}?format=F, the fields
// of the message that format F cannot carry ("a, b"); absent when none.
const HeaderLostFields = "Packrun-Lost-Fields"

// messageReceipt is the answer to POST /v1/messages.
type messageReceipt struct {
	// Message is the record accepted, without its document and model
	// (the caller sent the one; GET /v1/messages/{id} renders both).
	Message *host.MessageRecord `json:"message"`
	// Tasks are the subscriber tasks this request created (none for a
	// duplicate).
	Tasks     []string `json:"tasks"`
	Duplicate bool     `json:"duplicate"`
}

// postMessage is POST /v1/messages: one agent message, its format named
// by the Content-Type's profile (the body is then the document) or by the
// publish form {"format","message","signature"} → 201 accepted (with the
// tasks it created), 200 a duplicate, 422 refused by a rule, 403 a topic
// its sender may not use, 409 an id reused with other content, 413 over
// host.MaxMessageBytes.
func (s *server) postMessage(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	req, err := message.ParseRequest(r.Header.Get("Content-Type"), b)
	if err != nil {
		return messageError(err)
	}
	// The message's own event (message_accepted or message_duplicate)
	// names the caller: it is this call's audit record, in the same write,
	// instead of a separate api_call event.
	rec, err := message.Accept(r.Context(), s.cfg.Backend, req, message.Options{
		Tenant: tenantOf(r, ""), Origin: "api", By: callerOf(r), Now: time.Now(), Direction: "received",
	})
	if err != nil {
		return messageError(err)
	}
	m := *rec.Message
	m.Document, m.Model = nil, nil
	out := messageReceipt{Message: &m, Tasks: []string{}, Duplicate: rec.Duplicate}
	status := http.StatusOK
	if !rec.Duplicate {
		status = http.StatusCreated
		for _, d := range rec.Message.Deliveries {
			out.Tasks = append(out.Tasks, d.TaskID)
		}
		if len(out.Tasks) > 0 && s.cfg.Dispatcher != nil {
			s.cfg.Dispatcher.Wake()
		}
	}
	reply(w, status, out)
	return nil
}

// messageError maps a refused message to its answer: a rule of the spec,
// the bus or the chain is a 422 naming the rule and the JSON path (403
// for a topic the sender may not use, 413 for a document over the limit);
// store errors keep their usual status, a validation one becoming 422.
func messageError(err error) error {
	if re, ok := errors.AsType[*message.RuleError](err); ok {
		status, code := http.StatusUnprocessableEntity, CodeMessageRefused
		switch re.Rule {
		case message.RuleTopic:
			status, code = http.StatusForbidden, CodeTopicNotAllowed
		case message.RuleTooLarge:
			status, code = http.StatusRequestEntityTooLarge, CodeTooLarge
		}
		// A request refused before its format is known has no format
		// to name: its message starts with the path.
		ae := refuse(status, code, fieldOfPath(re.Path), oneLine(re.Error()))
		ae.detail.Path, ae.detail.Rule = re.Path, re.Rule
		return ae
	}
	ae := fromHost(err)
	if errors.Is(err, host.ErrValidation) && ae.status == http.StatusBadRequest {
		ae.status, ae.detail.Code = http.StatusUnprocessableEntity, CodeMessageRefused
		if ae.detail.Field != "" {
			ae.detail.Path = "$." + ae.detail.Field
		}
	}
	return ae
}

// fieldOfPath is a JSON path as the error envelope's field: "$.a.b" is
// "a.b", the document itself "".
func fieldOfPath(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// messagePage is the answer of GET /v1/messages: next_cursor, and next
// (the same seq as a number, deprecated).
type messagePage struct {
	*host.MessagePage
	NextCursor string `json:"next_cursor,omitempty"`
}

// listMessages is GET /v1/messages[?topic=&from=&reply_to=&dead=true&after=&limit=]:
// the tenant's accepted messages, oldest first, a page at a time.
func (s *server) listMessages(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	mq := host.MessageQuery{Tenant: tenantOf(r, ""), Topic: q.Get("topic"), From: q.Get("from"), ReplyTo: q.Get("reply_to")}
	cur, name, err := cursorParam(q, "after")
	if err != nil {
		return err
	}
	if mq.After, err = seqCursor(cur, name, 0, "an integer from 0"); err != nil {
		return err
	}
	n, err := queryInt(q.Get("limit"), "limit", 1, host.MaxMessageLimit)
	if err != nil {
		return err
	}
	mq.Limit = int(n)
	switch q.Get("dead") {
	case "", "false":
	case "true":
		mq.Dead = true
	default:
		return refuse(http.StatusBadRequest, CodeInvalid, "dead", "dead: must be true or false")
	}
	page, err := s.cfg.Backend.ListMessages(r.Context(), mq)
	if err != nil {
		return err
	}
	if page.Messages == nil {
		page.Messages = []host.MessageRecord{}
	}
	out := messagePage{MessagePage: page}
	if page.Next != 0 {
		out.NextCursor = strconv.FormatInt(page.Next, 10)
	}
	reply(w, http.StatusOK, out)
	return nil
}

// queryInt reads an optional integer query parameter in [lo, hi] (0 when
// absent).
func queryInt(v, name string, lo, hi int64) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, refuse(http.StatusBadRequest, CodeInvalid, name, fmt.Sprintf("%s: must be an integer from %d to %d", name, lo, hi))
	}
	return n, nil
}

// getMessage is GET /v1/messages/{id}[?format=F|?view=record]: the
// message's document in format F (default the one it arrived in) as the
// body, Content-Type application/json; profile=F, and the fields F cannot
// carry in Packrun-Lost-Fields; with view=record, the stored record (its
// deliveries and their tasks) as JSON.
func (s *server) getMessage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	rec, err := s.cfg.Backend.Message(r.Context(), tenantOf(r, ""), r.PathValue("id"))
	if err != nil {
		return err
	}
	switch q.Get("view") {
	case "":
	case "record":
		if q.Get("format") != "" {
			return refuse(http.StatusBadRequest, CodeInvalid, "format", "format: not with view=record (the record carries the document as accepted)")
		}
		reply(w, http.StatusOK, rec)
		return nil
	default:
		return refuse(http.StatusBadRequest, CodeInvalid, "view", "view: must be record (or left out for the document)")
	}
	format := q.Get("format")
	if format == "" {
		format = rec.Format
	}
	f, ok := message.ParseFormat(format)
	if !ok {
		return refuse(http.StatusBadRequest, CodeInvalid, "format", fmt.Sprintf("format: %q is not a message format; want %s", host.ShortName(format), formatNames()))
	}
	doc, lost, err := message.Render(rec, f)
	if err != nil {
		return messageError(err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; profile="+string(f))
	h.Set("X-Content-Type-Options", "nosniff")
	if len(lost) > 0 {
		h.Set(HeaderLostFields, strings.Join(lost, ", "))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(append(doc, '\n'))
	return nil
}

// formatNames lists the message formats: "agent-envelope, agent-message
// or bus-envelope".
func formatNames() string {
	names := make([]string, len(message.Formats))
	for i, f := range message.Formats {
		names[i] = string(f)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
