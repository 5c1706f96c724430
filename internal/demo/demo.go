// Package demo plays the out-of-order cancellation against a running
// pipeline (`make run`) over HTTP only: it cancels a subscription in the
// Stripe simulator, delivers the cancellation first and an older "active"
// event after it (twice), and prints what a naive last-arrival-wins consumer
// would decide beside hookyard's decision and the resource's timeline.
//
// It never writes to the database and never starts a service: it is a
// client of the simulator, the receiver and the query/ops API.
package demo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/ops/explain"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// TimeoutDefault bounds the whole demo.
const TimeoutDefault = 45 * time.Second

// ErrNotRunning is returned when a service of the pipeline does not answer:
// the demo needs `make run` in another shell.
var ErrNotRunning = errors.New("pipeline not running")

// ErrReopened is returned when hookyard's decision is not the closed access
// the cancellation asks for: the demo's claim did not hold.
var ErrReopened = errors.New("hookyard granted access after the cancellation")

// Config says where the running pipeline is.
type Config struct {
	// SimURL is the Stripe simulator's base URL, e.g. http://127.0.0.1:12111.
	SimURL string
	// ReceiverURL is the receiver's base URL, e.g. http://127.0.0.1:8080.
	ReceiverURL string
	// OpsURL is the query/ops API's base URL, e.g. http://127.0.0.1:8081.
	OpsURL string
	// OpsToken is the ops API's bearer token.
	OpsToken string
	// Endpoint is the Stripe endpoint the simulator delivers to: its id,
	// account, environment and first secret sign the late deliveries.
	Endpoint provider.Endpoint
	// Policy is the access policy the naive consumer's decision is made
	// with (the same rules as hookyard's, fed the last arrival).
	Policy access.Policy
	// Timeout bounds the whole demo. Defaults to TimeoutDefault.
	Timeout time.Duration
	// HTTPClient defaults to a client with a 10 s timeout.
	HTTPClient *http.Client
}

// Delivery is one webhook delivery the demo made or caused.
type Delivery struct {
	Step      string
	EventID   string
	EventType string
	Status    string // the subscription status the event carries
	HTTP      int
	Answer    string
}

// Result is what the demo observed.
type Result struct {
	SubscriptionID string
	Deliveries     []Delivery
	// Naive is the decision of a consumer that stores whatever arrived last.
	Naive access.Decision
	// Hookyard is the ops API's decision once every delivery was processed.
	Hookyard access.Decision
	Timeline explain.Timeline
}

type client struct {
	cfg  Config
	http *http.Client
}

// Run plays the demo and writes its story to out.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if len(cfg.Endpoint.Secrets) == 0 {
		return Result{}, fmt.Errorf("demo: endpoint %q has no secret", cfg.Endpoint.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c := &client{cfg: cfg, http: cfg.HTTPClient}
	if err := c.preflight(ctx); err != nil {
		return Result{}, err
	}

	var res Result
	var b [4]byte
	_, _ = rand.Read(b[:])
	res.SubscriptionID = "sub_demo_" + hex.EncodeToString(b[:])
	ep := cfg.Endpoint
	fmt.Fprintf(out, "hookyard demo: subscription %s at %s/%s/%s (endpoint %s)\n\n",
		res.SubscriptionID, ep.Provider, ep.SourceAccount, ep.Environment, ep.ID)

	// 1. Created active: the simulator delivers customer.subscription.created.
	var created simAnswer
	if err := c.post(ctx, cfg.SimURL+"/sim/subscriptions", map[string]any{"id": res.SubscriptionID, "status": "active"}, &created); err != nil {
		return res, fmt.Errorf("demo: create the subscription in the simulator: %w", err)
	}
	res.Deliveries = append(res.Deliveries, Delivery{Step: "created in the simulator, delivered", EventID: created.EventID,
		EventType: "customer.subscription.created", Status: created.Subscription.Status, HTTP: created.DeliveryStatus})
	if err := c.waitProcessed(ctx, created.EventID); err != nil {
		return res, err
	}
	// The "active" snapshot as it was before the cancellation: the event a
	// slow network path or a provider retry delivers after the cancellation.
	active := created.Subscription
	signer := stripesim.New(stripesim.Config{})
	lateID, lateBody := signer.Event("customer.subscription.updated", active)

	// 2. Canceled now: the simulator delivers customer.subscription.deleted.
	var canceled simAnswer
	if err := c.post(ctx, cfg.SimURL+"/sim/subscriptions/"+url.PathEscape(res.SubscriptionID)+"/cancel", map[string]any{"at_period_end": false}, &canceled); err != nil {
		return res, fmt.Errorf("demo: cancel the subscription in the simulator: %w", err)
	}
	res.Deliveries = append(res.Deliveries, Delivery{Step: "canceled now in the simulator, delivered first", EventID: canceled.EventID,
		EventType: "customer.subscription.deleted", Status: canceled.Subscription.Status, HTTP: canceled.DeliveryStatus})

	// 3. The older "active" event arrives second, then once more (a
	// duplicate delivery of the same event, signed anew as Stripe's retries are).
	for _, step := range []string{"older \"active\" event, delivered second", "the same event again (duplicate)"} {
		code, answer, err := c.deliver(ctx, lateBody)
		if err != nil {
			return res, err
		}
		res.Deliveries = append(res.Deliveries, Delivery{Step: step, EventID: lateID, EventType: "customer.subscription.updated",
			Status: active.Status, HTTP: code, Answer: answer})
	}
	for _, d := range res.Deliveries {
		if d.HTTP != http.StatusOK {
			return res, fmt.Errorf("demo: delivery of %s answered %d (is the endpoint's secret the receiver's?)", d.EventID, d.HTTP)
		}
	}
	if err := c.waitProcessed(ctx, canceled.EventID, lateID); err != nil {
		return res, err
	}

	// A naive consumer stores the last arrival's object and decides on it.
	last := res.Deliveries[len(res.Deliveries)-1]
	state, _ := json.Marshal(active)
	res.Naive = access.Decide(projection.Projection{Status: last.Status, State: state}, cfg.Policy, time.Now())
	if err := c.get(ctx, fmt.Sprintf("%s/v1/access/%s/%s/%s/%s", cfg.OpsURL, ep.Provider, url.PathEscape(ep.SourceAccount),
		url.PathEscape(ep.Environment), url.PathEscape(res.SubscriptionID)), &res.Hookyard); err != nil {
		return res, fmt.Errorf("demo: read hookyard's access decision: %w", err)
	}
	if err := c.get(ctx, fmt.Sprintf("%s/v1/explain/%s/%s/%s/subscription/%s", cfg.OpsURL, ep.Provider, url.PathEscape(ep.SourceAccount),
		url.PathEscape(ep.Environment), url.PathEscape(res.SubscriptionID)), &res.Timeline); err != nil {
		return res, fmt.Errorf("demo: read the timeline: %w", err)
	}
	res.print(out)
	if res.Hookyard.Access {
		return res, fmt.Errorf("demo: %w (reason %q)", ErrReopened, res.Hookyard.Reason)
	}
	return res, nil
}

func (r Result) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tdelivery\tevent\ttype\tcarries\treceiver")
	for i, d := range r.Deliveries {
		answer := fmt.Sprint(d.HTTP)
		if d.Answer != "" {
			answer += " " + d.Answer
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, d.Step, d.EventID, d.EventType, d.Status, answer)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "consumer\taccess\treason\thow it decides")
	fmt.Fprintf(tw, "naive, last arrival wins\t%s\t%s\tstores whatever was delivered last\n", granted(r.Naive.Access), r.Naive.Reason)
	fmt.Fprintf(tw, "hookyard\t%s\t%s\ta hint is a reason to fetch the provider's current state\n", granted(r.Hookyard.Access), r.Hookyard.Reason)
	_ = tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintf(out, "why (hookyard explain %s %s %s subscription %s):\n", r.Timeline.Resource.Provider, r.Timeline.Resource.SourceAccount,
		r.Timeline.Resource.Environment, r.SubscriptionID)
	_ = r.Timeline.WriteText(out)
}

func granted(b bool) string {
	if b {
		return "GRANTED"
	}
	return "closed"
}

type simAnswer struct {
	Subscription   stripesim.Subscription `json:"subscription"`
	EventID        string                 `json:"event_id"`
	DeliveryStatus int                    `json:"delivery_status"`
	DeliveryError  string                 `json:"delivery_error"`
}

// preflight names the service that does not answer, so a reader knows to
// start `make run` (or which address is wrong).
func (c *client) preflight(ctx context.Context) error {
	for _, s := range []struct{ name, url string }{
		{"Stripe simulator", c.cfg.SimURL + "/sim/stats"},
		{"receiver", c.cfg.ReceiverURL + "/healthz"},
		{"query/ops API", c.cfg.OpsURL + "/healthz"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
		if err != nil {
			return fmt.Errorf("demo: %s: %w", s.name, err)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("%w: the %s at %s does not answer (%v); start `make run` in another shell first", ErrNotRunning, s.name, s.url, err)
		}
		_ = resp.Body.Close()
	}
	return nil
}

func (c *client) deliver(ctx context.Context, body []byte) (int, string, error) {
	u := c.cfg.ReceiverURL + "/webhooks/" + url.PathEscape(c.cfg.Endpoint.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("demo: deliver: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", stripe.Sign(body, c.cfg.Endpoint.Secrets[0], time.Now()))
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("demo: deliver to %s: %w", u, err)
	}
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&a)
	return resp.StatusCode, cmp.Or(a.Status, a.Error), nil
}

// waitProcessed polls the ops API until every event is finished.
func (c *client) waitProcessed(ctx context.Context, ids ...string) error {
	ep := c.cfg.Endpoint
	for _, id := range ids {
		for {
			var row struct {
				Status      string     `json:"status"`
				ProcessedAt *time.Time `json:"processed_at"`
				LastError   *string    `json:"last_error"`
			}
			err := c.get(ctx, fmt.Sprintf("%s/v1/events/%s/%s/%s/%s", c.cfg.OpsURL, ep.Provider, url.PathEscape(ep.SourceAccount),
				url.PathEscape(ep.Environment), url.PathEscape(id)), &row)
			if err == nil && row.ProcessedAt != nil {
				break
			}
			select {
			case <-ctx.Done():
				last := fmt.Sprint(err)
				if err == nil {
					last = "status " + row.Status
					if row.LastError != nil {
						last += ", last error: " + *row.LastError
					}
				}
				return fmt.Errorf("demo: event %s was not processed within %s (%s): are the relay and the processor running?", id, c.cfg.Timeout, last)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func (c *client) post(ctx context.Context, u string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, out)
}

func (c *client) get(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.OpsToken)
	return c.do(req, out)
}

func (c *client) do(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}
