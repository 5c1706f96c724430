package receiver_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/receiver"
)

// listen runs the receiver on a real listener with its own server bounds
// (httptest's server has none).
func listen(t *testing.T, cfg receiver.Config) *bundle {
	t.Helper()
	pool := dbtest.New(t).Pool
	if cfg.Endpoints == nil {
		cfg.Endpoints = endpoints()
	}
	rcv, err := receiver.New(pool, discardLog(), cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rcv.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		rcv.Stop()
	})
	return &bundle{pool: pool, rcv: rcv, url: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 30 * time.Second}}
}

// slowClient sends a delivery's headers, then one byte of its body every
// interval, and reports when the server closed the connection.
func slowClient(t *testing.T, addr string, length int, interval time.Duration, stop <-chan struct{}) <-chan time.Time {
	t.Helper()
	closed := make(chan time.Time, 1)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	// A signature header of the right form gets a request past the checks
	// made before the body is read; it is wrong, but that shows only once
	// the whole body is in.
	_, err = fmt.Fprintf(conn, "POST /webhooks/stripe-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n{", length)
	require.NoError(t, err)
	go func() {
		defer conn.Close()
		readDone := make(chan struct{})
		go func() {
			// Whatever the server answers, the connection ends with EOF or an error.
			_, _ = bufio.NewReader(conn).ReadString(0)
			closed <- time.Now()
			close(readDone)
		}()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-readDone:
				return
			case <-stop:
				return
			case <-tick.C:
				_, _ = conn.Write([]byte(" "))
			}
		}
	}()
	return closed
}

// Hostile clients cannot hold the receiver: connections that trickle a body
// are closed at the read deadline, while a normal client's signed deliveries
// are accepted during the attack.
func TestSlowBodiesAreCutOffWhileSignedDeliveriesStillLand(t *testing.T) {
	t.Parallel()
	const readTimeout = 2 * time.Second
	b := listen(t, receiver.Config{ReadTimeout: readTimeout})
	addr := strings.TrimPrefix(b.url, "http://")

	stop := make(chan struct{})
	defer close(stop)
	const attackers = 200
	var closedAt []<-chan time.Time
	for range attackers {
		// Without a read deadline each of these holds its connection for as
		// long as it trickles: a byte a second for 4096 s.
		closedAt = append(closedAt, slowClient(t, addr, 4096, time.Second, stop))
	}
	start := time.Now()

	var accepted atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.do(t.Context(), stripeDelivery("stripe-test", stripeBody(fmt.Sprintf("evt_during_attack_%d", i), "customer.subscription.updated", "sub_1", nil)))
			if err == nil && res.code == http.StatusOK {
				accepted.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(20), accepted.Load(), "signed deliveries accepted during the attack")

	// Every slow connection is closed by the server; the bound is a liveness
	// bound (the clients would trickle for over an hour), not a speed check.
	deadline := time.After(readTimeout + 20*time.Second)
	for i, c := range closedAt {
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("slow connection %d of %d still open %s after the attack began", i, attackers, time.Since(start).Round(time.Second))
		}
	}
	require.Equal(t, 20, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))
}

// The bytes of bodies held at once are bounded: a client that finds the
// budget taken by bodies that did arrive is answered 503 with Retry-After
// instead of queueing without bound, and nothing is stored for it.
func TestBodiesReadAtOnceAreBounded(t *testing.T) {
	t.Parallel()
	b := listen(t, receiver.Config{ReadTimeout: 5 * time.Second, BodyLimit: 8 << 10, BodyBytes: 16 << 10,
		Endpoints: endpoints()[:1]})
	addr := strings.TrimPrefix(b.url, "http://")
	// Two clients announce 6000 bytes, send 4097 of them at once and stall:
	// the bytes that arrived (in buffers of 8 KiB) take the 16 KiB budget.
	for range 2 {
		conn := dialFrom(t, attacker, addr)
		defer conn.Close()
		_, err := fmt.Fprintf(conn, "POST /webhooks/stripe-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\nContent-Length: 6000\r\n\r\n%s",
			strings.Repeat(" ", 4097))
		require.NoError(t, err)
	}
	time.Sleep(500 * time.Millisecond) // let both reach the handler and read what they sent
	res := b.post(t, stripeDelivery("stripe-test", stripeBody("evt_no_room", "customer.subscription.updated", "sub_1", nil)))
	require.Equal(t, http.StatusServiceUnavailable, res.code, "%s", res.raw)
	require.Equal(t, receiver.CodeUnavailable, res.answer.Error.Code)
	require.NotEmpty(t, res.header.Get("Retry-After"))
	require.Equal(t, 0, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))
}

// Body limits are per endpoint: GitHub sends up to 25 MB and is accepted at
// 2 MiB, another endpoint keeps the 1 MiB default, and an endpoint's own
// body_limit is checked while reading, also without a Content-Length.
func TestBodyLimitIsPerEndpoint(t *testing.T) {
	t.Parallel()
	eps := endpoints()
	for i := range eps {
		if eps[i].ID == "stripe-other" {
			eps[i].BodyLimit = 2000
		}
	}
	b := setup(t, receiver.Config{Endpoints: eps})

	pad := strings.Repeat("x", 2<<20)
	ghBody := []byte(`{"action":"opened","repository":{"id":1296269,"full_name":"octo/widgets","name":"widgets","owner":{"login":"octo"}},"pad":"` + pad + `"}`)
	h := http.Header{}
	h.Set(github.SignatureHeader, github.Sign(ghBody, githubSecret))
	h.Set(github.DeliveryHeader, "11111111-cc78-11e3-81ab-4c9367dc0958")
	h.Set(github.EventHeader, "issues")
	res := b.post(t, delivery{endpoint: "github-prod", header: h, body: ghBody})
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)

	big := stripeBody("evt_big", "customer.subscription.updated", "sub_1", map[string]any{"pad": pad})
	res = b.post(t, stripeDelivery("stripe-test", big))
	require.Equal(t, http.StatusRequestEntityTooLarge, res.code)

	small := stripeBody("evt_small", "customer.subscription.updated", "sub_1", map[string]any{"pad": strings.Repeat("y", 3000)})
	for _, chunked := range []bool{false, true} {
		d := stripeDelivery("stripe-other", small)
		d.chunked = chunked
		res = b.post(t, d)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.code, "chunked=%t", chunked)
		require.Equal(t, receiver.CodeTooLarge, res.answer.Error.Code)
	}
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))
}
