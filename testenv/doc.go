// Package testenv holds what tests share: the real services they use — a
// Kafka-protocol broker (kfake, in-process; MustBroker), Postgres
// (MustPostgres) and ClickHouse (MustClickHouse), each database fresh and
// dropped when the test ends — and the helpers around them: a
// transactional producer of events (MustProducer, MustProduce), a service
// run in the background until the test ends (RunUntilCleanup), polling a
// condition with a deadline (WaitFor, WaitForNil) and a buffer safe to
// read while it is written (Buffer). Package stack runs the whole of eskv
// in the test's process.
package testenv
