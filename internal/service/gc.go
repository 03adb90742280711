package service

import (
	"bufio"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGOGC is the GC target of the writer, the projector, the
// auditor and the dev broker when GOGC is not set: their live heaps are
// small (tens of MiB, the dev broker's a few) and almost every
// allocation dies with its request or its batch, so at Go's 100 the
// collector ran several times a second under load and took a tenth of
// each one's CPU (docs/performance.md, "Where the CPU goes"
// and "Projector and auditor"). The price is a larger heap: up to five
// times the live data. GOGC in the environment still decides.
const DefaultGOGC = 400

// DefaultMemoryLimit is the soft memory limit (runtime/debug's
// SetMemoryLimit) of a process not in a memory-limited cgroup when
// GOMEMLIMIT is not set. GOGC 400 lets the heap grow to five times the
// live data; what a writer keeps live under load — every request's body,
// listing pages, watch buffers — is bounded by its limits (docs/security.md)
// to about 200 MiB, and the soft limit makes the collector run
// before the heap passes this, however GOGC would let it grow, so that
// the process stays within the chart's 512 MiB. In a memory-limited
// cgroup (a container with a memory limit) the limit is memoryLimitShare
// of it instead.
const DefaultMemoryLimit = 320 << 20

// memoryLimitShare is the part of a cgroup's memory limit the Go heap
// may take: the rest is stacks, the runtime's own memory and slack.
const memoryLimitShare = 0.8

// SetGCDefault applies DefaultGOGC unless GOGC is set, and a soft memory
// limit (memoryLimit) unless GOMEMLIMIT is set.
func SetGCDefault(log *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGOGC)
		log.Debug("GC target set", "gogc", DefaultGOGC)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		limit, from := memoryLimit(cgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup"))
		debug.SetMemoryLimit(limit)
		log.Debug("soft memory limit set", "bytes", limit, "from", from)
	}
}

// memoryLimit is the soft memory limit for a process whose cgroup
// limits its memory to cgroup bytes (0: no limit), and where it came
// from.
func memoryLimit(cgroup int64) (int64, string) {
	if cgroup <= 0 {
		return DefaultMemoryLimit, "default"
	}
	return int64(float64(cgroup) * memoryLimitShare), "cgroup"
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup
// (v2 memory.max, or v1 memory.limit_in_bytes), read from the cgroup
// file system mounted at root; 0 when there is none or it cannot be
// read.
func cgroupMemoryLimit(selfCgroup, root string) int64 {
	f, err := os.Open(selfCgroup)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join(root, parts[2], "memory.max")
		case strings.Contains(","+parts[1]+",", ",memory,"):
			file = filepath.Join(root, "memory", parts[2], "memory.limit_in_bytes")
		default:
			continue
		}
		if n := readLimit(file); n > 0 {
			return n
		}
	}
	return 0
}

// readLimit reads a cgroup memory limit file: bytes, or "max" (none). A
// v1 "no limit" is a number near the largest int64.
func readLimit(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0
	}
	return n
}
