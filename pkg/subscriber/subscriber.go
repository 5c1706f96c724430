package subscriber

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	swh "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/message"
)

// KindPrefix starts the action kind of every subscriber's deliveries:
// "change:<name>".
const KindPrefix = "change:"

// Standard Webhooks headers.
const (
	IDHeader        = "webhook-id"
	TimestampHeader = "webhook-timestamp"
	SignatureHeader = "webhook-signature"
)

// SecretMinBytes is the shortest key accepted: the Standard Webhooks
// specification asks for keys of 24 to 64 bytes.
const SecretMinBytes = 24

// Subscriber is one `changes.subscribers` entry: where its changes are
// POSTed, the key they are signed with, and which changes it takes.
type Subscriber struct {
	// Name names the subscriber; its deliveries are actions of kind
	// "change:<name>". Letters, digits, "-" and "_". Required.
	Name string `yaml:"name"`
	// URL is where the changes are POSTed (absolute http or https).
	// Defaults to URLEnv's value; required.
	URL string `yaml:"url"`
	// URLEnv names an environment variable holding the URL; when set, it
	// overrides URL.
	URLEnv string `yaml:"url_env"`
	// SecretEnv names the environment variable holding the signing key
	// ("whsec_" + base64 of 24 to 64 bytes). Required.
	SecretEnv string `yaml:"secret_env"`
	// Secret is SecretEnv's value (set by the config's loading).
	Secret string `yaml:"-"`
	// Types are the resource types it takes (subscription, customer).
	// Defaults to every type.
	Types []string `yaml:"types"`
	// Accounts are the source accounts it takes. Defaults to every account.
	Accounts []string `yaml:"accounts"`
}

// Kind is the action kind of s's deliveries.
func (s Subscriber) Kind() string { return KindPrefix + s.Name }

// Takes reports whether s receives c.
func (s Subscriber) Takes(c message.Change) bool {
	return (len(s.Types) == 0 || slices.Contains(s.Types, c.Type)) &&
		(len(s.Accounts) == 0 || slices.Contains(s.Accounts, c.SourceAccount))
}

// Subscribers are the configured subscribers.
type Subscribers []Subscriber

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate checks each subscriber; its errors name the entry. secrets:
// check the signing keys too (only a service that sends reads them).
func (ss Subscribers) Validate(secrets bool) error {
	var errs []error
	seen := map[string]bool{}
	for i, s := range ss {
		where := fmt.Sprintf("changes.subscribers[%d]", i)
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		case !nameRE.MatchString(s.Name):
			errs = append(errs, fmt.Errorf("%s: name %q: only letters, digits, - and _", where, s.Name))
		case seen[s.Name]:
			errs = append(errs, fmt.Errorf("%s: name %s is declared twice", where, s.Name))
		}
		seen[s.Name] = true
		if s.URL == "" {
			errs = append(errs, fmt.Errorf("%s (%s): url (or url_env's variable) is required", where, s.Name))
		} else if err := action.CheckURL(s.URL); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s).url: %w", where, s.Name, err))
		}
		if s.SecretEnv == "" {
			errs = append(errs, fmt.Errorf("%s (%s): secret_env is required", where, s.Name))
		} else if err := CheckSecret(s.Secret); secrets && err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): secret from %s: %w", where, s.Name, s.SecretEnv, err))
		}
	}
	return errors.Join(errs...)
}

// CheckSecret refuses a key the official Standard Webhooks library cannot
// sign with, or one shorter than SecretMinBytes. It never says the key.
func CheckSecret(secret string) error {
	if secret == "" {
		return errors.New("empty (unset variable?)")
	}
	if !strings.HasPrefix(secret, "whsec_") {
		return errors.New(`not a Standard Webhooks signing key ("whsec_" + base64)`)
	}
	if _, err := swh.NewWebhook(secret); err != nil {
		return errors.New("the Standard Webhooks library cannot read it (padded standard base64 after whsec_)")
	}
	if n := len(strings.TrimPrefix(secret, "whsec_")) * 3 / 4; n < SecretMinBytes {
		return fmt.Errorf("about %d bytes; use %d to 64 (e.g. whsec_$(openssl rand -base64 32))", n, SecretMinBytes)
	}
	return nil
}

// Sign returns the Standard Webhooks headers of one attempt: id is the
// action's stable key (the same on every attempt), at the attempt's time,
// the signature (v1, by the official library) over id, time and body.
func Sign(secret, id string, at time.Time, body []byte) (http.Header, error) {
	wh, err := swh.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("standard webhooks key: %w", err)
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	h := http.Header{}
	h.Set(IDHeader, id)
	h.Set(TimestampHeader, strconv.FormatInt(at.Unix(), 10))
	h.Set(SignatureHeader, sig)
	return h, nil
}

// Subject is the action subject of a change: its resource and the
// observation it shows — "<type>/<id>@v<version>", "@f<fetch seq>", or
// "@v<version>f<fetch seq>" for a versioned resource's state fetched by a
// reconciliation check. Every record of one observation (a redelivery, a
// re-read, a republish of the stored projection) names one subject; two
// observations of a resource never share one. The resource id may hold
// "@": the observation is after the last one.
func Subject(c message.Change) string {
	s := OrderKey(c) + "@"
	if c.Version != nil {
		s += "v" + strconv.FormatInt(*c.Version, 10)
	}
	if c.FetchSeq != nil {
		s += "f" + strconv.FormatInt(*c.FetchSeq, 10)
	}
	if c.Version == nil && c.FetchSeq == nil && c.FetchedAt != nil {
		// A fetched state from before fetch sequence numbers: its fetch
		// time is its observation.
		s += "t" + strconv.FormatInt(c.FetchedAt.UnixNano(), 10)
	}
	return s
}

// OrderKey is the stream a change is ordered in: its resource (the
// account is in the action's key already).
func OrderKey(c message.Change) string { return c.Type + "/" + c.ID }

// Record is the action that delivers change c (raw: the record's value) to
// s.
func (s Subscriber) Record(c message.Change, raw []byte) action.OrderedRecord {
	return action.OrderedRecord{
		Record: action.Record{Key: action.Key{Provider: c.Provider, SourceAccount: c.SourceAccount, Environment: c.Environment,
			SubjectID: Subject(c), Kind: s.Kind()}, EventID: c.EventID, Body: raw},
		OrderKey: OrderKey(c),
	}
}
