package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/packs"
)

// Agent messages a node publishes: with the message_publish
// import, or in its outcome's external_messages in the publish form. Both
// go through prepareMessage (the messages grant, its topics, the task's
// profile, the format's codec) and wait in the attempt's services until
// the task completes: the queue then hands them to the store with the
// settlement (host.FinishInput.Messages), so a failed attempt publishes
// nothing.

// messagePublish serves message_publish: req is the publish form
// {"format","message","signature"?}. A refusal answers {"error":...}: a
// missing grant, a topic outside it or a profile that forbids external
// messages is access denied, any other rule of the bus or of the
// message's spec a validation error; past host.MaxPublishedMessages it is
// a capability breach.
func (s *services) messagePublish(ctx context.Context, req []byte) (abi.Status, []byte) {
	in, err := s.prepareMessage(ctx, req, orDefault(prefixed("task:", s.b.taskID), "attempt:"+s.b.attemptID))
	if err != nil {
		return publishStatus(err), mustJSON(map[string]string{"error": err.Error()})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.messages) >= host.MaxPublishedMessages {
		return abi.StatusCapabilityBreach, mustJSON(map[string]string{"error": fmt.Sprintf("an attempt publishes at most %d messages", host.MaxPublishedMessages)})
	}
	s.messages = append(s.messages, *in)
	return abi.StatusOK, mustJSON(map[string]any{"message_id": in.MessageID, "hash": in.Hash, "status": "staged", "staged": len(s.messages)})
}

// errNoMessagesGrant and errProfileForbids are the access refusals of a
// publication that are not about its topic.
var (
	errNoMessagesGrant = fmt.Errorf("%w: the pack is not granted the messages service", host.ErrAccessDenied)
	errProfileForbids  = fmt.Errorf("%w: result_policy.allow_external_messages is false for this task's profile", host.ErrAccessDenied)
)

// prepareMessage checks and decodes one publish-form request of the
// attempt, as origin: the pack needs the messages grant, the task's
// profile must allow external messages, and the topic must match one of
// the grant's topics (message.RuleTopic otherwise). Like a message from
// outside, it is checked against its sender's registered agent: a keyed
// agent's message must carry that agent's signature (a module holds no
// key, so it cannot speak for one unless it relays a message the agent
// signed), and a signature no registered key can check is refused.
func (s *services) prepareMessage(ctx context.Context, req []byte, origin string) (*host.MessageInput, error) {
	if !s.b.grants.Allows(packs.ServiceMessages) {
		return nil, errNoMessagesGrant
	}
	if !s.b.ExternalMessagesAllowed() {
		return nil, errProfileForbids
	}
	r, err := message.ParseRequest("", req)
	if err != nil {
		return nil, err
	}
	topics := s.b.grants.Topics
	if topics == nil {
		topics = []string{} // no topic granted: every topic is refused
	}
	o := message.Options{Tenant: s.b.tenant, Origin: origin, Now: time.Now(), Direction: "sent", Topics: topics}
	if s.b.backend != nil {
		o.Identity = message.AgentIdentity(s.b.backend)
	}
	return message.Prepare(ctx, r, o)
}

// publishStatus is the ABI status of a publication refused with err.
func publishStatus(err error) abi.Status {
	var re *message.RuleError
	switch {
	case errors.Is(err, host.ErrAccessDenied):
		return abi.StatusAccessDenied
	case errors.As(err, &re) && re.Rule == message.RuleTopic:
		return abi.StatusAccessDenied
	case errors.As(err, &re):
		return abi.StatusValidation
	}
	return statusOf(err)
}

// isPublishForm reports whether an external_messages entry is an agent
// message in the publish form: an object whose "format" names one of the
// bus's formats and that has a "message". Any other entry is an outbox
// message as before.
func isPublishForm(raw json.RawMessage) bool {
	var probe struct {
		Format  *string         `json:"format"`
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(raw, &probe) != nil || probe.Format == nil || probe.Message == nil {
		return false
	}
	_, ok := message.ParseFormat(*probe.Format)
	return ok
}

// publishedMessages returns the messages a completed task publishes: those
// its attempt staged with message_publish, then the publish-form entries
// of its outcome's external_messages (origin "outbox:<task id>", under the
// same grant, topics and profile). The other entries stay in the outbox
// (applyTaskOutcome). A publish-form entry that is refused, or more than
// host.MaxPublishedMessages in all, is an error naming the entry: the task
// then fails, and nothing of the attempt is applied.
func (s *services) publishedMessages(ctx context.Context, o *abi.TaskOutcome) ([]host.MessageInput, error) {
	s.mu.Lock()
	msgs := slices.Clone(s.messages)
	s.mu.Unlock()
	if o == nil {
		return msgs, nil
	}
	for i, raw := range o.ExternalMessages {
		if !isPublishForm(raw) {
			continue
		}
		if len(msgs) >= host.MaxPublishedMessages {
			return nil, fmt.Errorf("taskOutcome.external_messages[%d]: an attempt publishes at most %d messages", i, host.MaxPublishedMessages)
		}
		in, err := s.prepareMessage(ctx, raw, "outbox:"+s.b.taskID)
		if err != nil {
			return nil, fmt.Errorf("taskOutcome.external_messages[%d]: %w", i, err)
		}
		msgs = append(msgs, *in)
	}
	return msgs, nil
}

// outboxEntries returns the external_messages entries that stay in the
// outbox: those not in the publish form (publishedMessages takes those).
func outboxEntries(msgs []json.RawMessage) []json.RawMessage {
	out := slices.DeleteFunc(slices.Clone(msgs), isPublishForm)
	if len(out) == 0 {
		return nil
	}
	return out
}
