// Package db opens the Postgres pool, creates the database when it is missing
// and applies the embedded migrations. It owns no queries of its own: SQL
// lives beside the code that runs it.
package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/hookyard/hookyard/schemas"
)

// DefaultURL is used when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/hookyard?sslmode=disable"

// Options tune the pool.
type Options struct {
	// MaxConns caps the pool. Defaults to pgxpool's default (4 or NumCPU).
	MaxConns int32
	// SearchPath sets the schema search path of every connection (tests use
	// one schema each). Defaults to the server's.
	SearchPath string
	// ApplicationName names the connections in pg_stat_activity. Defaults to
	// "hookyard".
	ApplicationName string
	// IdleInTransactionTimeout is how long a connection may sit idle inside
	// a transaction before the server ends its session
	// (idle_in_transaction_session_timeout). A process whose host dies
	// mid-transaction sends no FIN: without the bound its backend keeps the
	// transaction's locks until TCP keepalive gives up, about two hours.
	// Defaults to the server's (usually none).
	IdleInTransactionTimeout time.Duration
	// LockTimeout bounds every wait for a lock (lock_timeout); the
	// statement fails with 55P03 after it. Defaults to the server's
	// (usually none).
	LockTimeout time.Duration
}

// Open parses url, applies opts and pings the database.
func Open(ctx context.Context, dsn string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "hookyard"
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	if opts.SearchPath != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.SearchPath
	}
	if opts.IdleInTransactionTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = millis(opts.IdleInTransactionTimeout)
	}
	if opts.LockTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["lock_timeout"] = millis(opts.LockTimeout)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// millis is d as a Postgres duration setting (at least 1ms: 0 turns a
// timeout off).
func millis(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

// EnsureDatabase creates the database named in dsn when it does not exist,
// connecting to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, dsn string, log *slog.Logger) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect to database %q: %w", name, err)
	}
	admin := *u
	admin.Path = "/postgres"
	aconn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to server to create database %q: %w", name, err)
	}
	defer aconn.Close(ctx)
	_, err = aconn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")) {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	log.InfoContext(ctx, "created database", slog.String("database", name))
	return nil
}

// migrateLockClass is the first key of the advisory lock migrations run
// under; the second is the schema's, so services of one schema wait for
// each other and different schemas (the tests') do not.
const migrateLockClass = 0x686f6f6b // "hook"

// Migrate applies every embedded migration that is not applied yet. It
// holds a session advisory lock on the target schema while it does, so any
// number of services started together on a fresh database apply each
// migration once and all start: without it they raced into a duplicate key
// on goose's version table and exited.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	// A connection of its own, beside the pool: a pool of one connection
	// would otherwise hold the lock and wait for itself. Closing it
	// releases the lock.
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, migrateLockClass); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	return migrate(ctx, pool, log)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	sub, err := fs.Sub(schemas.Migrations, "migrations")
	if err != nil {
		return fmt.Errorf("open embedded migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub)
	if err != nil {
		return fmt.Errorf("prepare migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range res {
		log.InfoContext(ctx, "applied migration", slog.String("source", r.Source.Path), slog.Duration("took", r.Duration))
	}
	return nil
}
