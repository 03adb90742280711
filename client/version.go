package client

import (
	"context"
	"net/http"

	"github.com/eskv/eskv/contract"
)

// ServerVersion returns the server's build (GET /version): its release
// version, VCS revision and Go version. Any valid token may read it; it
// is retried like Get.
func (c *Client) ServerVersion(ctx context.Context) (contract.BuildInfo, error) {
	var b contract.BuildInfo
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/version", retry: true}, &b)
	return b, err
}
