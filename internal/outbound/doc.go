// Package outbound performs a guest's outbound HTTP request (the
// packrun:host/v1 http_request import) under the pack's http grant: it
// matches the request against the granted destinations, resolves the name
// itself and dials only an address it has checked against the refused
// ranges (so DNS rebinding cannot slip past), follows redirects only
// within the grant, enforces the byte, count and time limits, injects the
// destination's secrets on the way out and strips them from everything
// that comes back.
package outbound
