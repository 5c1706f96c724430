// Package containertest starts a real PostgreSQL and a real Kafka (KRaft) in
// Docker through testcontainers-go. Where no Docker engine answers, the test
// is skipped with a message that says so; every scenario that uses it also
// runs against the local Postgres and the in-process kfake broker, so the
// behaviour is still checked on such machines.
package containertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/kafka"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Images used; pinned so runs are repeatable.
const (
	PostgresImage = "postgres:16-alpine"
	KafkaImage    = "confluentinc/confluent-local:7.6.1"
)

// RequireDocker skips t when no Docker engine is reachable.
func RequireDocker(t *testing.T) {
	t.Helper()
	testcontainers.SkipIfProviderIsNotHealthy(t)
}

// Postgres starts a PostgreSQL container and returns its URL.
func Postgres(t *testing.T) string {
	t.Helper()
	RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := postgres.Run(ctx, PostgresImage, postgres.WithDatabase("hookyard"), postgres.WithUsername("postgres"),
		postgres.WithPassword("postgres"), postgres.BasicWaitStrategies())
	testcontainers.CleanupContainer(t, c)
	require.NoError(t, err)
	url, err := c.ConnectionString(ctx, "sslmode=disable")
	require.NoError(t, err)
	return url
}

// Kafka starts a single-node KRaft Kafka container and returns its brokers.
func Kafka(t *testing.T) []string {
	t.Helper()
	RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := kafka.Run(ctx, KafkaImage, kafka.WithClusterID("hookyard-test"))
	testcontainers.CleanupContainer(t, c)
	require.NoError(t, err)
	brokers, err := c.Brokers(ctx)
	require.NoError(t, err)
	return brokers
}
