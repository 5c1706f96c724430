package cli

import (
	"context"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/health"
)

func serve(ctx context.Context, e *echo.Echo, addr string, log *slog.Logger) error {
	return health.Serve(ctx, e, addr, log)
}
