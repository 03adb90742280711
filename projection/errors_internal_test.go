package projection

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eskv/eskv/contract"
)

// TestTranslateHidesDriverErrors: an answer made of a translated driver
// error names no host, user or database and quotes no input; the error's
// text, for the logs, keeps them.
func TestTranslateHidesDriverErrors(t *testing.T) {
	t.Parallel()
	_, connErr := pgx.Connect(context.Background(), "postgres://secretuser@127.0.0.1:1/secretdb?connect_timeout=2")
	if connErr == nil {
		t.Fatal("connected to port 1")
	}
	for _, tc := range []struct {
		name string
		err  error
		code string
	}{
		{"OKConnectError", connErr, contract.EUnavailable},
		{"OKRetriable", &pgconn.PgError{Code: "57P01", Message: "terminating connection of secretuser"}, contract.EUnavailable},
		// Apply gives up after its own retries when declarations keep
		// changing under it (another projector after a rebalance): the
		// projector retries later, it does not stop.
		{"OKDeclarationsChanged", &pgconn.PgError{Code: errDeclarationsChanged, Message: "field index declarations of secretdb changed"}, contract.EUnavailable},
		{"OKOther", &pgconn.PgError{Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0x00 secretdb`}, contract.EInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := translate("list", tc.err)
			if got := contract.ErrorCode(err); got != tc.code {
				t.Fatalf("code %s, want %s (%v)", got, tc.code, err)
			}
			e, _ := errors.AsType[*contract.Error](err)
			d := e.Detail()
			for _, secret := range []string{"secretuser", "secretdb", "127.0.0.1", "postgres", "0x00"} {
				if strings.Contains(d.Message, secret) {
					t.Errorf("answer %q tells %q", d.Message, secret)
				}
			}
			if !strings.Contains(err.Error(), "secret") {
				t.Errorf("the log text %q lost the driver error", err.Error())
			}
		})
	}
}
