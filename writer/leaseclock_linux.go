package writer

import "golang.org/x/sys/unix"

// leaseNow is the clock of read leases (lease.go), in nanoseconds:
// CLOCK_BOOTTIME, which, unlike the monotonic clock Go's time uses, also
// runs while the machine is suspended, so that a writer resumed from a
// suspend sees its lease as old as it is.
func leaseNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return monotonicNow() // not on this kernel: the monotonic clock
	}
	return ts.Nano()
}
