package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/hookyard/hookyard/internal/receiptsim"
	"github.com/hookyard/hookyard/internal/testkit/freeport"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// Names the harness gives the system under test.
const (
	topicName       = "hookyard.events"
	stripeEndpoint  = "chaos-stripe"
	stripeAccount   = "acct_chaos"
	cbEndpoint      = "chaos-chargebee"
	cbSite          = "chaos-site"
	environmentName = "test"
)

// system is the running services, their database, Kafka and the simulator.
type system struct {
	cfg    Config
	log    *slog.Logger
	dir    string
	ownDir bool

	adminURL, dbURL, dbName string
	pool                    *pgxpool.Pool

	kafka   *kfake.Cluster
	brokers []string
	group   string
	topic   string

	sim       *stripesim.Sim
	simServer *http.Server
	simURL    string
	apiKey    string

	stripeSecret, cbUser, cbPass, opsToken string
	receiverURL, opsURL                    string

	receipts   *receiptsim.Server
	receiptSrv *http.Server
	receiptURL string

	api, receiver, reconciler *proc
	relays, processors, extra []*proc
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// start brings the system up: database, Kafka, simulator, config, services.
func start(ctx context.Context, cfg Config) (s *system, err error) {
	s = &system{cfg: cfg, log: cfg.Log, dir: cfg.Dir}
	defer func() {
		if err != nil {
			s.close(context.Background())
		}
	}()
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "hookyard-chaos-"); err != nil {
			return s, err
		}
		s.ownDir = true
	}
	// Secrets of this run only: the services refuse the example config's.
	s.stripeSecret = "whsec_chaos_" + randHex(16)
	s.cbUser, s.cbPass = "chaos", randHex(16)
	s.opsToken = randHex(24)
	s.apiKey = "sk_test_chaos_" + randHex(8)

	s.group, s.topic = "hookyard-chaos-"+randHex(4), topicName
	if len(cfg.KafkaBrokers) > 0 {
		s.topic = "hookyard.chaos." + randHex(4) // a real cluster may hold other runs' topics
	}
	if err := s.writeConfig(); err != nil {
		return s, err
	}
	if err := s.startDatabase(ctx); err != nil {
		return s, err
	}
	if len(cfg.KafkaBrokers) > 0 {
		s.brokers = cfg.KafkaBrokers
	} else {
		s.kafka, err = kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(cfg.Partitions, s.topic))
		if err != nil {
			return s, fmt.Errorf("chaos: start kafka: %w", err)
		}
		s.brokers = s.kafka.ListenAddrs()
	}
	if err := s.startSimulator(); err != nil {
		return s, err
	}
	if err := s.startServices(ctx); err != nil {
		return s, err
	}
	return s, nil
}

func (s *system) startDatabase(ctx context.Context) error {
	u, err := url.Parse(s.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("chaos: parse database url: %w", err)
	}
	s.dbName = "hookyard_chaos_" + randHex(6)
	admin := *u
	admin.Path = "/postgres"
	s.adminURL = admin.String()
	db := *u
	db.Path = "/" + s.dbName
	s.dbURL = db.String()
	// `hookyard migrate` creates and migrates the database once, before
	// the services (which would each try to) start.
	cmd := exec.CommandContext(ctx, s.cfg.Binary, "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+s.dbURL, "LOG_LEVEL=warn", "HOOKYARD_CONFIG="+s.configPath())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: migrate %s: %w: %s", s.dbName, err, out)
	}
	s.pool, err = pgxpool.New(ctx, s.dbURL)
	if err != nil {
		return fmt.Errorf("chaos: open %s: %w", s.dbName, err)
	}
	return nil
}

func (s *system) startSimulator() error {
	addr, err := freeport.Addr()
	if err != nil {
		return err
	}
	rcvAddr, err := freeport.Addr()
	if err != nil {
		return err
	}
	s.receiverURL = "http://" + rcvAddr
	s.sim = stripesim.New(stripesim.Config{Keys: map[string]string{s.apiKey: stripesim.DevAccount}})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("chaos: stripe simulator: %w", err)
	}
	s.simURL = "http://" + ln.Addr().String()
	s.simServer = &http.Server{Handler: s.sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.simServer.Serve(ln) }()

	// A standard idempotent server (409 in progress, stored 2xx replayed,
	// 422 for another body): a sender that leans on a lenient one shows.
	s.receipts = receiptsim.New(nil)
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("chaos: receipt server: %w", err)
	}
	s.receiptURL = "http://" + rln.Addr().String() + "/receipts"
	s.receiptSrv = &http.Server{Handler: s.receipts, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.receiptSrv.Serve(rln) }()
	return nil
}

func (s *system) configPath() string { return filepath.Join(s.dir, "hookyard-chaos.yaml") }

func (s *system) writeConfig() error {
	conf := fmt.Sprintf(`# written by hookyard chaos for one run
endpoints:
  - id: %s
    provider: stripe
    source_account: %s
    environment: %s
    secrets: [%q]
    event_types: ["customer.subscription.*", "invoice.paid"]
    api_key: %q
  - id: %s
    provider: chargebee
    source_account: %s
    environment: %s
    secrets: [%q]
kafka:
  topic: %s
  changes_topic: %s.changes
  partitions: %d
  group: %s
processor:
  backoff_base: 200ms
  backoff_max: 2s
reconciler:
  interval: %s
relay:
  poll_interval: 100ms
`, stripeEndpoint, stripeAccount, environmentName, s.stripeSecret, s.apiKey,
		cbEndpoint, cbSite, environmentName, s.cbUser+":"+s.cbPass,
		s.topic, s.topic, s.cfg.Partitions, s.group, s.cfg.ReconcileInterval)
	return os.WriteFile(s.configPath(), []byte(conf), 0o600)
}

// newProc prepares a service process with its own metrics port.
func (s *system) newProc(name, sub string, extraEnv ...string) (*proc, error) {
	maddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	env := []string{
		"DATABASE_URL=" + s.dbURL, "KAFKA_BROKERS=" + strings.Join(s.brokers, ","),
		"STRIPE_API_BASE=" + s.simURL, "OPS_TOKEN=" + s.opsToken, "HOOKYARD_CONFIG=" + s.configPath(),
		"LOG_LEVEL=" + s.cfg.LogLevel, "METRICS_ADDR=" + maddr, "RECEIPT_WEBHOOK_URL=" + s.receiptURL,
	}
	p := &proc{name: name, bin: s.cfg.Binary, args: []string{sub}, env: append(env, extraEnv...),
		logPath: logFile(s.dir, name), health: "http://" + maddr + "/healthz"}
	return p, nil
}

func (s *system) startServices(ctx context.Context) error {
	opsAddr, err := freeport.Addr()
	if err != nil {
		return err
	}
	s.opsURL = "http://" + opsAddr
	if s.api, err = s.newProc("api", "api", "OPS_ADDR="+opsAddr); err != nil {
		return err
	}
	s.api.health = s.opsURL + "/healthz"
	if s.receiver, err = s.newProc("receiver", "receiver", "HTTP_ADDR="+strings.TrimPrefix(s.receiverURL, "http://")); err != nil {
		return err
	}
	for i := range s.cfg.Relays {
		p, err := s.newProc(fmt.Sprintf("relay-%d", i+1), "outbox-relay")
		if err != nil {
			return err
		}
		s.relays = append(s.relays, p)
	}
	for i := range s.cfg.Processors {
		p, err := s.newProc(fmt.Sprintf("processor-%d", i+1), "processor")
		if err != nil {
			return err
		}
		s.processors = append(s.processors, p)
	}
	if s.reconciler, err = s.newProc("reconciler", "reconciler"); err != nil {
		return err
	}
	// The effects sender and other services to come: any subcommand named
	// in Config.ExtraServices runs with the same environment.
	for _, sub := range s.cfg.ExtraServices {
		p, err := s.newProc(sub, sub)
		if err != nil {
			return err
		}
		s.extra = append(s.extra, p)
	}
	all := append(append(append([]*proc{s.api, s.receiver}, s.relays...), s.processors...), s.reconciler)
	all = append(all, s.extra...)
	for _, p := range all {
		if err := p.start(); err != nil {
			return err
		}
	}
	for _, p := range all {
		if err := p.waitHealthy(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (s *system) all() []*proc {
	out := []*proc{s.api, s.receiver, s.reconciler}
	out = append(out, s.relays...)
	out = append(out, s.processors...)
	out = append(out, s.extra...)
	var live []*proc
	for _, p := range out {
		if p != nil {
			live = append(live, p)
		}
	}
	return live
}

// close stops every process, drops the run's database and removes its
// directory (kept when Config.Dir named it, or when KeepLogs is set).
func (s *system) close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range s.all() {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
	if s.simServer != nil {
		_ = s.simServer.Close()
	}
	if s.receiptSrv != nil {
		_ = s.receiptSrv.Close()
	}
	if s.kafka != nil {
		s.kafka.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.dbName != "" && !s.cfg.KeepDatabase {
		if conn, err := pgx.Connect(ctx, s.adminURL); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.dbName}.Sanitize()+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
	}
	if s.ownDir && !s.cfg.KeepLogs {
		_ = os.RemoveAll(s.dir)
	}
}

// tail returns the last bytes of a process's log, for a failure message.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	if st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// receiptCounts reads what the receipt server (in for RECEIPT_WEBHOOK_URL)
// saw: how many distinct keys arrived, how many arrived more than once, how
// many arrived again after sentAt[key] (when hookyard recorded the definite
// success), and how many receipts it produced. A key may legitimately
// arrive twice (a sender killed between the 2xx and its status write sends
// again, same key, and gets the stored answer); one arriving after hookyard
// recorded the action sent is a violation.
func receiptCounts(sim *receiptsim.Server, sentAt map[string]time.Time) (total, resent, afterSuccess, produced int) {
	seen := map[string][]time.Time{}
	for _, r := range sim.Requests() {
		seen[r.Key] = append(seen[r.Key], r.At)
	}
	for k, times := range seen {
		total++
		if len(times) > 1 {
			resent++
		}
		if done, ok := sentAt[k]; ok {
			for _, t := range times {
				if t.After(done) {
					afterSuccess++
					break
				}
			}
		}
	}
	return total, resent, afterSuccess, len(sim.Completed())
}
