package schemas

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Events holds the JSON Schemas (draft 2020-12) of the Kafka record values:
// events/change.v1.json for kv.changes and events/conflict.v1.json for
// kv.conflicts. They are the contract with downstream consumers and change
// only additively.
//
//go:embed events/*.json
var Events embed.FS

// The $id of each event schema. ChangeSchemaID is also the ce_dataschema
// header of every kv.changes record, ConflictSchemaID that of every
// kv.conflicts record.
const (
	ChangeSchemaID   = "https://eskv.io/schemas/events/change.v1.json"
	ConflictSchemaID = "https://eskv.io/schemas/events/conflict.v1.json"
)

type eventSchemas struct {
	change, conflict *jsonschema.Schema
}

// compiledEvents compiles the embedded schemas on first use; validation
// after that only decodes and walks the document.
var compiledEvents = sync.OnceValues(func() (*eventSchemas, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, err := fs.Glob(Events, "events/*.json")
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		b, err := Events.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		obj, _ := doc.(map[string]any)
		id, _ := obj["$id"].(string)
		if id == "" {
			return nil, fmt.Errorf("schema %s has no $id", name)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	var s eventSchemas
	if s.change, err = c.Compile(ChangeSchemaID); err != nil {
		return nil, fmt.Errorf("compile %s: %w", ChangeSchemaID, err)
	}
	if s.conflict, err = c.Compile(ConflictSchemaID); err != nil {
		return nil, fmt.Errorf("compile %s: %w", ConflictSchemaID, err)
	}
	return &s, nil
})

// ValidateChange reports whether b, a kv.changes record value, is a valid
// change event under change.v1.json. The error names every violation.
// Rules the schema cannot express (version > prevVersion, scope is the
// key's prefix) are not checked here.
func ValidateChange(b []byte) error {
	s, err := compiledEvents()
	if err != nil {
		return err
	}
	return validate(s.change, "change event", b)
}

// ValidateConflict reports whether b, a kv.conflicts record value, is a
// valid conflict record under conflict.v1.json.
func ValidateConflict(b []byte) error {
	s, err := compiledEvents()
	if err != nil {
		return err
	}
	return validate(s.conflict, "conflict record", b)
}

func validate(sch *jsonschema.Schema, what string, b []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s is not JSON: %w", what, err)
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("%s does not match %s: %w", what, sch.Location, err)
	}
	return nil
}
