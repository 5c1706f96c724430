package processor_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// pausedSessionTimeout is the paused member's session timeout: the lowest
// Apache Kafka accepts by default (group.min.session.timeout.ms).
const pausedSessionTimeout = 6 * time.Second

// pauser freezes a Kafka client's network as a stopped process (SIGSTOP, a
// long GC pause, a VM migration) would: no request leaves, no answer is
// read, so no heartbeat reaches the group coordinator.
type pauser struct {
	mu     sync.Mutex
	paused bool
	resume chan struct{}
}

func newPauser() *pauser { return &pauser{resume: make(chan struct{})} }

func (p *pauser) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.resume = true, make(chan struct{})
	}
}

func (p *pauser) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

func (p *pauser) wait() {
	p.mu.Lock()
	paused, resume := p.paused, p.resume
	p.mu.Unlock()
	if paused {
		<-resume
	}
}

func (p *pauser) dial(ctx context.Context, network, host string) (net.Conn, error) {
	p.wait()
	c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return pausedConn{Conn: c, p: p}, nil
}

type pausedConn struct {
	net.Conn
	p *pauser
}

func (c pausedConn) Read(b []byte) (int, error)  { c.p.wait(); return c.Conn.Read(b) }
func (c pausedConn) Write(b []byte) (int, error) { c.p.wait(); return c.Conn.Write(b) }

// Invariant 6 with a real session timeout: a processor that stops answering
// the group coordinator (paused, not stopped: it never leaves the group)
// while its worker holds a stale fetch loses its partition when its session
// times out; the new owner writes, and when the paused processor wakes up
// its write is refused by the fence. Fails without the fence check, and on a
// broker that never expires the paused member (the new owner would never
// get the partition).
func TestProcessorPausedPastSessionTimeoutCannotWrite(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	res := pipelinetest.Resource("sub_paused")
	s := stripesim.Subscription{ID: "sub_paused", Customer: "cus_p", Status: "active", CurrentPeriodEnd: time.Now().Add(720 * time.Hour).Unix()}
	p.Sim.Put(s)

	gate := &gatedFetcher{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	frozen := newPauser()
	t.Cleanup(frozen.Resume)
	reg := prometheus.NewRegistry()
	_, _ = p.StartProcessor("paused", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate}
		c.Registerer = reg
		c.RevokeGrace = 200 * time.Millisecond
		c.KafkaOptions = append(c.KafkaOptions, kgo.Dialer(frozen.dial), kgo.SessionTimeout(pausedSessionTimeout),
			kgo.HeartbeatInterval(time.Second), kgo.RebalanceTimeout(10*time.Second))
	})

	_, _, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
	require.NoError(t, err)
	select {
	case st := <-gate.fetched:
		require.Equal(t, "active", st)
	case <-time.After(30 * time.Second):
		t.Fatal("the processor to be paused never fetched")
	}

	// The processor freezes with "active" in hand; the subscription is
	// canceled meanwhile.
	frozen.Pause()
	s.Status, s.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(s)
	_, _, err = p.Sim.Send(ctx, "customer.subscription.deleted", s)
	require.NoError(t, err)

	// The new owner gets the partition only once the coordinator expired the
	// paused member's session.
	_, _ = p.StartProcessor("new-owner", nil)
	p.Eventually(func() bool {
		pr, ok := p.Projection(res)
		return ok && pr.Status == "canceled"
	}, "new owner writes canceled after the paused member's session expired")
	before, _ := p.Projection(res)

	frozen.Resume()
	release()
	p.Eventually(func() bool { return counterValue(t, reg, "hookyard_processor_fenced_writes_total") == 1 },
		"the woken processor's write refused by the fence")
	after, ok := p.Projection(res)
	require.True(t, ok)
	require.Equal(t, "canceled", after.Status, "the paused processor overwrote the new owner's state")
	require.Equal(t, before.Generation, after.Generation)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt)
	hist, err := projection.History(ctx, p.Pool, res, 100)
	require.NoError(t, err)
	var fenced int
	for _, h := range hist {
		if h.Outcome == projection.Fenced {
			fenced++
		}
	}
	require.Equal(t, 1, fenced, "%+v", hist)
}
