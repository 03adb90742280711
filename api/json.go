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

func (jsonSerializer) Deserialize(c echo.Context, i any) error {
	return json.NewDecoder(c.Request().Body).Decode(i)
}
