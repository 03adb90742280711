// Package contract is eskv's contract: the vocabulary the server and its
// clients share, and only that. It holds keys and their scopes, entries,
// the change events of kv.changes (the schema downstream Kafka consumers
// read) and the watch cursors, the operations (Op) with their verbs, the
// HTTP API's request and answer types with their limits and Validate
// methods, the filter operators of scans, and the one Error type with its
// codes. What only the server uses lives with the server: the key's state
// (projection/keystate), conflict records, lock values and queue item
// states (decide), the partitioner (changelog). It imports no adapter: no
// HTTP framework, no driver.
package contract
