package client

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// newRequestID is a request id the caller did not give: a UUIDv7 (RFC
// 9562), 48 bits of Unix milliseconds then 74 random bits, so ids sort by
// when they were made and two clients never draw the same one. It is
// written here rather than imported so that the client needs nothing
// beyond the standard library and the contract.
func newRequestID() string { return uuidV7(time.Now()) }

func uuidV7(now time.Time) string {
	var u [16]byte
	_, _ = rand.Read(u[6:]) // crypto/rand.Read never fails (Go 1.24)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10 (RFC 9562)
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	hex.Encode(s[9:13], u[4:6])
	hex.Encode(s[14:18], u[6:8])
	hex.Encode(s[19:23], u[8:10])
	hex.Encode(s[24:], u[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
