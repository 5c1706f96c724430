package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/cli"
)

// Outside `hookyard dev` no service starts on the dev token, without a
// token, or on the example config's dev secrets: it exits non-zero at once
// with a line that names the variable to set.
func TestServicesRefuseToStartOnDevDefaults(t *testing.T) {
	for _, v := range []string{"OPS_TOKEN", "OPS_TOKEN_FILE", "STRIPE_WEBHOOK_SECRET", "CHARGEBEE_WEBHOOK_USERNAME",
		"CHARGEBEE_WEBHOOK_PASSWORD", "GITHUB_WEBHOOK_SECRET", "STANDARD_WEBHOOK_SECRET"} {
		t.Setenv(v, "")
	}
	// Nothing may be reached: the refusal comes before any connection.
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	for _, token := range []string{"", "hookyard-dev-token", "too-short"} {
		t.Setenv("OPS_TOKEN", token)
		for _, svc := range []string{"receiver", "outbox-relay", "processor", "reconciler", "api"} {
			var out, errOut bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			code := cli.Main(ctx, []string{"-config", "../../hookyard.example.yaml", svc}, &out, &errOut)
			cancel()
			require.Equal(t, 1, code, "%s with OPS_TOKEN=%q", svc, token)
			require.Contains(t, errOut.String(), "refusing to start "+svc)
			if svc == "api" {
				// Only the ops API reads the token.
				require.Contains(t, errOut.String(), "OPS_TOKEN")
			}
			require.Contains(t, errOut.String(), "STRIPE_WEBHOOK_SECRET")
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut.String()), "\n")+1, "one log line: %s", errOut.String())
		}
	}
}
