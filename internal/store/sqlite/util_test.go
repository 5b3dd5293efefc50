package sqlite

import (
	"context"
	"errors"
	"os"
	"strconv"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

var errCanceled = context.Canceled

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
