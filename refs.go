package packrun

import "github.com/packrun/packrun/internal/packindex"

// ParseRef splits NAME, NAME@VERSION or NAME@RANGE (e.g. ^1.2, ~1.2.3,
// ">=1.0.0 <2.0.0", 1.x).
func ParseRef(ref string) (name, constraint string) { return packindex.ParseRef(ref) }
