package effects_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/pipelinetest"
	"github.com/hookyard/hookyard/pkg/dbtest"
)

// The receiving server's answer decides the outcome: any 2xx and a 409 for
// the same key are sent; 408, 429 and 5xx are failed and retried; any other
// 4xx, a redirect, or a 409 naming another key is dead (kept for an
// operator). Fails if a permanent refusal is retried forever, or if a
// retryable answer kills the receipt.
func TestReceiptAnswersDecideSentRetriedOrDead(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	cases := map[string]struct {
		code   int
		header string
		want   string
	}{
		"in_200": {200, "", effects.StatusSent}, "in_201": {201, "", effects.StatusSent}, "in_204": {204, "", effects.StatusSent},
		"in_409": {409, "", effects.StatusSent}, "in_409same": {409, "same", effects.StatusSent},
		"in_409other": {409, "hookyard:other", effects.StatusDead},
		"in_400":      {400, "", effects.StatusDead}, "in_401": {401, "", effects.StatusDead}, "in_404": {404, "", effects.StatusDead},
		"in_422": {422, "", effects.StatusDead}, "in_302": {302, "", effects.StatusDead},
		"in_408": {408, "", effects.StatusFailed}, "in_429": {429, "", effects.StatusFailed},
		"in_500": {500, "", effects.StatusFailed}, "in_503": {503, "", effects.StatusFailed},
	}
	for inv := range cases {
		paid(t, s.Pool, inv, "sub_1")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		c := cases[key[strings.Index(key, "in_"):strings.LastIndex(key, ":")]]
		switch c.header {
		case "same":
			w.Header().Set("Idempotency-Key", key)
		case "":
		default:
			w.Header().Set("Idempotency-Key", c.header)
		}
		if c.code == 302 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(c.code)
	}))
	t.Cleanup(srv.Close)
	snd := newSender(t, s.Pool, srv.URL, func(c *effects.Config) { c.BatchSize = 100; c.BackoffBase, c.BackoffMax = time.Hour, time.Hour })
	n, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, len(cases), n)
	for inv, c := range cases {
		a := show(t, s.Pool, paidKey(inv))
		require.Equal(t, c.want, a.Status, "%s answered %d", inv, c.code)
		require.Equal(t, 1, a.Attempts)
		switch c.want {
		case effects.StatusSent:
			require.Empty(t, a.LastError)
		case effects.StatusFailed:
			require.Contains(t, a.LastError, "HTTP ")
			require.NotNil(t, a.NextAttemptAt)
			require.Greater(t, time.Until(*a.NextAttemptAt), 20*time.Minute, "retry after the backoff")
		case effects.StatusDead:
			require.Contains(t, a.LastError, "HTTP ")
			require.NotNil(t, a.DoneAt)
		}
	}
	// Nothing more is due: sent and dead are final, failed waits.
	n, err = snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

func paidKey(invoice string) effects.Key {
	return effects.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: invoice, Kind: effects.KindReceipt}
}

// A refused connection means the request never left: failed (retried), not
// ambiguous; after MaxAttempts the receipt is dead with the last error, and
// a replay gives it a fresh budget under the same key. Fails if attempts
// are unbounded or a replay is refused or changes the key.
func TestUnreachableReceiptServerRetriesThenDiesAndReplaySendsTheSameKey(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_down", "sub_1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	snd := newSender(t, s.Pool, url, func(c *effects.Config) { c.MaxAttempts = 3 })
	sendUntil(t, snd, s.Pool, k, effects.StatusDead)
	a := show(t, s.Pool, k)
	require.Equal(t, 3, a.Attempts)
	require.Contains(t, a.LastError, "not sent")

	dead, err := effects.List(context.Background(), s.Pool, effects.Filter{})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, k.String(), dead[0].IdempotencyKey)

	rcv := newReceiver(t, func(string, int) int { return http.StatusOK })
	snd = newSender(t, s.Pool, rcv.srv.URL, nil)
	require.NoError(t, effects.ReplayDead(context.Background(), s.Pool, k))
	sendUntil(t, snd, s.Pool, k, effects.StatusSent)
	require.Equal(t, map[string]int{k.String(): 1}, rcv.keys())
	require.Equal(t, 4, rcv.requests()[0].attempt)

	// A sent action is never replayed.
	err = effects.ReplayDead(context.Background(), s.Pool, k)
	require.ErrorIs(t, err, effects.ErrNotDead)
	require.ErrorIs(t, effects.ReplayDead(context.Background(), s.Pool, paidKey("in_none")), effects.ErrNotFound)
}

// With no receipt URL the sender claims nothing: receipts stay pending and
// say why. Fails if an unconfigured sender takes (and so delays or kills)
// receipts.
func TestNoReceiptURLLeavesReceiptsPending(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_nourl", "sub_1")
	snd, err := effects.New(s.Pool, pipelinetest.Logger(t), effects.Config{})
	require.NoError(t, err)
	n, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, snd.Run(ctx))
	a := show(t, s.Pool, k)
	require.Equal(t, effects.StatusPending, a.Status)
	require.Zero(t, a.Attempts)
}

// The claim's plan is a walk of action_due, a primary-key update and a
// primary-key read of the fact, on tables without statistics (a fresh
// database, or one restored and not analysed yet). Fails if the claim can
// be planned as a scan or sort of every unsent action, or the fact read as
// a scan of an account's facts.
func TestClaimPlanWalksTheDueIndexWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	plan := func() string {
		rows, err := s.Pool.Query(ctx, "EXPLAIN "+effects.ClaimSQL, effects.KindReceipt, 16, int64(40000), 20, "x")
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			lines = append(lines, l)
		}
		require.NoError(t, rows.Err())
		return strings.Join(lines, "\n")
	}
	check := func(p string) {
		require.Contains(t, p, "Index Scan using action_due on action", p)
		require.Contains(t, p, "Index Scan using action_pkey on action a", p)
		require.Contains(t, p, "Index Scan using fact_pkey on fact f", p)
		require.NotContains(t, p, "Seq Scan", p)
		require.NotContains(t, p, "Sort", p)
	}
	check(plan())
	_, err := s.Pool.Exec(ctx, `ALTER TABLE fact SET (autovacuum_enabled = false);
ALTER TABLE action SET (autovacuum_enabled = false);
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
SELECT 'stripe', 'acct', 'test', 'invoice_paid', 'in_' || i, 'subscription', 'sub_' || (i % 10), 'evt_' || i, '{}'
FROM generate_series(1, 5000) i;
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status)
SELECT 'stripe', 'acct', 'test', 'in_' || i, 'receipt', 'evt_' || i,
       CASE WHEN i % 100 = 0 THEN 'pending' WHEN i % 7 = 0 THEN 'dead' ELSE 'sent' END
FROM generate_series(1, 5000) i`)
	require.NoError(t, err)
	check(plan())
}

// The stable key is the action's identity written out, so two identities
// never share one: ":" and "%" inside a part are percent-encoded. Fails if
// a colon in an id could make two actions send the same Idempotency-Key.
func TestStableKeysOfDistinctActionsDiffer(t *testing.T) {
	t.Parallel()
	a := effects.Key{Provider: "standard-webhooks", SourceAccount: "acct:1", Environment: "test", SubjectID: "inv", Kind: "receipt"}
	b := effects.Key{Provider: "standard-webhooks", SourceAccount: "acct", Environment: "1:test", SubjectID: "inv", Kind: "receipt"}
	c := effects.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: "in_%3A", Kind: "receipt"}
	d := effects.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: "in_:", Kind: "receipt"}
	require.Equal(t, "hookyard:standard-webhooks:acct%3A1:test:inv:receipt", a.String())
	require.NotEqual(t, a.String(), b.String())
	require.NotEqual(t, c.String(), d.String())
	require.Equal(t, "hookyard:stripe:acct_1:test:in_1:receipt", paidKey("in_1").String())
}
