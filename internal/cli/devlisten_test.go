package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
)

// `hookyard dev` runs on the dev token and the example config's dev
// secrets: on an address other than loopback anyone on the network could
// read and replay through its ops API. It refuses a non-loopback
// HTTP_ADDR, OPS_ADDR or SIM_ADDR (an empty host is every interface)
// before it starts anything, unless -listen-public says it is meant.
// Not parallel: it would run dev, as TestDevAnswersBeforeRepublishingABacklog does.
func TestDevRefusesNonLoopbackAddressesUnlessListenPublic(t *testing.T) {
	embeddedKafkaPort = 0
	for _, tc := range []struct{ name, http, ops, sim string }{
		{"HTTP_ADDR", "0.0.0.0:0", "127.0.0.1:0", "127.0.0.1:0"},
		{"HTTP_ADDR", ":8080", "127.0.0.1:0", "127.0.0.1:0"},
		{"OPS_ADDR", "127.0.0.1:0", "192.0.2.10:8081", "127.0.0.1:0"},
		{"OPS_ADDR", "127.0.0.1:0", "example.com:8081", "127.0.0.1:0"},
		{"SIM_ADDR", "127.0.0.1:0", "[::1]:0", "[::]:12111"},
	} {
		vars := map[string]string{"HTTP_ADDR": tc.http, "OPS_ADDR": tc.ops, "SIM_ADDR": tc.sim}
		t.Setenv("SIM_ADDR", tc.sim)
		cfg, err := config.Parse([]byte("endpoints: []\n"), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
		require.NoError(t, err)
		e := &env{cfg: cfg, log: pipelinetest.Logger(t), reg: newRegistry()}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // were it to start, it would stop at once
		err = runDevCmd(ctx, e, nil, nil)
		require.ErrorIs(t, err, errPublicListen, "%+v", tc)
		require.ErrorContains(t, err, tc.name)
	}
	require.NoError(t, checkDevListen(false, map[string]string{"HTTP_ADDR": "127.0.0.1:8080", "OPS_ADDR": "localhost:8081", "SIM_ADDR": "[::1]:1"}))
	require.NoError(t, checkDevListen(true, map[string]string{"HTTP_ADDR": "0.0.0.0:8080"}), "-listen-public: meant")
}

// The simulators stand in for providers' APIs with no authentication of
// their own; they answer loopback peers only, even when dev listens
// publicly.
func TestDevSimulatorsAnswerOnlyLoopbackPeers(t *testing.T) {
	t.Parallel()
	h := loopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for addr, want := range map[string]int{
		"127.0.0.1:5000": http.StatusTeapot, "[::1]:5000": http.StatusTeapot,
		"192.0.2.1:5000": http.StatusForbidden, "[2001:db8::1]:5000": http.StatusForbidden, "garbage": http.StatusForbidden,
	} {
		req := httptest.NewRequest(http.MethodGet, "/v1/subscriptions/sub_1", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, addr)
	}
}
