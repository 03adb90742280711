// Command kvstore is eskv's command-line client with the kvstore CLI
// specification's defaults: the same commands as kvctl (package
// internal/kvcli), JSON output by default, tables named as the
// specification names them (the default table aws-primitives-tool-kvstore)
// and its output shapes for get, lock check and leader check. See
// docs/kvstore.md.
package main

import (
	"github.com/eskv/eskv/internal/buildinfo"
	"github.com/eskv/eskv/internal/kvcli"
)

func main() {
	kvcli.Main(kvcli.Flavor{Name: "kvstore", Seed: true, Build: buildinfo.Get()})
}
