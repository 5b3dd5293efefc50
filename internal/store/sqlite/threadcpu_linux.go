package sqlite

import (
	"syscall"
	"unsafe"
)

// threadCPU is the CPU time the calling OS thread has used, in
// nanoseconds (CLOCK_THREAD_CPUTIME_ID); the writer runs on a thread of its
// own, so differences of it are the writer's CPU, C code included.
func threadCPU() int64 {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}
