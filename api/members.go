package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// checkMembers walks the valid JSON text b as it decodes into a value of
// type t and refuses what encoding/json lets through: a member named twice
// in one object (it keeps the last: {"expectedVersion":1,
// "expectedVersion":null} would be an unconditional write), and a member
// of a struct named in another case than its field ("VALUE" for "value")
// or not a field at all. path prefixes the names in errors (semantics.).
// Values of the wrong type are the decoding's to report; the members of
// json.RawMessage values are codec.CompactValue's to check.
func checkMembers(b []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	var fields map[string]reflect.Type
	switch {
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		return codec.Elements(b, func(i int, v []byte) error {
			return checkMembers(v, t.Elem(), strings.TrimSuffix(path, ".")+"["+strconv.Itoa(i)+"].")
		})
	default:
		return nil
	}
	seen := make(map[string]bool)
	return codec.Members(b, func(name string, v []byte) error {
		if seen[name] {
			return contract.FieldErrorf(contract.EInvalid, path+name, "field %q is given twice", path+name)
		}
		seen[name] = true
		var ft reflect.Type
		if fields == nil {
			ft = t.Elem()
		} else if ft = fields[name]; ft == nil {
			return unknownField(fields, path, name)
		}
		return checkMembers(v, ft, path+name+".")
	})
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// unknownField is the error for a member name that is not a field of the
// struct whose fields are given: a field's name in another case, or none.
func unknownField(fields map[string]reflect.Type, path, name string) error {
	for f := range fields {
		if strings.EqualFold(f, name) {
			return contract.FieldErrorf(contract.EInvalid, path+name, "unknown field %q (names are case-sensitive: %q)", path+name, path+f)
		}
	}
	return contract.FieldErrorf(contract.EInvalid, path+name, "unknown field %q", path+name)
}

// fieldsOf caches jsonFields per struct type.
var fieldsOf sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields returns the JSON names of a struct's fields and their types,
// as encoding/json names them (tag name, else the Go name).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsOf.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			maps.Copy(m, jsonFields(f.Type)) // promoted, as encoding/json does
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldsOf.Store(t, m)
	return m
}
