package client

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/eskv/eskv/contract"
)

// Field indexes (docs/api.md, "Filtered scans"): a project declares the
// top-level fields its filtered scans compare in its reserved key
// contract.FieldIndexesKey(scope), value {"fields": [...]}; the
// projection indexes those, and a scan of any other field reads a
// bounded number of values per page instead. The declaration is an
// ordinary key: these methods read and write it with Get, Put and Update,
// and the rights are those of that key (a token scoped to the whole
// project has them).

// fieldIndexesSemantics are the semantics the methods write the
// declaration with.
var fieldIndexesSemantics = contract.Semantics{Purpose: "config", Producer: "eskv-client"}

// FieldIndexes returns the fields scope (tenant/<t>/project/<p>)
// declares, sorted, and the declaration's version: 0 and none when it
// declares nothing.
func (c *Client) FieldIndexes(ctx context.Context, scope string) (fields []string, version int64, err error) {
	e, err := c.Get(ctx, contract.FieldIndexesKey(scope))
	if contract.ErrorCode(err) == contract.ENotFound {
		return []string{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := contract.ParseFieldIndexes(e.Value)
	if err != nil {
		return nil, 0, err
	}
	slices.Sort(fi.Fields)
	return fi.Fields, e.Version, nil
}

// FieldIndexStatus returns the fields scope (tenant/<t>/project/<p>)
// declares, in name order, each contract.FieldIndexReady (its scans read
// the index) or contract.FieldIndexBuilding (the projector is still
// writing the rows of the keys that existed before; its scans read the
// values meanwhile), and the declaration's version (0: none). A field
// declared just before reads building, never absent.
func (c *Client) FieldIndexStatus(ctx context.Context, scope string) (contract.FieldIndexStatusAnswer, error) {
	var a contract.FieldIndexStatusAnswer
	err := c.setRead(ctx, contract.OpFieldIndexStatus, contract.FieldIndexesKey(scope), nil, &a)
	return a, err
}

// SetFieldIndexes declares exactly fields (none: nothing) for scope, as
// a compare-and-swap when expectedVersion is set (0: no declaration
// yet; the version FieldIndexes answered), so that two declarers do not
// lose each other's fields: a mismatch is contract.EConflict. It returns
// the declaration's new version.
func (c *Client) SetFieldIndexes(ctx context.Context, scope string, fields []string, expectedVersion *int64) (int64, error) {
	v, err := fieldIndexesValue(fields)
	if err != nil {
		return 0, err
	}
	res, err := c.Put(ctx, PutRequest{Key: contract.FieldIndexesKey(scope), Value: v, ExpectedVersion: expectedVersion,
		Semantics: fieldIndexesSemantics, RequestID: newRequestID()})
	if err != nil {
		return 0, err
	}
	return res.Entry.Version, nil
}

// AddFieldIndexes adds fields to scope's declaration, keeping those
// declared (a read-modify-write, Update: a concurrent declarer's change
// is never lost), and returns the fields now declared.
func (c *Client) AddFieldIndexes(ctx context.Context, scope string, fields ...string) ([]string, error) {
	return c.changeFieldIndexes(ctx, scope, func(have []string) []string { return append(have, fields...) })
}

// DropFieldIndexes removes fields from scope's declaration (as
// AddFieldIndexes adds) and returns the fields still declared.
func (c *Client) DropFieldIndexes(ctx context.Context, scope string, fields ...string) ([]string, error) {
	return c.changeFieldIndexes(ctx, scope, func(have []string) []string {
		return slices.DeleteFunc(have, func(f string) bool { return slices.Contains(fields, f) })
	})
}

// changeFieldIndexes rewrites scope's declaration with change's fields.
func (c *Client) changeFieldIndexes(ctx context.Context, scope string, change func([]string) []string) ([]string, error) {
	var out []string
	_, err := c.Update(ctx, contract.FieldIndexesKey(scope), func(cur *contract.Entry) (json.RawMessage, error) {
		var have []string
		if cur != nil {
			fi, err := contract.ParseFieldIndexes(cur.Value)
			if err != nil {
				return nil, err
			}
			have = fi.Fields
		}
		out = change(have)
		slices.Sort(out)
		out = slices.Compact(out)
		return fieldIndexesValue(out)
	}, UpdateOptions{Semantics: fieldIndexesSemantics})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fieldIndexesValue is the declaration of fields, checked as the server
// checks it.
func fieldIndexesValue(fields []string) (json.RawMessage, error) {
	if fields == nil {
		fields = []string{}
	}
	v, err := json.Marshal(contract.FieldIndexes{Fields: fields})
	if err != nil {
		return nil, err
	}
	if _, err := contract.ParseFieldIndexes(v); err != nil {
		return nil, err
	}
	return v, nil
}
