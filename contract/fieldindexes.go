package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Field indexes (docs/api.md, "Filtered scans"): a project declares the
// top-level fields its filtered scans compare, and the projection indexes
// those only. The declaration is an ordinary key of the project, its
// reserved key FieldIndexesKey, so that it is written, watched, audited,
// kept in history and rebuilt as any put is; no other event kind, handler
// or operation knows of it.

// ReservedPath is the path prefix of the system keys of a project: no
// write under it is taken but those of its reserved keys.
const ReservedPath = ".eskv/"

// FieldIndexesPath is the path of a project's field-index declaration.
const FieldIndexesPath = ReservedPath + "field-indexes"

// MaxFieldIndexes is how many fields one project may declare.
const MaxFieldIndexes = 16

// FieldIndexesKey returns the key of scope's (tenant/<t>/project/<p>)
// field-index declaration.
func FieldIndexesKey(scope string) string { return scope + "/" + FieldIndexesPath }

// IsFieldIndexesKey reports whether key (a valid key) is its scope's
// field-index declaration.
func IsFieldIndexesKey(key string) bool {
	scope := ScopeOf(key)
	return len(key) == len(scope)+1+len(FieldIndexesPath) && strings.HasSuffix(key, "/"+FieldIndexesPath)
}

// IsReservedPath reports whether path (a key's path, after its project)
// lies under ReservedPath.
func IsReservedPath(path string) bool { return strings.HasPrefix(path, ReservedPath) }

// FieldIndexes is the value of a field-index declaration.
type FieldIndexes struct {
	Fields []string `json:"fields"`
}

// ParseFieldIndexes reads and checks the value of a field-index
// declaration: an object with "fields", 0 to MaxFieldIndexes distinct
// field names (each as ValidateFieldName takes it), and nothing else. The
// error is an *Error with code invalid naming "value" or "value.fields".
func ParseFieldIndexes(value []byte) (FieldIndexes, error) {
	// A map first, so that only "fields" itself is taken (encoding/json
	// matches member names without regard to case).
	var members map[string]json.RawMessage
	var fi FieldIndexes
	err := json.Unmarshal(value, &members)
	if raw, ok := members["fields"]; err == nil && ok && len(members) == 1 && !bytes.Equal(raw, []byte("null")) {
		err = json.Unmarshal(raw, &fi.Fields)
	} else {
		err = errors.New("not a declaration")
	}
	if err != nil {
		return FieldIndexes{}, FieldErrorf(EInvalid, "value",
			`a field-index declaration is {"fields": ["<field>", ...]} and nothing else`)
	}
	if len(fi.Fields) > MaxFieldIndexes {
		return FieldIndexes{}, FieldErrorf(EInvalid, "value.fields",
			"%d fields declared; a project indexes at most %d", len(fi.Fields), MaxFieldIndexes)
	}
	seen := make(map[string]bool, len(fi.Fields))
	for _, f := range fi.Fields {
		if err := ValidateFieldName("value.fields", f); err != nil {
			return FieldIndexes{}, err
		}
		if seen[f] {
			return FieldIndexes{}, FieldErrorf(EInvalid, "value.fields", "field %q is declared twice", f)
		}
		seen[f] = true
	}
	return fi, nil
}

// The states of a declared field's index (FieldIndexState).
const (
	// FieldIndexReady: the projection holds the field's rows for every
	// key of the project; a filtered scan of it reads the index.
	FieldIndexReady = "ready"
	// FieldIndexBuilding: the field is declared, and the projector is
	// still writing the rows of the keys that existed before (or has not
	// applied the declaration yet); a filtered scan of it reads the
	// values, a budget per page.
	FieldIndexBuilding = "building"
)

// FieldIndexState is one declared field and the state of its index.
type FieldIndexState struct {
	Field string `json:"field"`
	// State is FieldIndexReady or FieldIndexBuilding.
	State string `json:"state"`
}

// FieldIndexStatusAnswer answers GET {scope}/.eskv/field-indexes:indexStatus:
// the declaration's version (0 when the project declares nothing) and
// each field it declares, in name order, with its index's state.
type FieldIndexStatusAnswer struct {
	Scope   string            `json:"scope"`
	Version int64             `json:"version"`
	Fields  []FieldIndexState `json:"fields"`
}
