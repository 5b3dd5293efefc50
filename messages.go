package packrun

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
)

// PublishMessage accepts one agent message handed over from outside (the
// CLI, a Go program; the HTTP API does the same), recorded with origin
// ("api" when empty; the CLI says "cli"): contentType names its
// format with a profile ("application/json; profile=bus-envelope") and
// body is the document, or contentType is "" and body the publish form
// {"format":…,"message":{…},"signature":"…"}. The message is decoded and
// checked by its spec's rules, its signature verified where its sender is
// a registered agent with a key, and it is accepted as
// host.Messages.PublishMessage says: one task per subscribed node. A
// refusal is a *message.RuleError naming the JSON path and the rule, or a
// host error (the chain: validation; a reused id: conflict).
func (h *Host) PublishMessage(ctx context.Context, tenant, origin, contentType string, body []byte) (*host.MessageReceipt, error) {
	if origin == "" {
		origin = "api"
	}
	r, err := message.ParseRequest(contentType, body)
	if err != nil {
		return nil, err
	}
	rec, err := message.Accept(ctx, h.limited, r, message.Options{Tenant: tenant, Origin: origin, Now: time.Now(), Direction: "received"})
	if err != nil {
		return nil, err
	}
	if !rec.Duplicate && len(rec.Message.Deliveries) > 0 {
		h.wake()
	}
	return rec, nil
}

// RenderedMessage is a stored message written in one format.
type RenderedMessage struct {
	Record *host.MessageRecord `json:"record"`
	Format string              `json:"format"`
	// Document is the message in Format; Lost lists the fields Format
	// cannot carry (empty in the message's own format).
	Document []byte   `json:"-"`
	Lost     []string `json:"lost,omitempty"`
}

// Message returns one accepted message rendered in format ("" for the
// format it arrived in).
func (h *Host) Message(ctx context.Context, tenant, id, format string) (*RenderedMessage, error) {
	rec, err := h.store.Message(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return RenderMessage(rec, format)
}

// RenderMessage renders rec in format ("" for its own).
func RenderMessage(rec *host.MessageRecord, format string) (*RenderedMessage, error) {
	if format == "" {
		format = rec.Format
	}
	f, ok := message.ParseFormat(format)
	if !ok {
		return nil, &message.RuleError{Path: "format", Rule: message.RuleFormat, Reason: "unknown format " + format + ": want agent-envelope, agent-message or bus-envelope"}
	}
	doc, lost, err := message.Render(rec, f)
	if err != nil {
		return nil, err
	}
	return &RenderedMessage{Record: rec, Format: format, Document: doc, Lost: lost}, nil
}

// Messages lists accepted messages (host.MessageQuery).
func (h *Host) Messages(ctx context.Context, q host.MessageQuery) (*host.MessagePage, error) {
	return h.store.ListMessages(ctx, q)
}

// Subscriptions lists the installed nodes' topic subscriptions.
func (h *Host) Subscriptions(ctx context.Context) ([]host.Subscription, error) {
	return h.store.Subscriptions(ctx)
}
