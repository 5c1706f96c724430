// Package job runs long ops operations — payload purges, resource and
// partition replays — as jobs: a row in ops_job with its parameters, a
// cursor and its progress, worked in bounded steps. An API call answers at
// once with the job (202) and the caller follows it at GET /v1/jobs/{id}.
//
// A job is held by one runner at a time through a lease renewed at every
// step; a step whose lease was lost writes nothing. A job whose runner died
// (lease expired) is taken over by the next runner, which resumes from the
// last cursor written. Every step must therefore be safe to run again: the
// operations are (a purge only touches rows still to purge, a replay of an
// event already pending is skipped).
//
// It never holds a transaction across a step's work.
package job

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statuses of a job.
const (
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
	// StatusCanceled: an operator cancelled the job; it stopped at a step
	// boundary and its progress says what it did until then.
	StatusCanceled = "canceled"
)

// Defaults of Config.
const (
	LeaseDefault  = time.Minute
	ResumeDefault = 15 * time.Second
)

// ErrNotFound: no job with that id.
var ErrNotFound = errors.New("job not found")

// ErrFinished: the job is no longer running, so there is nothing to cancel.
var ErrFinished = errors.New("job already finished")

// ErrUnknownKind: no step function is registered for the job's kind. A
// runner meets one when it takes over a job that a runner of another
// version started (a rollout); the job fails with it rather than wait for a
// runner that may never come.
var ErrUnknownKind = errors.New("unknown job kind")

// Step does one bounded piece of a job. It gets the job's parameters and the
// cursor the previous step returned (nil at first) and returns the next
// cursor, what it did (added to the job's progress, key by key) and whether
// the job is complete. It must be safe to run again with the same cursor.
type Step func(ctx context.Context, params, cursor json.RawMessage) (next json.RawMessage, did map[string]int64, done bool, err error)

// Job is one ops_job row.
type Job struct {
	ID       int64            `json:"id"`
	Kind     string           `json:"kind"`
	Params   json.RawMessage  `json:"params"`
	Status   string           `json:"status"`
	Cursor   json.RawMessage  `json:"cursor,omitempty"`
	Progress map[string]int64 `json:"progress"`
	Error    *string          `json:"error,omitempty"`
	Steps    int              `json:"steps"`
	// CancelRequested: an operator asked the job to stop; it stops when
	// its current step is recorded.
	CancelRequested bool       `json:"cancel_requested"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// Config configures a Runner.
type Config struct {
	// Steps maps a job kind to its step function. Required.
	Steps map[string]Step
	// Lease is how long a runner holds a job between steps; a step must
	// finish well within it. Defaults to LeaseDefault.
	Lease time.Duration
	// Resume is how often Run looks for jobs whose runner died. Defaults to
	// ResumeDefault.
	Resume time.Duration
}

// Runner starts jobs and works them.
type Runner struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  Config
	id   string

	mu   sync.Mutex
	base context.Context // Run's context: jobs outlive the request that started them
	wg   sync.WaitGroup
}

// New returns a runner. Jobs it starts run on the context of Run when Run is
// running, else on the starting request's context without its cancellation.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *Runner {
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.Resume = cmp.Or(cfg.Resume, ResumeDefault)
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Runner{pool: pool, log: log.With(slog.String("service", "jobs")), cfg: cfg, id: hex.EncodeToString(b[:])}
}

const columns = `id, kind, params, status, cursor, progress, error, steps, cancel_requested, created_at, updated_at, finished_at`

func scan(row pgx.Row) (Job, error) {
	var j Job
	var progress []byte
	err := row.Scan(&j.ID, &j.Kind, &j.Params, &j.Status, &j.Cursor, &progress, &j.Error, &j.Steps, &j.CancelRequested, &j.CreatedAt, &j.UpdatedAt, &j.FinishedAt)
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal(progress, &j.Progress); err != nil {
		return j, fmt.Errorf("read job progress: %w", err)
	}
	return j, nil
}

// Start records a job of kind with params and works it in the background.
func (r *Runner) Start(ctx context.Context, kind string, params any) (Job, error) {
	if _, ok := r.cfg.Steps[kind]; !ok {
		return Job{}, fmt.Errorf("%w: %q", ErrUnknownKind, kind)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return Job{}, fmt.Errorf("encode job params: %w", err)
	}
	j, err := scan(r.pool.QueryRow(ctx, `
INSERT INTO ops_job (kind, params, runner, lease_until)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
RETURNING `+columns, kind, raw, r.id, r.cfg.Lease.Seconds()))
	if err != nil {
		return Job{}, fmt.Errorf("record %s job: %w", kind, err)
	}
	// The first step runs in the caller's request: a request the step
	// refuses (ErrInvalid and the like) is answered at once, and a small
	// job is done by the time the caller sees it.
	progress := map[string]int64{}
	done, err := r.step(ctx, &j, progress)
	if err != nil {
		if ferr := r.finish(ctx, j.ID, StatusFailed, err.Error()); ferr != nil {
			r.log.WarnContext(ctx, "record job failure", slog.String("error", ferr.Error()))
		}
		return j, err
	}
	// The answer is the job as the first step left it, read before the
	// background steps start: what the caller sees does not depend on how
	// far they got meanwhile.
	after, err := r.Get(ctx, j.ID)
	if !done {
		r.work(r.context(ctx), j)
	}
	return after, err
}

// step runs one step of j and records it, moving j's cursor. It reports
// whether the job ended: done, or cancelled while the step ran.
func (r *Runner) step(ctx context.Context, j *Job, progress map[string]int64) (bool, error) {
	fn, ok := r.cfg.Steps[j.Kind]
	if !ok {
		return false, fmt.Errorf("run job %d: %w %q: this runner's version cannot run it; start it again from a version that knows it",
			j.ID, ErrUnknownKind, j.Kind)
	}
	next, did, done, err := fn(ctx, j.Params, j.Cursor)
	if err != nil {
		return false, err
	}
	for k, v := range did {
		progress[k] += v
	}
	status, err := r.advance(ctx, j.ID, next, progress, done)
	if err != nil {
		return false, err
	}
	j.Cursor, j.Progress, j.Status = next, progress, status
	return status != StatusRunning, nil
}

func (r *Runner) context(ctx context.Context) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base != nil {
		return r.base
	}
	return context.WithoutCancel(ctx)
}

// Get returns one job.
func (r *Runner) Get(ctx context.Context, id int64) (Job, error) {
	return Get(ctx, r.pool, id)
}

// Get returns one job.
func Get(ctx context.Context, pool *pgxpool.Pool, id int64) (Job, error) {
	j, err := scan(pool.QueryRow(ctx, `SELECT `+columns+` FROM ops_job WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, fmt.Errorf("read job %d: %w", id, err)
	}
	return j, nil
}

// List returns the latest jobs, newest first, of one status or all ("").
func List(ctx context.Context, pool *pgxpool.Pool, status string, limit int) ([]Job, error) {
	rows, err := pool.Query(ctx, `SELECT `+columns+` FROM ops_job WHERE $1 = '' OR status = $1 ORDER BY id DESC LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Run takes over jobs whose runner died, every cfg.Resume, until ctx ends,
// then waits for the jobs it works to stop at their next step.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.base = ctx
	r.mu.Unlock()
	defer r.wg.Wait()
	t := time.NewTicker(r.cfg.Resume)
	defer t.Stop()
	for {
		if err := r.resume(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "resume jobs", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// resume takes over every running job whose lease ran out.
func (r *Runner) resume(ctx context.Context) error {
	for {
		j, err := scan(r.pool.QueryRow(ctx, `
UPDATE ops_job SET runner = $1, lease_until = now() + make_interval(secs => $2), updated_at = now()
WHERE id = (SELECT id FROM ops_job WHERE status = 'running' AND lease_until < now()
            ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING `+columns, r.id, r.cfg.Lease.Seconds()))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("take over job: %w", err)
		}
		r.log.InfoContext(ctx, "resuming job", slog.Int64("job", j.ID), slog.String("kind", j.Kind), slog.Int("steps", j.Steps))
		r.work(ctx, j)
	}
}

func (r *Runner) work(ctx context.Context, j Job) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loop(ctx, j)
	}()
}

// errLeaseLost: another runner holds the job now.
var errLeaseLost = errors.New("job lease lost")

func (r *Runner) loop(ctx context.Context, j Job) {
	log := r.log.With(slog.Int64("job", j.ID), slog.String("kind", j.Kind))
	progress := map[string]int64{}
	for k, v := range j.Progress {
		progress[k] = v
	}
	for ctx.Err() == nil {
		done, err := r.step(ctx, &j, progress)
		switch {
		case errors.Is(err, errLeaseLost):
			return
		case err != nil && ctx.Err() != nil:
			return // stopping: the lease runs out and the next runner resumes
		case err != nil:
			if ferr := r.finish(ctx, j.ID, StatusFailed, err.Error()); ferr != nil {
				log.WarnContext(ctx, "record job failure", slog.String("error", ferr.Error()))
			}
			log.WarnContext(ctx, "job failed", slog.String("error", err.Error()))
			return
		case done:
			log.InfoContext(ctx, "job "+j.Status, slog.Any("progress", progress))
			return
		}
	}
}

// advance records a step under the lease: the cursor, the progress so far
// and a renewed lease, or the end of the job. Only the lease holder writes,
// so its progress is the job's.
//
// A cancel requested meanwhile ends the job here, in the same statement
// that records the step: the step's work is counted and no further step
// starts. The statement returns the status it wrote.
func (r *Runner) advance(ctx context.Context, id int64, cursor json.RawMessage, progress map[string]int64, done bool) (string, error) {
	raw, err := json.Marshal(progress)
	if err != nil {
		return "", fmt.Errorf("encode job progress: %w", err)
	}
	var status string
	err = r.pool.QueryRow(ctx, `
UPDATE ops_job SET cursor = $3, progress = $4, steps = steps + 1, updated_at = now(),
    status = CASE WHEN $5 THEN 'done' WHEN cancel_requested THEN 'canceled' ELSE 'running' END,
    lease_until = now() + make_interval(secs => $6),
    finished_at = CASE WHEN $5 OR cancel_requested THEN now() END
WHERE id = $1 AND runner = $2 AND status = 'running'
RETURNING status`, id, r.id, cursor, raw, done, r.cfg.Lease.Seconds()).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errLeaseLost
	}
	if err != nil {
		return "", fmt.Errorf("record job %d step: %w", id, err)
	}
	return status, nil
}

// Cancel asks a running job to stop. The runner holding it stops when its
// current step is recorded (a step is never cut short: its work would be
// done but not counted). A job no runner holds (its lease ran out) is
// cancelled at once, so no runner takes it over. It returns ErrNotFound
// for no such job and ErrFinished for one that is no longer running.
func Cancel(ctx context.Context, pool *pgxpool.Pool, id int64) (Job, error) {
	j, err := scan(pool.QueryRow(ctx, `
UPDATE ops_job SET cancel_requested = true, updated_at = now(),
    status = CASE WHEN lease_until < now() THEN 'canceled' ELSE status END,
    finished_at = CASE WHEN lease_until < now() THEN now() END
WHERE id = $1 AND status = 'running'
RETURNING `+columns, id))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := Get(ctx, pool, id); gerr != nil {
			return Job{}, gerr
		}
		return Job{}, fmt.Errorf("cancel job %d: %w", id, ErrFinished)
	}
	if err != nil {
		return Job{}, fmt.Errorf("cancel job %d: %w", id, err)
	}
	return j, nil
}

func (r *Runner) finish(ctx context.Context, id int64, status, msg string) error {
	_, err := r.pool.Exec(ctx, `
UPDATE ops_job SET status = $3, error = $4, updated_at = now(), finished_at = now()
WHERE id = $1 AND runner = $2 AND status = 'running'`, id, r.id, status, msg)
	return err
}

// Wait blocks until every job this runner works has stopped (tests).
func (r *Runner) Wait() { r.wg.Wait() }
