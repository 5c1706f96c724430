package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hookyard/hookyard/internal/devpg"
	"github.com/hookyard/hookyard/pkg/config"
)

// devPostgresPortEnv moves the embedded server and the probe that decides
// on it off 5432, to try `hookyard dev` beside a server that holds 5432
// (when something answers there, dev still uses DATABASE_URL's default).
// Not part of the contract.
const devPostgresPortEnv = "HOOKYARD_DEV_POSTGRES_PORT"

// startsDatabase is the one rule for a database of our own: only `hookyard
// dev`, only when DATABASE_URL is unset, and only when nothing answers
// where its default points. A production service that finds no database
// fails instead of quietly writing into a throwaway one. The probe runs
// only for dev.
func startsDatabase(cmd string, databaseURLSet bool, somethingAnswers func() bool) bool {
	return cmd == "dev" && !databaseURLSet && !somethingAnswers()
}

// devDatabase starts the embedded PostgreSQL when startsDatabase says so,
// points cfg.DatabaseURL at it, and returns a context canceled if the
// server dies under the run (so that dev stops instead of failing every
// write) and the function that stops the server, to call after the
// services have stopped; its error (devpg.ErrExited for a server that
// died) is the run's error.
func devDatabase(ctx context.Context, cmd string, cfg *config.Config, log *slog.Logger) (context.Context, func() error, error) {
	port := devpg.PortDefault
	if v := os.Getenv(devPostgresPortEnv); v != "" && cmd == "dev" {
		p, err := strconv.Atoi(v)
		if err != nil {
			return ctx, nil, fmt.Errorf("%s: %w", devPostgresPortEnv, err)
		}
		port = p
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// A server that a crashed dev run left on our data folder answers too,
	// but is ours to restart: taken for someone else's, it would be used
	// and never stopped.
	somethingElseAnswers := func() bool {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return !devpg.Leftover(devpg.DefaultDataDir(), port)
	}
	// DATABASE_URL_FILE configures a database as surely as DATABASE_URL:
	// seeing only the latter, dev would replace it with its own.
	if !startsDatabase(cmd, config.IsSet(os.LookupEnv, "DATABASE_URL"), somethingElseAnswers) {
		return ctx, func() error { return nil }, nil
	}
	log.InfoContext(ctx, "DATABASE_URL is unset and no other server answers on "+addr+": starting an embedded postgres for this run")
	srv, err := devpg.Start(ctx, devpg.Config{Port: port, Logger: log})
	if err != nil {
		return ctx, nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	cfg.DatabaseURL = srv.URL("hookyard")
	ctx, cancel := context.WithCancel(ctx)
	var stopping atomic.Bool
	go func() {
		select {
		case <-srv.Done():
			if !stopping.Load() {
				log.Error("embedded postgres exited during the run; stopping", slog.String("data_dir", srv.DataDir()))
				cancel()
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() error {
		stopping.Store(true)
		cancel()
		if err := srv.Stop(); err != nil {
			return fmt.Errorf("embedded postgres: %w", err)
		}
		return nil
	}, nil
}
