package projection

import (
	"net/url"
	"strings"
)

// WithDatabase returns the connection string u with its database replaced
// by name. u is a postgres:// URL or a keyword/value string.
func WithDatabase(u, name string) (string, error) {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		pu, err := url.Parse(u)
		if err != nil {
			return "", err
		}
		pu.Path = "/" + name
		return pu.String(), nil
	}
	return u + " dbname=" + name, nil
}
