package sqlite

import "github.com/packrun/packrun/internal/store/storecore"

// Sentinels of secret memory values (see secrets.go). The store's other
// errors are host.Error values matching the host package's sentinels; these
// are their cause, under host.Wrap.
var (
	// ErrSecretKey: the secret key file (Options.SecretKeyFile) is missing,
	// unreadable or malformed, or holds another key than the one a value
	// was sealed with. The message names the file and what to do.
	ErrSecretKey = storecore.ErrSecretKeyFile
	// ErrSecretAltered: a sealed secret value fails authentication under
	// the key it was sealed with: it was altered, or copied from another
	// entry.
	ErrSecretAltered = storecore.ErrSecretAltered
)
