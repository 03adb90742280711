package api

import (
	"encoding/json"

	"github.com/labstack/echo/v4"
)

// jsonSerializer is echo's JSON encoding without HTML escaping, so a
// value is answered with the bytes it was stored with ("<" stays "<").
type jsonSerializer struct{}

func (jsonSerializer) Serialize(c echo.Context, i any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}

// Deserialize serves echo's Bind, which no handler calls: a body read
// through it is bounded and decoded strictly, as every other.
func (jsonSerializer) Deserialize(c echo.Context, i any) error {
	_, err := decodeBody(c, i, bodyOverheadMax)
	return err
}
