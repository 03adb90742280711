package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
)

// fieldIndexStatus serves GET {scope}/.eskv/field-indexes:indexStatus: the
// fields the project declares, as a linearizable read of its declaration
// sees them, each ready or building as the projection's index of it is
// once the projector applied every write of the declaration acknowledged
// before the request (so a field declared just before reads building,
// never absent). It answers what an operator who declared a field over a
// million keys asks: whether scans of it read the index yet.
func (s *Server) fieldIndexStatus(c echo.Context, _ contract.Op, k contract.Key) error {
	if err := decide.CheckFieldIndexStatusKey(k); err != nil {
		return err
	}
	ctx := c.Request().Context()
	st, err := s.w.State(ctx, k)
	if err != nil {
		return err
	}
	where, err := s.w.AwaitProjected(ctx, k.String())
	if err != nil {
		return err
	}
	var indexed []projection.FieldIndex
	at, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		indexed, err = l.FieldIndexes(ctx, contract.ScopeOf(k.String()))
		return err
	})
	if err != nil {
		return err
	}
	ready := make(map[string]bool, len(indexed))
	for _, f := range indexed {
		ready[f.Field] = f.Ready
	}
	a, err := decide.FieldIndexStatus(k, st.Visible(s.now()), ready)
	if err != nil {
		return err
	}
	setPosition(c, at)
	return c.JSON(http.StatusOK, a)
}
