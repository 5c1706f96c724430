package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/ops/api"
)

// A replay that replays nothing says why: an unknown event is 404
// not_found, an event whose payload the retention purge dropped is 410
// purged (there is nothing left to apply), and a known event still replays.
// Fails if a purged event answers a bare 404 "no replayable event".
func TestReplayEventOverTheAPISaysWhyNothingWasReplayed(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedDeadEvents(t, s.Pool)
	_, err := s.Pool.Exec(t.Context(), `UPDATE webhook_inbox SET payload = NULL, raw_body = NULL, body_at = NULL WHERE event_id = 'evt_ok'`)
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)

	var failed struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.Equal(t, http.StatusGone, send(t, http.MethodPost, srv.URL+"/v1/replay/event/stripe/acct_a/test/evt_ok", token, nil, &failed))
	require.Equal(t, "purged", failed.Error.Code)
	require.Equal(t, http.StatusNotFound, send(t, http.MethodPost, srv.URL+"/v1/replay/event/stripe/acct_a/test/evt_nope", token, nil, &failed))
	require.Equal(t, "not_found", failed.Error.Code)
	var rep struct {
		Replayed int `json:"replayed"`
	}
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, srv.URL+"/v1/replay/event/stripe/acct_a/test/evt_2", token, nil, &rep))
	require.Equal(t, 1, rep.Replayed)
}
