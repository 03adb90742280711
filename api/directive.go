package api

import (
	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// directive is the directive of the request's write: its principal's
// when the principal is named <agent>:<directive>, else its
// Eskv-Directive header's, else "" (contract.DirectiveOf). One header
// for every write op, whatever its body (a delete has none): a bad one
// is refused before anything is decided.
func directive(c echo.Context) (string, error) {
	vals := c.Request().Header.Values(contract.DirectiveHeader)
	if len(vals) > 1 {
		return "", contract.FieldErrorf(contract.EInvalid, contract.DirectiveHeader,
			"the request has %d %s headers: send at most one", len(vals), contract.DirectiveHeader)
	}
	var header string
	if len(vals) == 1 {
		header = vals[0]
	}
	return contract.DirectiveOf(principalOf(c).Name, header, len(vals) == 1)
}

// setDirective gives req, and each step of a transaction, the request's
// directive.
func setDirective(c echo.Context, req decide.Command) error {
	d, err := directive(c)
	if err != nil {
		return err
	}
	req.Head().Directive = d
	if txn, ok := req.(*decide.Txn); ok {
		for _, s := range txn.Steps {
			s.Write.Directive = d
		}
	}
	return nil
}
