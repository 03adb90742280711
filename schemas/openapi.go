package schemas

import _ "embed"

// OpenAPI is the OpenAPI 3.1 description of the HTTP API (api/): routes,
// bodies, answers and error codes, in YAML. Its component schemas are JSON
// Schema draft 2020-12.
//
//go:embed openapi.yaml
var OpenAPI []byte
