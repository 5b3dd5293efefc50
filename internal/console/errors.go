package console

import "errors"

// ErrCrossSite is why a state-changing request from another origin, or
// without the form's anti-forgery value, is refused.
var ErrCrossSite = errors.New("cross-site request refused")
