package service

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// DefaultGOGC is the GC target of the writer, the projector and the
// auditor when GOGC is not set: their live heaps are small (tens of MiB)
// and almost every allocation dies with its request or its batch, so at
// Go's 100 the collector ran several times a second under load and took
// a tenth of each one's CPU (docs/performance.md, "Where the CPU goes"
// and "Projector and auditor"). The price is a larger heap: up to five
// times the live data. GOGC in the environment still decides.
const DefaultGOGC = 400

// SetGCDefault applies DefaultGOGC unless GOGC is set.
func SetGCDefault(log *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(DefaultGOGC)
	log.Debug("GC target set", "gogc", DefaultGOGC)
}
