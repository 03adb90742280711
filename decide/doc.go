// Package decide holds eskv's write rules, pure: given what a write reads
// (its key's state, earlier uses of its requestId, the element rows it
// names) it decides the events to append, the answer, or the refusal and
// the conflict record. It knows no Kafka, no Postgres and no HTTP: it
// imports only the standard library, contract and two stdlib-only
// packages of the projection's vocabulary, projection/keystate (the key
// state it decides on) and projection/elemkey (element members).
//
// Each op family is a Command (command.go): KV writes (put, delete,
// expire, increment, patch), locks and leaderships, queues, lists, sets
// and transactions. A command says what it reads (Plan before its batch
// reads anything, Row once its key's state is known) and decides on an
// Input under an Env (the decision time, the owner's epoch, the
// remembering windows). The writer runs every command alike: plan all,
// read once, decide each, commit. A new collection type is a new
// command here, not a change of the writer.
package decide
