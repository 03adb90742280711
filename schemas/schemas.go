// Package schemas embeds the schema files that services and tests apply:
// the Postgres migrations (goose SQL files) and, beside them, the event
// JSON Schemas.
package schemas

import "embed"

// Postgres holds the goose migrations of the projection database under
// postgres/, named NNNNN_what.sql and applied in order.
//
//go:embed postgres/*.sql
var Postgres embed.FS
