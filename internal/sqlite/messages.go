package sqlite

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// errBusPending: the message store is being written (issue 20).
var errBusPending = errors.New("the message bus store is not written yet")

func (s *Store) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	return nil, errBusPending
}
func (s *Store) Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error) {
	return nil, errBusPending
}
func (s *Store) ListMessages(ctx context.Context, q host.MessageQuery) (*host.MessagePage, error) {
	return nil, errBusPending
}
func (s *Store) SetPackSubscriptions(ctx context.Context, pack string, subs []host.Subscription) error {
	return errBusPending
}
func (s *Store) Subscriptions(ctx context.Context) ([]host.Subscription, error) { return nil, errBusPending }
func (s *Store) ExpireMessages(ctx context.Context, now time.Time) (int, error) {
	return 0, errBusPending
}
