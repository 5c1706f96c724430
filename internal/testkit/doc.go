// Package testkit groups the helpers the tests share, one package each:
// dbtest (a migrated schema per test in the local Postgres), kafkatest
// (in-process kfake, or the cluster in KAFKA_BROKERS), containertest
// (testcontainers where a Docker engine runs, skipped with a message where
// none does), pipelinetest (the whole pipeline in one test), plantest (the
// hot statements' plans on tables with and without statistics) and
// promread (metrics read back) and freeport (ports for the processes a
// harness starts, outside the kernel's ephemeral range). Nothing here
// runs in a service.
package testkit
