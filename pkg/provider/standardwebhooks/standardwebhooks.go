// Package standardwebhooks verifies deliveries signed per the Standard
// Webhooks specification (webhook-id, webhook-timestamp, webhook-signature)
// with the reference library, reads their identity through the endpoint's
// configured JSON paths, and says what they ask of the processor
// (Interpret: a versioned snapshot, or a hint). It is the minimal provider:
// no simulator, one setting of its own, `fetch`: a sender's URL serving a
// resource's current state, which makes an unversioned event a hint the
// processor fetches (fetch.go; CheckEndpoint checks it and every secret).
//
// It owns signature and timestamp checking and the reading of configured
// paths. It never writes hookyard's state, which is the processor's. It
// must never decide account or environment from the body: those
// come from the Endpoint alone. Both of the specification's signature
// schemes are verified: symmetric "whsec_" secrets (v1, HMAC-SHA256, with
// the reference library) and asymmetric "whpk_" public keys (v1a, ed25519).
package standardwebhooks

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	swh "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Headers of a Standard Webhooks delivery.
const (
	IDHeader        = swh.HeaderWebhookID
	TimestampHeader = swh.HeaderWebhookTimestamp
	SignatureHeader = swh.HeaderWebhookSignature
)

// libraryTolerance is the tolerance the library enforces; it cannot be changed.
const libraryTolerance = 5 * time.Minute

// Defaults for Paths.
const (
	DefaultEventTypePath = "type"
	DefaultResourceType  = "subscription"
)

// Verifier is the Standard Webhooks adapter.
type Verifier struct{}

// Verify checks the signature against every secret of the endpoint (several
// during a rotation) and the timestamp against the tolerance, then reads the
// event through ep.Paths.
//
// The event id is the webhook-id header. The type is at Paths.EventType
// ("type" by default). The resource id is at Paths.ResourceID; when that is
// unset or absent from the body the event is about no resource. The resource
// type is at Paths.ResourceType, else Paths.ResourceTypeValue, else
// "subscription". When Paths.Version is set a resource's event must carry an
// integer version there (a JSON number or a numeric string).
func (Verifier) Verify(ep *provider.Endpoint, h http.Header, body []byte, now time.Time) (provider.Event, error) {
	if err := verify(ep, h, body, now); err != nil {
		return provider.Event{}, err
	}
	doc, err := decode(body)
	if err != nil {
		return provider.Event{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	// The version checked here must be the one every later reader of the
	// stored document finds.
	if err := provider.CheckUniqueKeys(body); err != nil {
		return provider.Event{}, err
	}
	out, err := read(&ep.Paths, doc)
	if err != nil {
		return provider.Event{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	out.ID = h.Get(IDHeader)
	out.Payload = body
	if out.Version != nil {
		// Signed is not sane: a sender's bug can pin a projection as surely
		// as a forger. The event comes back with the error, to be kept dead.
		check := provider.CheckPlainVersion(*out.Version)
		if ep.Paths.VersionIsTimeMs {
			check = provider.CheckTimeVersion(ep, *out.Version, now)
		}
		if check != nil {
			return out, fmt.Errorf("version at %q: %w", ep.Paths.Version, check)
		}
	}
	// The specification's payload carries the event's time as "timestamp"
	// (RFC 3339); a missing or unreadable one only leaves it unknown.
	if ts, ok := lookup(doc, "timestamp"); ok {
		if s, ok := ts.(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				out.OccurredAt = t.UTC()
			}
		}
	}
	return out, nil
}

// verify authenticates the delivery against every usable key of the
// endpoint: v1 signatures (HMAC-SHA256, streamed: verifyV1) against its
// whsec_ secrets and v1a signatures (ed25519) against its whpk_ public keys.
// Compatibility with the reference library is tested by signing with it. The header may carry several signatures of both
// kinds, space-separated; one that verifies is enough.
//
// The signature is checked first and the timestamp then (against now, or
// the wall clock for the library's tolerance, as the reference library
// judges it), so a forged delivery is unauthenticated, not stale.
func verify(ep *provider.Endpoint, h http.Header, body []byte, now time.Time) error {
	if h.Get(IDHeader) == "" || h.Get(TimestampHeader) == "" || h.Get(SignatureHeader) == "" {
		return fmt.Errorf("%w: %w", provider.ErrUnauthenticated, swh.ErrRequiredHeaders)
	}
	sec, err := strconv.ParseInt(h.Get(TimestampHeader), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %w", provider.ErrUnauthenticated, swh.ErrInvalidHeaders)
	}
	var verr error = errors.New("no usable secret")
	var signed []byte // "id.timestamp.body" for v1a, built once, only if needed
	ok := false
	for _, secret := range ep.Secrets {
		k, err := parseKey(secret)
		if err != nil {
			continue // a misconfigured or empty key must never verify anything
		}
		if k.public != nil {
			if signed == nil {
				signed = append(fmt.Appendf(nil, "%s.%d.", h.Get(IDHeader), sec), body...)
			}
			err = verifyV1a(k.public, h, signed)
		} else {
			err = verifyV1(k.hmac, h, sec, body)
		}
		if err == nil {
			ok = true
			break
		}
		verr = err
	}
	if !ok {
		return fmt.Errorf("%w: %w", provider.ErrUnauthenticated, verr)
	}
	// The timestamp is judged only once the signature held, so unsigned
	// traffic never counts as a stale signature. With the default
	// tolerance it is the spec's five minutes against the wall clock, as
	// the reference library judges it.
	tolerance, clock := ep.Tolerance, now
	if tolerance <= 0 || tolerance == libraryTolerance {
		tolerance, clock = libraryTolerance, time.Now()
	}
	ts := time.Unix(sec, 0)
	if clock.Sub(ts) > tolerance {
		return fmt.Errorf("%w: %w", provider.ErrStaleSignature, swh.ErrMessageTooOld)
	}
	if ts.After(clock.Add(tolerance)) {
		return fmt.Errorf("%w: %w", provider.ErrStaleSignature, swh.ErrMessageTooNew)
	}
	return nil
}

// verifyV1a reports whether one of the header's v1a signatures is pub's
// ed25519 signature of "{msg_id}.{timestamp}.{payload}", the content the
// specification signs; the timestamp is signed as the integer it reads as,
// as the library signs v1.
func verifyV1a(pub ed25519.PublicKey, h http.Header, msg []byte) error {
	for part := range strings.SplitSeq(h.Get(SignatureHeader), " ") {
		sig, ok := strings.CutPrefix(part, "v1a,")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(raw) != ed25519.SignatureSize {
			continue
		}
		if ed25519.Verify(pub, msg, raw) {
			return nil
		}
	}
	return swh.ErrNoMatchingSignature
}

// verifyV1 checks the v1 signatures of the header (HMAC-SHA256 of
// "id.timestamp.body", base64) against key, streaming the body into the
// HMAC: the reference library formats the signed content into a string and
// then into bytes, two copies of the body per secret tried.
func verifyV1(key []byte, h http.Header, sec int64, body []byte) error {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get(IDHeader)))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, sec, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	for part := range strings.SplitSeq(h.Get(SignatureHeader), " ") {
		sig, ok := strings.CutPrefix(part, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return swh.ErrNoMatchingSignature
}

// read takes the event's fields from doc at the endpoint's paths.
func read(p *provider.Paths, doc map[string]any) (provider.Event, error) {
	var out provider.Event
	typPath := p.EventType
	if typPath == "" {
		typPath = DefaultEventTypePath
	}
	typ, ok := lookup(doc, typPath)
	if s, isStr := typ.(string); !ok || !isStr || s == "" {
		return out, fmt.Errorf("no event type at %q", typPath)
	}
	out.Type = typ.(string)

	if p.ResourceID == "" {
		return out, nil
	}
	rid, ok := lookup(doc, p.ResourceID)
	if !ok || rid == nil {
		return out, nil // an event about no resource, e.g. a ping
	}
	switch x := rid.(type) {
	case string:
		out.ResourceID = x
	case json.Number:
		out.ResourceID = x.String()
	default:
		return out, fmt.Errorf("resource id at %q is a %T", p.ResourceID, rid)
	}
	if out.ResourceID == "" {
		return out, nil
	}

	switch {
	case p.ResourceType != "":
		rt, ok := lookup(doc, p.ResourceType)
		s, isStr := rt.(string)
		if !ok || !isStr || s == "" {
			// Guessing a type would put the event in another resource's sequence.
			return out, fmt.Errorf("no resource type at %q", p.ResourceType)
		}
		out.ResourceType = s
	case p.ResourceTypeValue != "":
		out.ResourceType = p.ResourceTypeValue
	default:
		out.ResourceType = DefaultResourceType
	}

	if p.Version != "" {
		v, ok := lookup(doc, p.Version)
		if !ok {
			return out, fmt.Errorf("no version at %q", p.Version)
		}
		n, err := integer(v)
		if err != nil {
			return out, fmt.Errorf("version at %q: %w", p.Version, err)
		}
		out.Version = &n
	}
	return out, nil
}

// decode reads body as exactly one JSON object, keeping numbers exact.
func decode(body []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errors.New("body is not a JSON object")
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return doc, nil
}

// lookup follows a dot-separated path through objects; a numeric segment
// indexes an array. It reports whether the path exists.
func lookup(doc map[string]any, path string) (any, bool) {
	var cur any = doc
	for seg := range strings.SplitSeq(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// integer reads a JSON number or a numeric string as an int64.
func integer(v any) (int64, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	default:
		return 0, fmt.Errorf("not an integer: %T", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %w", err)
	}
	return n, nil
}

// Sign returns the headers a Standard Webhooks sender puts on body, signed
// with secret ("whsec_" + base64 key). The simulator and tests use it.
func Sign(secret, msgID string, t time.Time, body []byte) (http.Header, error) {
	k, err := parseKey(secret)
	if err != nil && !errors.Is(err, errEmptyKey) {
		return nil, fmt.Errorf("standardwebhooks: the secret %w", err)
	}
	if k.public != nil {
		return nil, fmt.Errorf("standardwebhooks: a %s key verifies, it cannot sign", prefixPublicKey)
	}
	// An empty key signs (tests show it never verifies).
	wh, err := swh.NewWebhookRaw(k.hmac)
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks: %w", err)
	}
	sig, err := wh.Sign(msgID, t, body)
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks: %w", err)
	}
	h := http.Header{}
	h.Set(IDHeader, msgID)
	h.Set(TimestampHeader, strconv.FormatInt(t.Unix(), 10))
	h.Set(SignatureHeader, sig)
	return h, nil
}
