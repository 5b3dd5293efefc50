package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/packrun/packrun/host"
)

// MessageReader is a Backend that reads the tenant's agent messages (the
// agent message bus): the console shows its Messages pages only when its
// Backend implements it.
type MessageReader interface {
	// Messages lists a page of the tenant's messages, oldest first; the
	// tenant argument overrides q.Tenant.
	Messages(ctx context.Context, tenant string, q host.MessageQuery) (*host.MessagePage, error)
	// Message returns one of the tenant's messages with its deliveries
	// (host.ErrNotFound for another tenant's).
	Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error)
	// RenderMessage writes rec in format ("" for its own): the document
	// and the fields format cannot carry; an error when it cannot write
	// the message at all.
	RenderMessage(rec *host.MessageRecord, format string) (doc []byte, lost []string, err error)
}

// messageFormats are the formats a message can be shown in.
var messageFormats = []string{"agent-envelope", "agent-message", "bus-envelope"}

func (s *server) messageList(w http.ResponseWriter, r *http.Request, ss *session) {
	q := r.URL.Query()
	mq := host.MessageQuery{Topic: q.Get("topic"), From: q.Get("from"), ReplyTo: q.Get("reply_to"), Dead: q.Get("dead") != ""}
	n, err := limit(r)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error())
		return
	}
	mq.Limit = n
	if v := q.Get("after"); v != "" {
		if mq.After, err = strconv.ParseInt(v, 10, 64); err != nil || mq.After < 0 {
			s.fail(w, r, ss, http.StatusBadRequest, fmt.Sprintf("after %q is not a message cursor (a sequence number).", host.ShortName(v)))
			return
		}
	}
	page, err := s.messages.Messages(r.Context(), ss.p.Tenant, mq)
	if err != nil {
		s.failErr(w, r, ss, "list messages", err)
		return
	}
	c, ok := s.counts(w, r, ss)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "messages", ss, map[string]any{"Messages": page.Messages, "Next": page.Next, "Filter": mq,
		"Total": c.Messages, "Deliveries": c.Deliveries, "Live": true})
}

func (s *server) message(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	rec, err := s.messages.Message(r.Context(), ss.p.Tenant, id)
	if err != nil {
		s.failErr(w, r, ss, "message "+host.ShortName(id), err)
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = rec.Format
	}
	data := map[string]any{"Message": rec, "Format": format, "Formats": messageFormats}
	doc, lost, err := s.messages.RenderMessage(rec, format)
	if err != nil {
		// A format that cannot carry this message is the answer asked
		// for, not a failed page.
		data["RenderError"] = err.Error()
	} else {
		data["Document"], data["Lost"] = pretty(doc), lost
	}
	s.render(w, r, http.StatusOK, "message", ss, data)
}
