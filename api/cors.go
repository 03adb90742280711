package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/eskv/eskv/contract"
)

// CORSMaxAge is how long (seconds) a browser may keep a preflight's
// answer before asking again.
const CORSMaxAge = 600

// CORSAllowedHeaders are the request headers a page of an allowed origin
// may send to /v1 (beside the CORS-safelisted ones): the bearer token,
// the JSON bodies' type, a watch's resume point and a write's directive.
var CORSAllowedHeaders = []string{"Authorization", "Content-Type", "Last-Event-ID", contract.DirectiveHeader}

// CORSExposedHeaders are the answer headers such a page may read: the
// read-your-writes position, a replayed write's mark and the back-off of
// a 429 or 503.
var CORSExposedHeaders = []string{PositionHeader, "Eskv-Replayed", "Retry-After"}

// CheckCORSOrigins reports the first of origins that is not an origin
// eskv accepts to allow: an http or https scheme and a host (with its
// port when not the scheme's), nothing else; never "*" or "null".
func CheckCORSOrigins(origins []string) error {
	var errs []error
	for _, o := range origins {
		u, err := url.Parse(o)
		switch {
		case o == "*":
			errs = append(errs, errors.New(`"*" is refused: list each origin allowed`))
		case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.Path != "" ||
			u.RawQuery != "" || u.Fragment != "" || strings.Contains(o, "*") || o != strings.ToLower(u.Scheme+"://"+u.Host):
			errs = append(errs, fmt.Errorf("%q is not an origin: want scheme://host[:port], lower case, as browsers send it (https://app.example.com)", o))
		}
	}
	return errors.Join(errs...)
}

// cors answers browsers' preflight requests (OPTIONS) to /v1 itself,
// without authentication and without reaching a handler, and marks the
// answers to the origins of Config.CORSAllowedOrigins as theirs to read.
// An origin is allowed when it is one of them exactly (no pattern); never
// with credentials (cookies): pages send the token in Authorization.
// Requests from other origins are served as any client's, without the
// headers (the browser then refuses the page the answer). nil when no
// origin is allowed: no CORS header at all.
func cors(origins []string) echo.MiddlewareFunc {
	if len(origins) == 0 {
		return nil
	}
	allowed := make(map[string]bool, len(origins))
	for _, o := range origins {
		allowed[o] = true
	}
	return middleware.CORSWithConfig(middleware.CORSConfig{
		Skipper:         func(c echo.Context) bool { return !isV1(c.Request().URL.Path) },
		AllowOriginFunc: func(origin string) (bool, error) { return allowed[origin], nil },
		AllowMethods:    []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete},
		AllowHeaders:    CORSAllowedHeaders,
		ExposeHeaders:   CORSExposedHeaders,
		MaxAge:          CORSMaxAge,
	})
}

// isV1 reports whether path is the API's (/v1 or under it).
func isV1(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }
