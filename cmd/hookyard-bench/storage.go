package main

// Section S, storage: today's layout against the one in this checkout, side
// by side, on the same traffic. Each side is a hookyard binary run as
// `hookyard dev` (and `hookyard receiver`, and its ops commands) on a
// database of its own, migrated by that binary: the baseline is built from
// a git revision (-storage-baseline-rev), the new side is this checkout's
// binary (or -bin). The bench knows neither schema: it reads sizes, WAL and
// dead tuples from the catalogue, and fills tables by their columns.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/db"
)

// Parts of the storage section, each runnable alone with -storage-parts.
const (
	partTraffic = "traffic" // bytes and WAL per event, retention pass on that traffic
	partPurge   = "purge"   // retention pass at -storage-purge-rows rows filled by SQL
	partSoak    = "soak"    // steady rate, short horizon, size at each horizon boundary
	partLadder  = "ladder"  // rate search until a rate misses, Postgres CPU per event
)

var storageParts = []string{partTraffic, partPurge, partSoak, partLadder}

// storageSide is one layout: the binary that owns it and how its retention
// is configured and run.
type storageSide struct {
	key   string // database suffix and JSON key: "today" or "new"
	label string // column heading
	bin   string
	// newKeys: the side's config carries the partitioned layout's retention
	// keys (retention.partition_interval and the horizons). Cleared when the
	// binary's config refuses them (it predates them), with a note.
	newKeys bool
	// retentionCmd is the ops command of the side's retention pass; nil runs
	// today's `purge -older-than HORIZON`.
	retentionCmd []string
	notes        []string
}

func (s *storageSide) note(format string, a ...any) {
	n := s.label + ": " + fmt.Sprintf(format, a...)
	for _, have := range s.notes {
		if have == n {
			return
		}
	}
	s.notes = append(s.notes, n)
}

// storageSection runs the parts named by -storage-parts for both layouts.
func (b *bench) storageSection(ctx context.Context) error {
	all, err := b.storageSides(ctx)
	if err != nil {
		return err
	}
	var sides []*storageSide
	for _, s := range all {
		if b.opts.storageSides[s.key] {
			sides = append(sides, s)
		}
	}
	var errs []error
	run := func(part string, f func(context.Context, []*storageSide) error) {
		if !b.opts.storageParts[part] || ctx.Err() != nil {
			return
		}
		if err := f(ctx, sides); err != nil {
			errs = append(errs, fmt.Errorf("storage %s: %w", part, err))
		}
	}
	run(partTraffic, b.storageTraffic)
	run(partPurge, b.storagePurge)
	run(partSoak, b.storageSoak)
	run(partLadder, b.storageLadder)
	return errors.Join(errs...)
}

// storageSides builds (or finds) both binaries and asks the new one which
// retention command it has.
func (b *bench) storageSides(ctx context.Context) ([]*storageSide, error) {
	baseBin := b.opts.storageBaselineBin
	rev := b.opts.storageBaselineRev
	if baseBin == "" {
		var err error
		if baseBin, rev, err = b.baselineBinary(ctx, rev); err != nil {
			return nil, err
		}
	}
	newBin, err := b.hookyardBinary(ctx)
	if err != nil {
		return nil, err
	}
	today := &storageSide{key: "today", label: "today (" + shortRev(rev) + ")", bin: baseBin}
	head := "this checkout"
	if b.opts.bin != "" {
		head = "-bin"
	} else if out, err := gitOutput(ctx, "", "rev-parse", "--short=7", "HEAD"); err == nil {
		head = strings.TrimSpace(out)
		if dirty, _ := gitOutput(ctx, "", "status", "--porcelain", "--untracked-files=no"); strings.TrimSpace(dirty) != "" {
			head += "+changes"
		}
	}
	nw := &storageSide{key: "new", label: "new (" + head + ")", bin: newBin, newKeys: true}
	if f := strings.Fields(b.opts.storageRetentionCmd); len(f) > 0 {
		has, err := binHasCommand(ctx, newBin, f[0])
		if err != nil {
			return nil, err
		}
		if has {
			nw.retentionCmd = f
		} else {
			nw.note("the binary has no `%s` command (-storage-retention-cmd): its retention pass ran today's `purge -older-than`", f[0])
		}
	}
	return []*storageSide{today, nw}, nil
}

func shortRev(rev string) string {
	if len(rev) > 7 && !strings.ContainsAny(rev, "/.~^") {
		return rev[:7]
	}
	return rev
}

// baselineBinary builds the hookyard binary of rev (git archive of the
// commit, go build) once per commit into $TMPDIR/hookyard-bench-rev/<sha>,
// and returns it with the commit's full hash.
func (b *bench) baselineBinary(ctx context.Context, rev string) (string, string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", "", err
	}
	out, err := gitOutput(ctx, root, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("-storage-baseline-rev %q: %w", rev, err)
	}
	sha := strings.TrimSpace(out)
	dir := filepath.Join(os.TempDir(), "hookyard-bench-rev", sha)
	bin := filepath.Join(dir, "hookyard")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		b.step("storage: baseline binary of %s from cache %s", shortRev(sha), bin)
		return bin, sha, nil
	}
	b.step("storage: building the baseline binary of %s (git archive, go build)", shortRev(sha))
	src, err := os.MkdirTemp("", "hookyard-bench-src-")
	if err != nil {
		return "", "", fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(src)
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", sha)
	archive.Dir = root
	tarball, err := archive.Output()
	if err != nil {
		return "", "", fmt.Errorf("git archive %s: %w", sha, err)
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	untar.Stdin = bytes.NewReader(tarball)
	if out, err := untar.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("untar %s: %w\n%s", sha, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("baseline cache dir: %w", err)
	}
	// Built under a temporary name and renamed: an interrupted build leaves
	// no binary the cache would take for a whole one.
	tmp := bin + ".building"
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build %s: %w\n%s", sha, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", "", fmt.Errorf("baseline binary: %w", err)
	}
	return bin, sha, nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the hookyard module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// binHasCommand reports whether bin's usage text lists the command name.
func binHasCommand(ctx context.Context, bin, name string) (bool, error) {
	out, err := exec.CommandContext(ctx, bin, "help").Output()
	if err != nil {
		return false, fmt.Errorf("%s help: %w", bin, err)
	}
	return usageHasCommand(string(out), name), nil
}

// usageHasCommand finds name as the first word of a usage line indented by
// two spaces, as hookyard's command table prints every command.
func usageHasCommand(usage, name string) bool {
	for _, l := range strings.Split(usage, "\n") {
		rest, ok := strings.CutPrefix(l, "  ")
		if !ok || strings.HasPrefix(rest, " ") {
			continue
		}
		if f := strings.Fields(rest); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

// storageDBURL is the bench database's URL with "_storage_<suffix>"
// appended to its name: a database of this section, dropped and created
// for each part.
func storageDBURL(base, suffix string) (string, string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", "", fmt.Errorf("parse -db: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return "", "", fmt.Errorf("-db %q names no database", redactURL(base))
	}
	name += "_storage_" + suffix
	u.Path = "/" + name
	return u.String(), name, nil
}

// retentionYAML is the side's retention config for a horizon: today's
// layout purges payloads (payload_age, when purge is set: the reconciler
// then purges every round); the new layout also gets the partition keys.
// min_purge_age goes down to a second so that horizons of minutes pass its
// check. -storage-new-config replaces the new side's generated keys.
func (b *bench) retentionYAML(s *storageSide, horizon, interval time.Duration, purge bool) (string, error) {
	if s.newKeys && b.opts.storageNewConfig != "" {
		raw, err := os.ReadFile(b.opts.storageNewConfig)
		if err != nil {
			return "", fmt.Errorf("-storage-new-config: %w", err)
		}
		return string(raw), nil
	}
	var y strings.Builder
	fmt.Fprintf(&y, "retention:\n  min_purge_age: 1s\n")
	if purge || s.newKeys {
		fmt.Fprintf(&y, "  payload_age: %s\n", horizon)
	}
	if s.newKeys {
		// The keys of the partitioned layout: whole partitions of interval
		// go once they are behind the horizon. In the soak identities go
		// too (`hookyard dev` may shorten identity_age below the floor
		// every service keeps, config.IdentityAgeMin), so the ledger's size
		// settles within the run as well; elsewhere they are kept, as
		// today's layout keeps them, and a pass drops bodies only.
		fmt.Fprintf(&y, "  partition_interval: %s\n  history_age: %s\n  dead_payload_age: %s\n", interval, horizon, horizon)
		if purge {
			fmt.Fprintf(&y, "  identity_age: %s\n", horizon)
		}
	}
	// `hookyard dev` runs a round at least every 30 s; shorter if asked.
	// Each round runs a retention pass; a round every soakRound (not
	// every interval) drops a partition within seconds of its passing
	// the horizon, so the database's size at a sample does not depend on
	// where the round fell within the interval.
	fmt.Fprintf(&y, "reconciler:\n  interval: %s\n", min(interval, soakRound))
	return y.String(), nil
}

// soakRound is the reconciler's (and so the retention pass's) longest
// interval in the storage parts.
const soakRound = 10 * time.Second

// prepareSide creates the side's database for a part, writes its config
// and migrates it with the side's binary. A binary whose config refuses the
// new keys (it predates them) gets today's keys instead, with a note.
func (b *bench) prepareSide(ctx context.Context, s *storageSide, part string, horizon, interval time.Duration, purge bool) (dbURL, cfgPath, auth string, err error) {
	dbURL, name, err := storageDBURL(b.opts.dbURL, s.key)
	if err != nil {
		return "", "", "", err
	}
	b.step("storage %s, %s: fresh database %s", part, s.label, name)
	if err := b.recreateDatabase(ctx, dbURL, name); err != nil {
		return "", "", "", err
	}
	for {
		extra, err := b.retentionYAML(s, horizon, interval, purge)
		if err != nil {
			return "", "", "", err
		}
		cfgPath, auth, err = b.pipeConfig(b.workDir(), "storage-"+s.key+".yaml", extra)
		if err != nil {
			return "", "", "", err
		}
		err = binMigrate(ctx, s.bin, cfgPath, dbURL)
		if err != nil && s.newKeys && b.opts.storageNewConfig == "" && strings.Contains(err.Error(), "not found in type") {
			s.newKeys = false
			s.note("the binary's config has no partition keys (retention.partition_interval …): ran with today's retention keys")
			continue
		}
		if err != nil {
			return "", "", "", err
		}
		if s.retentionCmd != nil {
			if s.newKeys {
				// A fresh schema's first partitions span days (the
				// migration's body partition its day and the next two,
				// history and audit up to the cutover two days ahead):
				// nothing would go behind a horizon of minutes. A database
				// past those days has only partition_interval-wide ones:
				// the empty first ones go, the pass below creates those.
				pool, err := b.openSide(ctx, dbURL)
				if err != nil {
					return "", "", "", err
				}
				err = dropEmptyPartitions(ctx, pool)
				pool.Close()
				if err != nil {
					return "", "", "", err
				}
			}
			// A pass on the empty schema first: a maintainer that creates
			// partitions ahead does so before the receiver or the fill
			// writes the first row (the services' own rounds come later).
			if err := newRetentionPass(ctx, s, cfgPath, dbURL); err != nil {
				s.note("retention pass on the empty schema failed: %v", err)
			}
		}
		return dbURL, cfgPath, auth, nil
	}
}

// opsEnv is the environment of a side's ops command or service on dbURL.
func opsEnv(dbURL string) []string {
	return []string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", "OPS_TOKEN_FILE="}
}

// runBin runs `bin -config cfgPath args...` on dbURL and returns its stdout.
func runBin(ctx context.Context, bin, cfgPath, dbURL string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"-config", cfgPath}, args...)...)
	cmd.Env = append(os.Environ(), opsEnv(dbURL)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("hookyard %s: %w: %s", strings.Join(args, " "), err, lastLines(strings.TrimSpace(stderr.String()), 5))
	}
	return string(out), nil
}

// binMigrate creates the schema of bin's own migrations on dbURL.
func binMigrate(ctx context.Context, bin, cfgPath, dbURL string) error {
	_, err := runBin(ctx, bin, cfgPath, dbURL, "migrate")
	return err
}

// retentionPass runs the side's retention once, for horizon: today's purge
// command, or the new layout's (newRetentionPass).
func retentionPass(ctx context.Context, s *storageSide, cfgPath, dbURL string, horizon time.Duration) error {
	if s.retentionCmd != nil {
		return newRetentionPass(ctx, s, cfgPath, dbURL)
	}
	_, err := runBin(ctx, s.bin, cfgPath, dbURL, "purge", "-older-than", horizon.String())
	return err
}

// newRetentionPass is the new layout's retention: it runs
// `hookyard <-storage-retention-cmd>` (default `retention`) with the side's
// config, whose retention keys carry the horizons. A binary without that
// command runs today's `purge` instead, with a note.
func newRetentionPass(ctx context.Context, s *storageSide, cfgPath, dbURL string) error {
	_, err := runBin(ctx, s.bin, cfgPath, dbURL, s.retentionCmd...)
	return err
}

// openSide opens a small pool on a side's database for the bench's reads.
func (b *bench) openSide(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	return db.Open(ctx, dbURL, db.Options{MaxConns: 2, ApplicationName: "hookyard-bench-storage"})
}

// waitPast sleeps until t, reporting why.
func (b *bench) waitPast(ctx context.Context, t time.Time, why string) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	b.step("storage: waiting %s %s", d.Round(time.Second), why)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// horizonWait is how long after the newest row a retention pass may have to
// wait to find it behind the horizon: the horizon, plus a whole partition
// interval (a partition goes only when its upper bound is behind), plus a
// margin for clocks and rounding.
func horizonWait(horizon, interval time.Duration) time.Duration {
	return horizon + interval + 5*time.Second
}

// partitionedTables are the new layout's time-partitioned tables.
var partitionedTables = []string{"webhook_inbox_body", "projection_history", "ops_audit"}

// dropEmptyPartitions drops the empty partitions of partitionedTables (see
// prepareSide).
func dropEmptyPartitions(ctx context.Context, pool *pgxpool.Pool) error {
	for _, t := range partitionedTables {
		rows, err := pool.Query(ctx, `SELECT relid::regclass::text FROM pg_partition_tree(to_regclass($1)) WHERE isleaf AND level > 0`, t)
		if err != nil {
			return fmt.Errorf("partitions of %s: %w", t, err)
		}
		parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("partitions of %s: %w", t, err)
		}
		for _, p := range parts {
			var empty bool
			if err := pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM `+p+`)`).Scan(&empty); err != nil {
				return fmt.Errorf("partition %s: %w", p, err)
			}
			if !empty {
				continue
			}
			if _, err := pool.Exec(ctx, `DROP TABLE `+p); err != nil {
				return fmt.Errorf("drop empty partition %s: %w", p, err)
			}
		}
	}
	return nil
}
