package kvcli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/buildinfo"
)

// versionAnswer is version's json output: the client's build and, unless
// --client, the server's.
type versionAnswer struct {
	Client contract.BuildInfo  `json:"client"`
	Server *contract.BuildInfo `json:"server,omitempty"`
}

func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and the server's",
		Long: `Print this command's build (release version, VCS revision, Go version)
and the server's (GET /version, which any valid token may read). --client
prints the client's alone and calls nothing; --version does the same.

When the server cannot be asked, the client's line is printed and the
command exits as any API call does (3 for a network or server error).

--format text prints "client: NAME VERSION (revision R, GOVERSION)" and
"server: ..." lines, json {"client":{"version","revision","goVersion"},
"server":{...}}, value the two versions, one a line.`,
		Example: `  kvctl version
  kvctl version --client
  kvctl version --format json | jq -r .server.version`,
		Args:        cobra.NoArgs,
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := versionAnswer{Client: a.flavor.Build}
			var err error
			if !clientOnly {
				a.subject, a.right = "the server's version", "read"
				var s contract.BuildInfo
				if s, err = a.client.ServerVersion(cmd.Context()); err == nil {
					out.Server = &s
				}
			}
			if werr := a.writeVersion(out); werr != nil {
				return werr
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client's version alone, without calling the server")
	return cmd
}

// writeVersion prints out in the format asked for.
func (a *app) writeVersion(out versionAnswer) error {
	switch a.format {
	case formatJSON:
		return writeJSON(a.stdout, out)
	case formatValue:
		fmt.Fprintln(a.stdout, out.Client.Version)
		if out.Server != nil {
			fmt.Fprintln(a.stdout, out.Server.Version)
		}
		return nil
	}
	fmt.Fprintf(a.stdout, "client: %s\n", buildinfo.Line(a.flavor.Name, out.Client))
	if out.Server != nil {
		fmt.Fprintf(a.stdout, "server: %s\n", buildinfo.Line("writer", *out.Server))
	}
	return nil
}
