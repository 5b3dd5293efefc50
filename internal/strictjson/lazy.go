package strictjson

import (
	"regexp"
	"sync"
)

// lazyRegexp returns a function compiling expr the first time it is called.
// The package's patterns are compiled on first use rather than when the
// package is initialised: every packrun command links this package, and
// only a refusal names a field.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
