// Command kvctl is eskv's command-line client, with eskv's own
// conventions (full keys, or a namespace tenant/<t>/project/<p>; text on a
// terminal): see docs/kvctl.md and package internal/kvcli, which it runs.
package main

import (
	"github.com/eskv/eskv/internal/buildinfo"
	"github.com/eskv/eskv/internal/kvcli"
)

func main() {
	kvcli.Main(kvcli.Flavor{Name: "kvctl", Build: buildinfo.Get()})
}
