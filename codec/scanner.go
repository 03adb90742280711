package codec

// Scanner is the package's scanner for readers of JSON with rules of
// their own (the projector's field derivation follows Postgres's jsonb):
// it reads the tokens of JSON text and checks their syntax as
// encoding/json does, and the reader decides what the tokens mean and
// how deep it follows them. The zero Scanner reads nothing; Reset gives
// it a text. It allocates nothing unless a token is malformed.
type Scanner struct{ s scanner }

// Reset makes the scanner read b from its start.
func (x *Scanner) Reset(b []byte) { x.s = scanner{b: b} }

// Offset is where the scanner is in the text.
func (x *Scanner) Offset() int { return x.s.i }

// Peek skips whitespace and returns the next byte, 0 at the end.
func (x *Scanner) Peek() byte { return x.s.peek() }

// Next skips whitespace and consumes c when it is the next byte,
// reporting whether it was.
func (x *Scanner) Next(c byte) bool {
	if x.s.peek() != c || x.s.i >= len(x.s.b) {
		return false
	}
	x.s.i++
	return true
}

// ReadString skips whitespace and reads a string ('"' next), returning
// its bytes between the quotes; plain when they are its value (no escape,
// valid UTF-8). Escapes are checked, not resolved; a control character
// is an error.
func (x *Scanner) ReadString() (raw []byte, plain bool, err error) {
	if x.s.peek() != '"' {
		return nil, false, x.s.errAt("looking for beginning of string")
	}
	return x.s.str()
}

// ReadNumber skips whitespace and reads a number in JSON's grammar,
// returning its bytes.
func (x *Scanner) ReadNumber() ([]byte, error) {
	if c := x.s.peek(); c != '-' && (c < '0' || c > '9') {
		return nil, x.s.errAt("looking for beginning of number")
	}
	return x.s.number()
}

// ReadLiteral skips whitespace and reads lit (true, false or null).
func (x *Scanner) ReadLiteral(lit string) error {
	x.s.peek()
	return x.s.literal(lit)
}
