package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
)

func (a *app) messagesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "messages",
		Short: "Agent messages on the bus: send, list, show, tail, subscriptions, keys and signatures",
		Long: `The bus carries the agent messages of the three message specs (BlackRoad envelope, AgentOS, AICO) in three formats:

  agent-envelope   the BlackRoad envelope schema's envelope (ULID id, agent:// URIs, intent, prev_truth_state, signature)
  agent-message    the AgentOS message schema's AgentMessage ({agentId, instanceId} routing, eleven types, evidence)
  bus-envelope     the AICO message formats' metadata + payload (crisis.detection, agency.initiative, ...)

An accepted message creates one task per installed node that subscribes to its
topic (the manifest's subscriptions, e.g. "crisis.*"); a message resent with the
same id creates nothing. A message from a registered agent with a
messaging.public_key must carry an Ed25519 signature over its canonical form
(JCS without signature). A message with a prev_truth_state must name the hash
of its sender's previous accepted message (a gap or a fork is refused), and a
sender that chains must keep doing so. A message is at most 256 KiB.

The same surface over HTTP: POST /v1/messages, GET /v1/messages,
GET /v1/messages/{id}?format=F (scopes messages:write, messages:read).`,
	}
	cmd.AddCommand(a.messagesSendCommand(), a.messagesListCommand(), a.messagesShowCommand(), a.messagesTailCommand(),
		a.messagesSubscriptionsCommand(), a.messagesKeygenCommand(), a.messagesSignCommand())
	return cmd
}

// messageFormats are the formats --format takes.
var messageFormats = []string{"agent-envelope", "agent-message", "bus-envelope"}

// checkFormat refuses a --format that names no format ("" is none).
func checkFormat(f string) error {
	if f == "" || slices.Contains(messageFormats, f) {
		return nil
	}
	return usageError("--format %q: want %s", f, strings.Join(messageFormats, ", "))
}

// maxMessageFileBytes bounds a message file: one message and its publish
// form's wrapper.
const maxMessageFileBytes = host.MaxMessageBytes + 8<<10

// readMessageFile reads FILE ("-": standard input).
func (a *app) readMessageFile(path string) ([]byte, error) {
	if path != "-" {
		return packrun.ReadFile(path, maxMessageFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, maxMessageFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMessageFileBytes {
		return nil, usageError("standard input: larger than %d bytes", maxMessageFileBytes)
	}
	return b, nil
}

func (a *app) messagesSendCommand() *cobra.Command {
	var format, signature string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "send FILE [--format F] [--signature SIG] [--json]",
		Short: "Publish one message (FILE, or - for standard input)",
		Long: `Publish one message. With --format, FILE is the message document in that format;
without it, FILE is the publish form {"format":F,"message":{...},"signature":"..."}.
The format is never guessed. --signature carries the signature of a format that has
no field for one (agent-message, bus-envelope); see packrun messages sign.

Prints the message's id, topic and the tasks it created; a message sent before
creates nothing and says so. A message its spec's rules, its signature, its
sender's chain or its topic refuse exits 5 with one line naming the JSON path
and the rule.`,
		Example: `  packrun messages send crisis.json --format bus-envelope
  packrun messages send signed-envelope.json --format agent-envelope
  packrun messages sign query.json --format agent-message --key arc.key > query.signed.json
  packrun messages send query.signed.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			b, err := a.readMessageFile(args[0])
			if err != nil {
				return err
			}
			contentType, body, err := publishBody(format, signature, b)
			if err != nil {
				return err
			}
			return a.withHost(cmd, readWrite, func(h *packrun.Host) error {
				rec, err := h.PublishMessage(cmd.Context(), host.DefaultTenant, "cli", contentType, body)
				if err != nil {
					return messageRefusal(err)
				}
				if asJSON {
					return a.emit(rec)
				}
				m := rec.Message
				if rec.Duplicate {
					fmt.Fprintf(a.stdout, "duplicate %s: accepted before (seq %d); nothing created\n", m.MessageID, m.Seq)
					return nil
				}
				fmt.Fprintf(a.stdout, "accepted %s (%s, topic %s, from %s, seq %d): %s\n", m.MessageID, m.Format, m.Topic, m.Sender, m.Seq, deliverySummary(m.Deliveries))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "FILE is the document in this format: agent-envelope, agent-message or bus-envelope")
	cmd.Flags().StringVar(&signature, "signature", "", "the message's base64 Ed25519 signature (with --format)")
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// messageRefusal is the error of a refused message: exit 5 with one line
// naming the path and the rule (a request refused before its format is
// known has no format to name first); a chain refusal (validation) exits
// 5 too.
func messageRefusal(err error) error {
	if re, ok := errors.AsType[*message.RuleError](err); ok && re.Format == "" {
		return withCode(exitRefused, errors.New(re.Error()))
	}
	if errors.Is(err, host.ErrValidation) && !isRuleError(err) {
		return withCode(exitRefused, err)
	}
	return err
}

// publishBody is the request PublishMessage reads: the document with a
// profile naming its format, the publish form built around it when a
// signature travels beside it, or FILE itself as the publish form.
func publishBody(format, signature string, file []byte) (contentType string, body []byte, err error) {
	switch {
	case format == "" && signature != "":
		return "", nil, usageError("--signature needs --format (the publish form carries its own signature field)")
	case format == "":
		return "", file, nil
	case signature == "":
		return "application/json; profile=" + format, file, nil
	}
	if !json.Valid(file) {
		return "", nil, withCode(exitRefused, fmt.Errorf("%s: not valid JSON", format))
	}
	body, err = json.Marshal(packrun.SignedMessage{Format: format, Message: file, Signature: signature})
	return "", body, err
}

// deliverySummary says which tasks a message created.
func deliverySummary(ds []host.Delivery) string {
	if len(ds) == 0 {
		return "no subscriber"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Subscriber + " → task " + d.TaskID
	}
	return strings.Join(parts, ", ")
}

// messageFilter holds the filters list and tail share.
type messageFilter struct {
	topic, from, replyTo string
	dead                 bool
}

func (f *messageFilter) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.topic, "topic", "", "only topics matching this pattern (crisis.*, llm.#...)")
	cmd.Flags().StringVar(&f.from, "from", "", "only this sender's messages")
	cmd.Flags().StringVar(&f.replyTo, "reply-to", "", "only the replies to this message id")
	cmd.Flags().BoolVar(&f.dead, "dead", false, "only messages with a dead-lettered delivery (ttl ran out)")
}

func (f *messageFilter) query(after int64, limit int) host.MessageQuery {
	return host.MessageQuery{Tenant: host.DefaultTenant, Topic: f.topic, From: f.from, ReplyTo: f.replyTo, Dead: f.dead, After: after, Limit: limit}
}

func (a *app) messagesListCommand() *cobra.Command {
	var f messageFilter
	var after int64
	var cursor string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--topic P] [--from S] [--reply-to ID] [--dead] [--cursor C] [--limit N] [--output F]",
		Short: "List accepted messages, oldest first, a page at a time",
		Long: `List accepted messages, oldest first. SEQ is the cursor: when a page is full, the
last line says which --cursor gives the next one (--json: {"messages":[...],"next_cursor":"C"}).
--after N is a deprecated alias of --cursor N.`,
		Example: `  packrun messages list --topic 'crisis.*'
  packrun messages list --from arc --cursor 120 --limit 20 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > host.MaxMessageLimit {
				return usageError("--limit %d: must be from 1 to %d", limit, host.MaxMessageLimit)
			}
			if after < 0 {
				return usageError("--after %d: must not be negative", after)
			}
			if cursor != "" {
				if cmd.Flags().Changed("after") {
					return usageError("--after is a deprecated alias of --cursor: give only --cursor")
				}
				var err error
				if after, err = seqCursor(cursor); err != nil {
					return err
				}
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				page, err := h.Messages(cmd.Context(), f.query(after, limit))
				if err != nil {
					return err
				}
				if asJSON {
					if page.Messages == nil {
						page.Messages = []host.MessageRecord{}
					}
					out := struct {
						*host.MessagePage
						NextCursor string `json:"next_cursor,omitempty"`
					}{MessagePage: page}
					if page.Next != 0 {
						out.NextCursor = strconv.FormatInt(page.Next, 10)
					}
					return a.emit(out)
				}
				w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, messageHeader)
				for i := range page.Messages {
					fmt.Fprintln(w, messageLine(&page.Messages[i]))
				}
				if err := w.Flush(); err != nil {
					return err
				}
				if page.Next != 0 {
					a.more(strconv.FormatInt(page.Next, 10))
				}
				return nil
			})
		},
	}
	f.flags(cmd)
	cursorVar(cmd.Flags(), &cursor)
	cmd.Flags().Int64Var(&after, "after", 0, "deprecated: --cursor")
	_ = cmd.Flags().MarkHidden("after") // fails only for an undefined flag: defined just above
	cmd.Flags().IntVar(&limit, "limit", host.DefaultMessageLimit, "at most this many")
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

const messageHeader = "SEQ\tACCEPTED\tFORMAT\tTOPIC\tFROM\tID\tTASKS"

// messageLine is one message as list and tail print it.
func messageLine(m *host.MessageRecord) string {
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%d", m.Seq, m.AcceptedAt.Local().Format(time.DateTime), m.Format, m.Topic, m.Sender, m.MessageID, len(m.Deliveries))
}

// shownMessage is show's --json: the record, and the document in the
// format asked for with what that format cannot carry.
type shownMessage struct {
	Record   *host.MessageRecord `json:"record"`
	Format   string              `json:"format"`
	Document json.RawMessage     `json:"document"`
	Lost     []string            `json:"lost"`
}

func (a *app) messagesShowCommand() *cobra.Command {
	var format string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID [--format F] [--json]",
		Short: "Print one message's document, in its own format or another",
		Long: `Print the message's document, indented: in the format it arrived in, or in --format
(agent-envelope, agent-message, bus-envelope) as far as that format can carry it.
What it cannot carry is listed on standard error ("lost in F: ..."), never dropped
silently. --json prints {"record" (with its deliveries and their tasks), "format",
"document", "lost"}.`,
		Example: `  packrun messages show 01ARZ3NDEKTSV4RRFFQ69G5FAV
  packrun messages show 01ARZ3NDEKTSV4RRFFQ69G5FAV --format agent-message`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				m, err := h.Message(cmd.Context(), host.DefaultTenant, args[0], format)
				if err != nil {
					return err
				}
				if asJSON {
					lost := m.Lost
					if lost == nil {
						lost = []string{}
					}
					return a.emit(shownMessage{Record: m.Record, Format: m.Format, Document: m.Document, Lost: lost})
				}
				var buf bytes.Buffer
				if err := json.Indent(&buf, m.Document, "", "  "); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, buf.String())
				if len(m.Lost) > 0 {
					fmt.Fprintf(a.stderr, "lost in %s: %s\n", m.Format, strings.Join(m.Lost, ", "))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "render in this format: agent-envelope, agent-message or bus-envelope (default: its own)")
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) messagesTailCommand() *cobra.Command {
	var f messageFilter
	var interval time.Duration
	var after int64
	var max int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tail [--topic P] [--from S] [--interval D] [--after N] [--json]",
		Short: "Print messages as they are accepted, until interrupted",
		Long: `Print each message as it is accepted (polling the store every --interval), until
interrupted. It starts with the messages accepted from now on, or after the
cursor --after N (0: every message from the first).`,
		Example: `  packrun messages tail --topic 'crisis.*'
  packrun messages tail --after 0 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usageError("--interval %s: must be positive", interval)
			}
			if after < 0 {
				return usageError("--after %d: must not be negative", after)
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				ctx := cmd.Context()
				if !cmd.Flags().Changed("after") {
					var err error
					if after, err = lastSeq(ctx, h, f); err != nil {
						return err
					}
				}
				// Lines go out as they come: columns separated by two
				// spaces rather than aligned.
				if !asJSON {
					fmt.Fprintln(a.stdout, strings.ReplaceAll(messageHeader, "\t", "  "))
				}
				print := func(m *host.MessageRecord) error {
					if asJSON {
						return a.emit(m)
					}
					_, err := fmt.Fprintln(a.stdout, strings.ReplaceAll(messageLine(m), "\t", "  "))
					return err
				}
				return tailMessages(ctx, h, f, after, interval, max, print)
			})
		},
	}
	f.flags(cmd)
	durationVar(cmd.Flags(), &interval, "interval", time.Second, "how often to look for new messages")
	cmd.Flags().Int64Var(&after, "after", 0, "start after this SEQ instead of now")
	cmd.Flags().IntVar(&max, "max", 0, "stop after this many messages (0: never)")
	_ = cmd.Flags().MarkHidden("max") // fails only for an undefined flag: defined just above
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// lastSeq is the cursor of the last message f selects (0: none).
func lastSeq(ctx context.Context, h *packrun.Host, f messageFilter) (int64, error) {
	var after int64
	for {
		page, err := h.Messages(ctx, f.query(after, host.MaxMessageLimit))
		if err != nil {
			return 0, err
		}
		if n := len(page.Messages); n > 0 {
			after = page.Messages[n-1].Seq
		}
		if page.Next == 0 {
			return after, nil
		}
	}
}

// tailMessages prints the messages after the cursor as they arrive, every
// interval, until ctx ends (nil then) or max have been printed.
func tailMessages(ctx context.Context, h *packrun.Host, f messageFilter, after int64, interval time.Duration, max int, print func(*host.MessageRecord) error) error {
	printed := 0
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		page, err := h.Messages(ctx, f.query(after, host.MaxMessageLimit))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for i := range page.Messages {
			if err := print(&page.Messages[i]); err != nil {
				return err
			}
			after = page.Messages[i].Seq
			if printed++; max > 0 && printed >= max {
				return nil
			}
		}
		if page.Next != 0 {
			continue // a full page: read on without waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *app) messagesSubscriptionsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "subscriptions [--json]",
		Short: "List the installed nodes' topic subscriptions (what an accepted message reaches)",
		Long: `List every installed node that subscribes to topics (its manifest's subscriptions),
with the task type its deliveries run as.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				subs, err := h.Subscriptions(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if subs == nil {
						subs = []host.Subscription{}
					}
					return a.emit(subs)
				}
				w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "PACK\tNODE\tTASK TYPE\tTOPICS")
				for _, s := range subs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Pack, s.Node, s.TaskType, strings.Join(s.Topics, ", "))
				}
				return w.Flush()
			})
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) messagesKeygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out PREFIX",
		Short: "Generate an agent's Ed25519 messaging key: PREFIX.key (0600), PREFIX.pub, and print its public_key",
		Long: `Generate an Ed25519 key pair for an agent's messages: PREFIX.key (PEM PKCS#8, mode
0600) signs them (packrun messages sign), and the public half, printed as
"ed25519:<base64>", goes into the agent FILE's messaging.public_key
(packrun agents add FILE). Existing files are never overwritten.`,
		Example: `  packrun messages keygen --out arc
  # then, in arc's agent file: "messaging": {"public_key": "ed25519:…", "topics": ["ops.*"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError("messages keygen needs --out PREFIX")
			}
			pub, err := packrun.GenerateMessageKey(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "wrote %s.key and %s.pub; the agent's messaging.public_key:\n", out, out)
			fmt.Fprintln(a.stdout, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "path prefix of the key files (required)")
	return cmd
}

func (a *app) messagesSignCommand() *cobra.Command {
	var key, format string
	cmd := &cobra.Command{
		Use:   "sign FILE --key KEYFILE [--format F]",
		Short: "Sign a message with an agent's Ed25519 key (the JCS form without signature)",
		Long: `Sign the message in FILE (- for standard input) with KEYFILE (packrun messages
keygen's PREFIX.key). A BlackRoad envelope (--format agent-envelope, the default) is
printed with its signature property set, ready for messages send --format
agent-envelope. The other formats have no signature field: their document is
printed in the publish form {"format","message","signature"}, ready for messages
send FILE.`,
		Example: `  packrun messages sign envelope.json --key arc.key > signed.json
  packrun messages send signed.json --format agent-envelope`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usageError("messages sign needs --key KEYFILE")
			}
			if err := checkFormat(format); err != nil {
				return err
			}
			b, err := a.readMessageFile(args[0])
			if err != nil {
				return err
			}
			priv, err := packrun.LoadMessageKey(key)
			if err != nil {
				return err
			}
			signed, err := packrun.SignMessage(priv, format, b)
			if err != nil {
				return err
			}
			if format == "agent-envelope" {
				_, err = fmt.Fprintln(a.stdout, string(signed.Message))
				return err
			}
			return a.emit(signed)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the Ed25519 private key file (required)")
	cmd.Flags().StringVar(&format, "format", "agent-envelope", "the format of FILE: agent-envelope, agent-message or bus-envelope")
	return cmd
}
