package decide

import (
	"errors"

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
