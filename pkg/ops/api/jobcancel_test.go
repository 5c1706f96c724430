package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

// POST /v1/jobs/{id}/cancel stops a running job at its next step boundary;
// a finished job answers 409 and an unknown one 404.
func TestCancelJobRouteStopsARunningJob(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	log := pipelinetest.Logger(t)
	release := make(chan struct{})
	steps := 0
	// Each step after the first waits to be released, so the job is still
	// running when the cancel arrives.
	wait := func(ctx context.Context, _, _ json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
		steps++
		if steps > 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, nil, false, ctx.Err()
			}
		}
		return nil, map[string]int64{"did": 1}, false, nil
	}
	jobs := job.New(s.Pool, log, job.Config{Steps: map[string]job.Step{"wait": wait}})
	srv := httptest.NewServer(api.New(s.Pool, log, api.Config{Token: "tok", Jobs: jobs}))
	t.Cleanup(srv.Close)
	j, err := jobs.Start(t.Context(), "wait", nil)
	require.NoError(t, err)

	code, _ := do(t, http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/cancel", srv.URL, j.ID), "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := do(t, http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/cancel", srv.URL, j.ID), "tok")
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	require.Equal(t, true, body["job"].(map[string]any)["cancel_requested"])
	close(release)
	require.Eventually(t, func() bool {
		got, err := job.Get(context.Background(), s.Pool, j.ID)
		require.NoError(t, err)
		return got.Status == job.StatusCanceled
	}, 30*time.Second, 20*time.Millisecond)
	jobs.Wait()

	code, _ = do(t, http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/cancel", srv.URL, j.ID), "tok")
	require.Equal(t, http.StatusConflict, code)
	code, _ = do(t, http.MethodPost, fmt.Sprintf("%s/v1/jobs/%d/cancel", srv.URL, j.ID+99), "tok")
	require.Equal(t, http.StatusNotFound, code)
}
