package writer

import "golang.org/x/sys/unix"

// leaseNow is the clock of read leases (lease.go), in nanoseconds:
// CLOCK_BOOTTIME, which, unlike the monotonic clock Go's time uses, also
// runs while the machine is suspended, so that a writer resumed from a
// suspend sees its lease as old as it is. A kernel without it (before
// 2.6.39) gets the monotonic clock throughout: the two are never mixed.
func leaseNow() int64 {
	if !hasBootClock {
		return monotonicNow()
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("writer: CLOCK_BOOTTIME failed after it worked: " + err.Error())
	}
	return ts.Nano()
}

var hasBootClock = func() bool {
	var ts unix.Timespec
	return unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil
}()
