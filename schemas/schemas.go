// Package schemas embeds the database migrations and the JSON Schema of the
// Kafka message, so that the one binary carries everything it needs.
package schemas

import "embed"

// Migrations holds goose migrations, applied by `hookyard migrate`.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// MessageSchema is the JSON Schema of a message on the events topic.
//
//go:embed message.schema.json
var MessageSchema []byte
