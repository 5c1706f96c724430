package receiver_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/receiver"
)

// attacker is a client address on loopback other than the signed
// deliveries' 127.0.0.1, as an attacker on the internet would be.
const attacker = "127.0.0.2"

// dialFrom opens a connection to addr from the local address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	return conn
}

// holdOpen keeps reopening connections that send what opening writes and
// then nothing, until stop: each one is what an attacker holds for free.
// With spread, the connections come from ten addresses (an attacker with
// many hosts) instead of one.
func holdOpen(t *testing.T, addr string, n int, opening string, stop <-chan struct{}, wg *sync.WaitGroup, spread ...bool) {
	t.Helper()
	for i := range n {
		from := attacker
		if len(spread) > 0 && spread[0] {
			from = fmt.Sprintf("127.0.0.%d", 2+i%10)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
				conn, err := d.Dial("tcp", addr)
				if err != nil {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
						continue
					}
				}
				_, _ = conn.Write([]byte(opening))
				closed := make(chan struct{})
				go func() { _, _ = bufio.NewReader(conn).ReadString(0); close(closed) }()
				select {
				case <-stop:
				case <-closed:
				case <-time.After(10 * time.Second): // re-opened every 10 s, as the attack was
				}
				_ = conn.Close()
			}
		}()
	}
}

// signedDuringAttack sends n signed Stripe deliveries one after another from
// 127.0.0.1 on fresh connections and returns each one's status, or -1 for
// an answer that did not come within the client's timeout.
func signedDuringAttack(t *testing.T, b *bundle, n int, prefix string) []int {
	t.Helper()
	client := &http.Client{Timeout: 8 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	codes := make([]int, n)
	for i := range n {
		d := stripeDelivery("stripe-test", stripeBody(fmt.Sprintf("%s_%d", prefix, i), "customer.subscription.updated", "sub_1", nil))
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url+"/webhooks/"+d.endpoint, strings.NewReader(string(d.body)))
		require.NoError(t, err)
		req.Header = d.header.Clone()
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			codes[i] = -1
			continue
		}
		codes[i] = res.StatusCode
		_ = res.Body.Close()
		time.Sleep(200 * time.Millisecond)
	}
	return codes
}

func allOK(codes []int) bool {
	for _, c := range codes {
		if c != http.StatusOK {
			return false
		}
	}
	return true
}

// Intake capacity cannot be held by clients that send nothing. Each variant
// holds what used to stop all intake — announced bodies that never come
// (two to the GitHub endpoint, fourteen to Stripe: the whole body budget
// reserved before a byte arrived), headers sent a byte at a time, and idle
// keep-alive connections up to the connection cap — while signed
// deliveries flow from another address; every signed delivery is accepted
// (the client's timeout is a liveness bound, far above intake's latency).
func TestClientsThatSendNothingCannotStopIntake(t *testing.T) {
	t.Parallel()
	stripeHead := "POST /webhooks/stripe-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\nContent-Length: 1048576\r\n\r\n"
	githubHead := "POST /webhooks/github-prod HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=00\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: d\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tc := range []struct {
		name  string
		cfg   receiver.Config
		holds func(addr string, stop <-chan struct{}, wg *sync.WaitGroup)
	}{
		{name: "announced bodies that never come", holds: func(addr string, stop <-chan struct{}, wg *sync.WaitGroup) {
			holdOpen(t, addr, 2, githubHead, stop, wg)
			holdOpen(t, addr, 14, stripeHead, stop, wg)
			// Many more of the same: none may hold a byte of the budget.
			holdOpen(t, addr, 48, stripeHead, stop, wg)
		}},
		{name: "a first body byte and then nothing", holds: func(addr string, stop <-chan struct{}, wg *sync.WaitGroup) {
			holdOpen(t, addr, 2, githubHead+"1\r\n{\r\n", stop, wg)
			holdOpen(t, addr, 62, stripeHead+"{", stop, wg)
		}},
		{name: "headers a line at a time", cfg: receiver.Config{MaxConns: 64},
			holds: func(addr string, stop <-chan struct{}, wg *sync.WaitGroup) {
				holdOpen(t, addr, 80, "POST /webhooks/stripe-test HTTP/1.1\r\n", stop, wg)
			}},
		{name: "idle keep-alives up to the connection cap", cfg: receiver.Config{MaxConns: 32},
			holds: func(addr string, stop <-chan struct{}, wg *sync.WaitGroup) {
				// Four from each of ten addresses: no address passes its
				// share, together they pass the cap.
				holdOpen(t, addr, 40, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", stop, wg, true)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := listen(t, tc.cfg)
			addr := strings.TrimPrefix(b.url, "http://")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			tc.holds(addr, stop, &wg)
			time.Sleep(time.Second) // the attack is in place
			codes := signedDuringAttack(t, b, 12, strings.ReplaceAll(tc.name, " ", "_"))
			close(stop)
			wg.Wait()
			require.True(t, allOK(codes), "signed deliveries during the attack answered %v (-1: no answer within 8 s)", codes)
			require.Equal(t, 12, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))
		})
	}
}

// One address cannot hold every connection: past its share it is refused
// at once, and other addresses still connect.
func TestOneAddressCannotHoldEveryConnection(t *testing.T) {
	t.Parallel()
	b := listen(t, receiver.Config{MaxConns: 64, ConnsPerClient: 8})
	addr := strings.TrimPrefix(b.url, "http://")
	var held []net.Conn
	for range 8 {
		c := dialFrom(t, attacker, addr)
		_, err := c.Write([]byte("POST /webhooks/stripe-test HTTP/1.1\r\n"))
		require.NoError(t, err)
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	// The ninth connection from that address is closed without an answer.
	extra := dialFrom(t, attacker, addr)
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = extra.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	_, err := bufio.NewReader(extra).ReadString('\n')
	require.Error(t, err, "a connection past the address's share is closed")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed at once, not left waiting: %v", err)

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	res, err := b.do(ctx, stripeDelivery("stripe-test", stripeBody("evt_other_address", "customer.subscription.updated", "sub_1", nil)))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
}

// A request without the provider's authentication headers is refused before
// its body is read: the answer comes at once although the announced body
// never does, and an unsigned request with an old timestamp is a 401, not a
// stale signature (the timestamp is judged only once the signature holds).
func TestUnauthenticatedRequestsAreRefusedBeforeTheirBody(t *testing.T) {
	t.Parallel()
	b := listen(t, receiver.Config{FirstByteTimeout: 5 * time.Second})
	addr := strings.TrimPrefix(b.url, "http://")
	for _, head := range []string{
		"POST /webhooks/stripe-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"POST /webhooks/stripe-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nStripe-Signature: v1=00\r\nContent-Length: 100\r\n\r\n",
		"POST /webhooks/github-prod HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha1=00\r\nContent-Length: 100\r\n\r\n",
		"POST /webhooks/chargebee-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Basic " + base64.StdEncoding.EncodeToString([]byte("hookyard:wrong")) + "\r\nContent-Length: 100\r\n\r\n",
		"POST /webhooks/standard-test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nwebhook-id: m\r\nContent-Length: 100\r\n\r\n",
	} {
		conn := dialFrom(t, "127.0.0.1", addr)
		start := time.Now()
		_, err := conn.Write([]byte(head))
		require.NoError(t, err)
		_ = conn.SetReadDeadline(time.Now().Add(4 * time.Second))
		status, err := bufio.NewReader(conn).ReadString('\n')
		_ = conn.Close()
		require.NoError(t, err, "answered before the body: %q", head)
		require.Contains(t, status, " 401 ", "%q", head)
		require.Less(t, time.Since(start), 4*time.Second)
	}
	old := stripeBody("evt_unsigned_old", "customer.subscription.updated", "sub_1", nil)
	res := b.post(t, delivery{endpoint: "stripe-test", header: stripeHeader(old, "whsec_not_the_secret", time.Now().Add(-time.Hour)), body: old})
	require.Equal(t, http.StatusUnauthorized, res.code, "%s", res.raw)
	require.Equal(t, receiver.CodeInvalidSignature, res.answer.Error.Code)
	requireNothingStored(t, b.pool)
}

// With tracing off, a caller's traceparent is not kept: the inbox row of
// an anonymous client's delivery carries no trace id the client chose.
func TestCallerTraceparentIsNotStoredWithTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})
	d := stripeDelivery("stripe-test", stripeBody("evt_traceparent", "customer.subscription.updated", "sub_1", nil))
	d.header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	res := b.post(t, d)
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
	require.Equal(t, 0, count(t, b.pool, `SELECT count(*) FROM webhook_inbox WHERE trace_parent IS NOT NULL`))
	require.Equal(t, 0, count(t, b.pool, `SELECT count(*) FROM outbox WHERE message::jsonb ? 'traceparent'`))
}
