package receiptsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/receiptsim"
)

func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

// The server answers as draft-ietf-httpapi-idempotency-key-header says a
// resource server should: 409 while the key's first request is processed
// (checked with that request really in flight), the stored 2xx once it
// completed, 422 for the key with another body, 400 without a key, and a
// failed processing keeps nothing. Fails if the double is lenient in any of
// the ways a real server is not.
func TestServerAnswersLikeAStandardIdempotentServer(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan int)
	sim := receiptsim.New(func(_ context.Context, r receiptsim.Request, h http.Header) int {
		if r.Key == "slow" {
			close(entered)
			return <-release
		}
		h.Set("Receipt-Id", "rcpt_"+r.Key)
		return http.StatusCreated
	})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)

	first := make(chan *http.Response, 1)
	go func() { first <- post(t, srv.URL, "slow", `{"a":1}`) }()
	<-entered
	require.Equal(t, http.StatusConflict, post(t, srv.URL, "slow", `{"a":1}`).StatusCode, "in progress")
	require.Equal(t, http.StatusUnprocessableEntity, post(t, srv.URL, "slow", `{"a":2}`).StatusCode, "another body")
	release <- http.StatusInternalServerError
	require.Equal(t, http.StatusInternalServerError, (<-first).StatusCode)
	require.NotContains(t, sim.Completed(), "slow", "a failed processing stores nothing")

	resp := post(t, srv.URL, "fast", `{"a":1}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
	resp = post(t, srv.URL, "fast", `{"a":1}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the stored answer")
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "rcpt_fast", resp.Header.Get("Receipt-Id"))
	require.Equal(t, http.StatusUnprocessableEntity, post(t, srv.URL, "fast", `{"a":2}`).StatusCode, "a completed key with another body")
	require.Equal(t, http.StatusBadRequest, post(t, srv.URL, "", `{}`).StatusCode)

	require.Contains(t, sim.Completed(), "fast")
	require.Equal(t, map[string]int{"slow": 3, "fast": 3}, sim.Keys())
	require.Equal(t, 2, sim.MaxInFlight())
	var codes []int
	for _, r := range sim.Requests() {
		codes = append(codes, r.Code)
	}
	require.Equal(t, []int{500, 409, 422, 201, 201, 422}, codes)
}
