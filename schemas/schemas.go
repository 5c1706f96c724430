// Package schemas embeds the database migrations and the JSON Schemas of the
// Kafka records (events topic, changes topic), so that the one binary
// carries everything it needs.
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

// ChangeSchema is the JSON Schema of a record on the changes topic.
//
//go:embed change.schema.json
var ChangeSchema []byte
