package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseSize parses a byte size: 65536, 64KiB, 16MiB, 1GiB, 100MB, 10kB.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9') {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 16MiB)", s)
	}
	n, err := strconv.ParseUint(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 16MiB)", s)
	}
	units := map[string]uint64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1000,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1000 * 1000,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1000 * 1000 * 1000,
	}
	mult, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (use B, KiB, MiB, GiB, KB, MB, GB)", s, t[i:])
	}
	if n > (1<<63)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
