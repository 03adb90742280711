// Package floors holds benchmarks of the stages eskv's write path is built
// on, each alone on this machine: the broker's committed transactions,
// Postgres's batched upserts and the HTTP server's empty-handler requests.
// They are the floor each stage of eskv's own figures is compared with
// (docs/performance.md, "Floors"); run them with
//
//	go test -run '^$' -bench . -benchtime 3s ./internal/floors
package floors
