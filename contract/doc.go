// Package contract is eskv's contract: the vocabulary every other package
// speaks. It holds keys and their scopes, entries, the change events of
// kv.changes and the conflicts of kv.conflicts, the operations (Op) with
// their verbs, the HTTP API's request and answer types with their limits
// and Validate methods, the filter of scans, the lock value, and the one
// Error type with its codes. It imports no adapter: no HTTP framework, no
// driver.
package contract
