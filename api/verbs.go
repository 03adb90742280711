package api

import (
	"strings"

	"github.com/eskv/eskv/contract"
)

// The custom methods, /v1/kv/{key}:{verb}, found by their verb: a read
// (GET) or a write (POST). The index is built once from the contract's op
// table (contract.Ops, Op.Verb, Op.Reads), so a new op with a verb needs
// no row here; verb lists keep the table's order, the order messages name
// them in.
var readVerbs, writeVerbs, verbOps = indexVerbs()

type verbKey struct {
	verb string
	read bool
}

func indexVerbs() (reads, writes []string, ops map[verbKey]contract.Op) {
	ops = map[verbKey]contract.Op{}
	for _, o := range contract.Ops() {
		v := o.Verb()
		if v == "" {
			continue
		}
		ops[verbKey{v, o.Reads()}] = o
		if o.Reads() {
			reads = append(reads, v)
		} else {
			writes = append(writes, v)
		}
	}
	return reads, writes, ops
}

// opOfVerb returns the custom method named verb: a read (GET) when read
// is set, else a write (POST).
func opOfVerb(verb string, read bool) (contract.Op, bool) {
	op, ok := verbOps[verbKey{verb, read}]
	return op, ok
}

// verbs lists the verbs of the custom reads (read set) or writes, in the
// order of the op table.
func verbs(read bool) []string {
	if read {
		return append([]string(nil), readVerbs...)
	}
	return append([]string(nil), writeVerbs...)
}

// verbList names the custom verbs of reads or writes for a message, each
// prefixed with ":" when colon is set: ":lock or :leader".
func verbList(read, colon bool) string {
	vs := verbs(read)
	if colon {
		for i := range vs {
			vs[i] = ":" + vs[i]
		}
	}
	if len(vs) < 2 {
		return strings.Join(vs, "")
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}
