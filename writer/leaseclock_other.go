//go:build !linux

package writer

// leaseNow is the clock of read leases (lease.go), in nanoseconds: the
// monotonic clock where CLOCK_BOOTTIME does not exist.
func leaseNow() int64 { return monotonicNow() }
