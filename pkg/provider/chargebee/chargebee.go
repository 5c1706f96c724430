// Package chargebee is everything hookyard knows about Chargebee: it
// verifies deliveries, which authenticate with HTTP Basic credentials rather
// than a signature, and reads their identity (Verifier); says what an event
// asks of the processor (Interpret: a versioned snapshot, a paid invoice);
// lists a site's events for the reconciler (Client, Events, Connect); and
// checks its endpoints' settings (CheckEndpoint).
//
// It owns credential checking and the choice of the resource an event is
// about. It never writes hookyard's state, which is the processor's. It
// must never decide site, account or environment from the body:
// Chargebee events carry no livemode flag and those come from the Endpoint
// alone. Basic auth carries no timestamp, so there is no staleness check here;
// replays are absorbed by deduplication on the event id.
package chargebee

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookyard/hookyard/pkg/provider"
)

// AuthorizationHeader is the header Chargebee sends its credentials in.
const AuthorizationHeader = "Authorization"

// Verifier is the Chargebee adapter.
type Verifier struct{}

// preferred is the order in which a content object is chosen as the event's
// resource when the event type names none; other keys follow, sorted.
var preferred = []string{"subscription", "customer", "invoice"}

type event struct {
	ID         string                     `json:"id"`
	EventType  string                     `json:"event_type"`
	OccurredAt int64                      `json:"occurred_at"`
	Content    map[string]json.RawMessage `json:"content"`
}

// Verify checks the Basic credentials against every "username:password" entry
// of ep.Secrets (several during a rotation) and reads the event. Deletion
// events ("*_deleted") are ordinary events here: tombstones are the
// processor's business.
func (Verifier) Verify(ep *provider.Endpoint, h http.Header, body []byte, now time.Time) (provider.Event, error) {
	user, pass, err := parseBasic(h.Get(AuthorizationHeader))
	if err != nil {
		return provider.Event{}, fmt.Errorf("%w: %w", provider.ErrUnauthenticated, err)
	}
	if !matchAny(ep.Secrets, user, pass) {
		return provider.Event{}, fmt.Errorf("%w: credentials do not match", provider.ErrUnauthenticated)
	}
	return Verifier{}.Identify(ep, body, now)
}

// Identify reads an event whose authenticity is already established: a
// delivery whose credentials matched, or an event the events API returned
// to the site's own API key (the reconciler's events scan). Both read
// identity here, so an event ingested from the API and its later delivery
// are one event.
func (Verifier) Identify(ep *provider.Endpoint, body []byte, now time.Time) (provider.Event, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return provider.Event{}, fmt.Errorf("%w: body is not a JSON object", provider.ErrMalformed)
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return provider.Event{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	// Postgres keeps other keys of a duplicate than encoding/json reads:
	// the version checked here must be the one the processor applies.
	if err := provider.CheckUniqueKeys(body); err != nil {
		return provider.Event{}, err
	}
	if ev.ID == "" || ev.EventType == "" {
		return provider.Event{}, fmt.Errorf("%w: event has no id or event_type", provider.ErrMalformed)
	}
	out := provider.Event{ID: ev.ID, Type: ev.EventType, Payload: body, ValidJSON: true}
	if ev.OccurredAt > 0 {
		out.OccurredAt = time.Unix(ev.OccurredAt, 0).UTC()
	}
	var err error
	out.ResourceType, out.ResourceID, out.Version, err = resourceOf(&ev)
	if err != nil {
		return provider.Event{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	// resource_version is the time of the change in milliseconds.
	if out.Version != nil {
		if err := provider.CheckTimeVersion(ep, *out.Version, now); err != nil {
			return out, fmt.Errorf("resource_version: %w", err)
		}
	}
	return out, nil
}

// VersionSkewDefault is how far ahead of the clock a resource_version may
// lie unless the endpoint sets version_skew.
const VersionSkewDefault = provider.VersionSkewDefault

// parseBasic reads an RFC 7617 Basic credential. The scheme is
// case-insensitive; the base64 must be canonical so one credential has one
// spelling.
func parseBasic(v string) (user, pass string, err error) {
	if v == "" {
		return "", "", fmt.Errorf("no %s header", AuthorizationHeader)
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", fmt.Errorf("%s is not Basic", AuthorizationHeader)
	}
	cred = strings.TrimSpace(cred)
	if strings.ContainsAny(cred, "\r\n") {
		// The decoder skips CR and LF; refuse them so the value stays canonical.
		return "", "", fmt.Errorf("bad Basic credentials")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(cred)
	if err != nil {
		return "", "", fmt.Errorf("bad Basic credentials: %w", err)
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("bad Basic credentials: no colon")
	}
	return user, pass, nil
}

// matchAny compares the credentials with every secret without stopping at a
// match, and compares SHA-256 digests so that neither the position of the
// matching secret nor the length of any part shows in the timing.
func matchAny(secrets []string, user, pass string) bool {
	gu, gp := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	match := 0
	for _, s := range secrets {
		su, sp, ok := strings.Cut(s, ":")
		usable := 0
		if ok && su != "" && sp != "" {
			// A secret without a username or without a password is
			// misconfigured (an unset variable in "${U}:${P}"); it must never
			// match, or an empty password would authenticate.
			usable = 1
		}
		wu, wp := sha256.Sum256([]byte(su)), sha256.Sum256([]byte(sp))
		match |= usable & subtle.ConstantTimeCompare(gu[:], wu[:]) & subtle.ConstantTimeCompare(gp[:], wp[:])
	}
	return match == 1
}

// object is the part of a content object that names a resource.
type object struct {
	ID              string `json:"id"`
	ResourceVersion any    `json:"resource_version"`
	SubscriptionID  string `json:"subscription_id"`
}

// resourceOf picks the event's primary content object: the one its type
// names, else the first present in preference order. An invoice goes with its
// subscription so that facts about a subscription are handled in sequence
// with its state; the invoice's version then says nothing about the
// subscription. The version returned is the subscription object's when the
// content carries it (Chargebee sends it beside the invoice), else none:
// the processor applies exactly the version returned here, the one checked
// against version_skew.
func resourceOf(ev *event) (typ, id string, version *int64, err error) {
	keys := make([]string, 0, len(preferred)+len(ev.Content))
	for _, k := range preferred {
		if strings.HasPrefix(ev.EventType, k+"_") {
			keys = append(keys, k)
		}
	}
	keys = append(keys, preferred...)
	rest := make([]string, 0, len(ev.Content))
	for k := range ev.Content {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	keys = append(keys, rest...)

	for _, k := range keys {
		raw, ok := ev.Content[k]
		if !ok || k == "" {
			continue // an unnamed object cannot name a resource type
		}
		if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			continue // not an object, e.g. a list of line items
		}
		var o object
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&o); err != nil {
			if slices.Contains(preferred, k) {
				return "", "", nil, fmt.Errorf("content.%s: %w", k, err)
			}
			continue // an odd object we do not track must not refuse the event
		}
		if o.ID == "" {
			continue
		}
		if k == "invoice" && o.SubscriptionID != "" {
			v, err := subscriptionVersion(ev, o.SubscriptionID)
			if err != nil {
				return "", "", nil, err
			}
			return "subscription", o.SubscriptionID, v, nil
		}
		v, err := versionOf(o.ResourceVersion)
		if err != nil {
			return "", "", nil, fmt.Errorf("content.%s.resource_version: %w", k, err)
		}
		return k, o.ID, v, nil
	}
	return "", "", nil, nil
}

// subscriptionVersion is the resource_version of the content's
// subscription object when that object is subscription id.
func subscriptionVersion(ev *event, id string) (*int64, error) {
	raw, ok := ev.Content["subscription"]
	if !ok {
		return nil, nil
	}
	var o object
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&o); err != nil {
		return nil, fmt.Errorf("content.subscription: %w", err)
	}
	if o.ID != id {
		return nil, nil
	}
	v, err := versionOf(o.ResourceVersion)
	if err != nil {
		return nil, fmt.Errorf("content.subscription.resource_version: %w", err)
	}
	return v, nil
}

// versionOf reads resource_version, an integer (milliseconds) in Chargebee's
// payloads; a numeric string is accepted too.
func versionOf(v any) (*int64, error) {
	var s string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.Number:
		s = string(x)
	case string:
		s = x
	default:
		return nil, fmt.Errorf("not an integer: %T", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("not an integer: %w", err)
	}
	return &n, nil
}

// BasicAuth returns the Authorization header value Chargebee sends for user
// and pass. The simulator and tests use it.
func BasicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}
