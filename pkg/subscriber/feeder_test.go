package subscriber_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

// The feeder commits its offsets only after the actions of the records
// committed: while the database refuses the inserts, the group's offset
// stays where it was (a restart re-reads, nothing is skipped), and once
// they succeed every record has its action and the offsets move to the
// end. Fails if offsets are committed before (or without) the insert.
func TestFeederCommitsOffsetsOnlyAfterItsActionsCommitted(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	kc := kafkatest.New(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.DefaultProduceTopic(kc.ChangesTopic))
	require.NoError(t, err)
	defer cl.Close()
	const n = 5
	for i := range n {
		v := fmt.Sprintf(`{"provider":"stripe","source_account":"acct","environment":"test","resource_type":"subscription","resource_id":"sub_f",
"decision":"applied","event_id":"evt_%d","fence_generation":1,"provider_version":%d,"fetch_seq":null,"fetched_at":null,
"status":"active","deleted":false,"state":{},"changed_at":"2026-01-01T00:00:00Z"}`, i, i+1)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte("stripe/acct/test/subscription/sub_f"), Value: []byte(v)}).FirstErr())
	}
	// The database refuses every delivery until the trigger goes.
	_, err = s.Pool.Exec(ctx, `
CREATE FUNCTION refuse_action() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
CREATE TRIGGER refuse_action BEFORE INSERT ON action FOR EACH ROW EXECUTE FUNCTION refuse_action()`)
	require.NoError(t, err)

	group := kafkatest.UniqueName(t, "subscribers")
	f, err := subscriber.NewFeeder(s.Pool, pipelinetest.Logger(t), subscriber.FeederConfig{Brokers: kc.Brokers, Topic: kc.ChangesTopic, Group: group,
		Subscribers: subscriber.Subscribers{{Name: "billing", URL: "https://billing.internal/x", SecretEnv: "S", Secret: newSecret(t)}}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()

	adm := kadm.NewClient(cl)
	committed := func() int64 {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return -1
		}
		o, ok := offs.Lookup(kc.ChangesTopic, 0)
		if !ok {
			return 0
		}
		return o.At
	}
	// Several attempts fail (the feeder backs off from 100ms); none may
	// commit an offset.
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		require.LessOrEqual(t, committed(), int64(0), "offset committed while the actions were refused")
	}
	var rows int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM action`).Scan(&rows))
	require.Zero(t, rows)

	_, err = s.Pool.Exec(ctx, `DROP TRIGGER refuse_action ON action`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return committed() == n }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM action WHERE kind = 'change:billing' AND order_key = 'subscription/sub_f'`).Scan(&rows))
	require.Equal(t, n, rows)
	cancel()
	require.NoError(t, <-done)
}
