//go:build !linux

package sqlite

// threadCPU is not measured here (see threadcpu_linux.go).
func threadCPU() int64 { return 0 }
