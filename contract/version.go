package contract

// BuildInfo names a build of eskv: its release version (v1.2.3, or
// "unknown" for a build that was not stamped), the VCS revision it was
// built from and the Go version. GET /version answers the server's
// (schemas/openapi.yaml); every binary's --version prints its own.
type BuildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
}
