//go:build !unix

package devpg

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// Server is not available on this platform.
type Server struct{}

// Start fails: running postgres as an unprivileged user needs Unix.
func Start(context.Context, Config) (*Server, error) {
	return nil, fmt.Errorf("devpg on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Addr is empty.
func (*Server) Addr() string { return "" }

// DataDir is empty.
func (*Server) DataDir() string { return "" }

// URL is empty.
func (*Server) URL(string) string { return "" }

// Done never closes.
func (*Server) Done() <-chan struct{} { return nil }

// Stop does nothing.
func (*Server) Stop() error { return nil }

// Leftover is always false.
func Leftover(string, int) bool { return false }
