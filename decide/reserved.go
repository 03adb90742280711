package decide

import (
	"errors"
	"slices"

	"github.com/eskv/eskv/contract"
)

// Reserved keys (contract.ReservedPath): a project's system keys live
// under <scope>/.eskv/, and the only one so far is its field-index
// declaration (contract.FieldIndexesKey), which the projector reads as
// the list of fields to index. Refusing every other write there keeps
// the path free for later system keys, and refusing anything but a plain
// put or delete of the declaration keeps its value one the projector can
// read: an increment, a patch or a collection op would make it something
// else, and a TTL would drop the project's indexes at a time nobody
// chose. A range delete removes it as any key (a delete is allowed), and
// an expireDue never concerns it (it has no TTL).

// CheckReserved refuses c when it writes under a reserved path anything
// but a put (with or without expectedVersion, without TTL or session) of
// a valid declaration or a delete of it: 400 invalid, field key (or
// value, value.fields, ttlSeconds; in a transaction, ops[i].<field>). It
// is pure and decides on the command alone.
func CheckReserved(c Command) error {
	switch c := c.(type) {
	case *KV:
		if err := checkReservedKV(c); err != nil { // a nil *contract.Error is no nil error
			return err
		}
	case *Txn:
		for i, s := range c.Steps {
			if err := checkReservedKV(s.Write); err != nil {
				return contract.InOp(i, err)
			}
		}
	case *Range:
		return nil
	default:
		if h := c.Head(); contract.IsReservedPath(h.Key.Path) {
			return reservedRefusal(h)
		}
	}
	return nil
}

// checkReservedKV is CheckReserved of one key's write.
func checkReservedKV(c *KV) *contract.Error {
	h := &c.Header
	if !contract.IsReservedPath(h.Key.Path) || c.Denied || c.Op == contract.OpCheck {
		return nil
	}
	if h.Key.Path != contract.FieldIndexesPath {
		return reservedRefusal(h)
	}
	switch c.Op {
	case contract.OpDelete:
		return nil
	case contract.OpPut, contract.OpSet, contract.OpCreate, contract.OpCAS:
	default:
		return reservedRefusal(h)
	}
	// keepTtl is taken: the declaration never has an expiry to keep
	// (client.Update writes with it).
	if c.TTLSeconds != 0 || c.Session != "" {
		return contract.FieldErrorf(contract.EInvalid, "ttlSeconds",
			"%s is the project's field-index declaration: it takes no TTL or session (a put without ttlSeconds, or a delete, changes it)", h.Key.String())
	}
	if _, err := contract.ParseFieldIndexes(c.Value); err != nil {
		var e *contract.Error
		if errors.As(err, &e) {
			return e
		}
		return contract.FieldErrorf(contract.EInvalid, "value", "%v", err)
	}
	return nil
}

// reservedRefusal refuses a write h heads under the reserved path.
func reservedRefusal(h *Header) *contract.Error {
	return contract.FieldErrorf(contract.EInvalid, "key",
		"%s lies under %s, reserved for system keys: only a put or a delete of %s (the project's field-index declaration) is taken there, not %s",
		h.Key.String(), contract.ReservedPath, contract.FieldIndexesPath, h.Op)
}

// FieldIndexStatus answers :indexStatus of k, which must be a project's
// field-index declaration (else 400 invalid, field key), from e, the
// declaration as a linearizable read sees it (nil: the project declares
// nothing), and indexed, the fields the projection holds an index of
// once it applied e, each true when ready. The answer lists the fields e
// declares, in name order: ready when the projection's index of it is,
// building otherwise, also when the projection has none yet (it has not
// applied the declaration). A field the projection indexes that e no
// longer declares is dropped, not answered; a value that is no
// declaration (written before such values were refused) declares
// nothing, as the projector reads it.
func FieldIndexStatus(k contract.Key, e *contract.Entry, indexed map[string]bool) (contract.FieldIndexStatusAnswer, error) {
	if err := CheckFieldIndexStatusKey(k); err != nil {
		return contract.FieldIndexStatusAnswer{}, err
	}
	a := contract.FieldIndexStatusAnswer{Scope: contract.ScopeOf(k.String()), Fields: []contract.FieldIndexState{}}
	if e == nil {
		return a, nil
	}
	a.Version = e.Version
	fi, err := contract.ParseFieldIndexes(e.Value)
	if err != nil {
		return a, nil
	}
	slices.Sort(fi.Fields)
	for _, f := range fi.Fields {
		state := contract.FieldIndexBuilding
		if indexed[f] {
			state = contract.FieldIndexReady
		}
		a.Fields = append(a.Fields, contract.FieldIndexState{Field: f, State: state})
	}
	return a, nil
}

// CheckFieldIndexStatusKey refuses :indexStatus of any key but a project's
// field-index declaration: 400 invalid, field key. The API checks it
// before reading anything.
func CheckFieldIndexStatusKey(k contract.Key) error {
	if !contract.IsFieldIndexesKey(k.String()) {
		return contract.FieldErrorf(contract.EInvalid, "key",
			":indexStatus reads a project's field indexes: GET /v1/kv/tenant/<t>/project/<p>/%s:indexStatus, not %s", contract.FieldIndexesPath, k.String())
	}
	return nil
}
