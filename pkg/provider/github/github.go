// Package github is everything hookyard knows about GitHub: it verifies
// webhook deliveries (X-Hub-Signature-256) and reads their identity
// (Verifier); interprets the events of the pull requests and App
// installations an endpoint projects into hints, and records the others
// (Interpret); fetches those resources with a token or the App's JWT and
// installation tokens (Connect); walks a hook's deliveries and asks for
// the failed ones again for the reconciler (Client, Deliveries, Connect);
// and checks its endpoints' github_hook (CheckEndpoint).
//
// It owns signature checking and the choice of the resource an event is
// about. It never writes hookyard's state, which is the processor's. It
// must never decide account or environment from the body: those
// come from the Endpoint alone. GitHub signs no timestamp, so there is no
// staleness check; replays are absorbed by deduplication on the delivery id.
// Only the SHA-256 signature is accepted, never the legacy SHA-1
// X-Hub-Signature. Both of GitHub's content types are read: application/json
// and its default, application/x-www-form-urlencoded (the JSON in the
// form's payload field), always verified over the body as received.
package github

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Headers GitHub sends with every delivery.
const (
	SignatureHeader = "X-Hub-Signature-256"
	DeliveryHeader  = "X-GitHub-Delivery"
	EventHeader     = "X-GitHub-Event"
)

// Verifier is the GitHub adapter.
type Verifier struct{}

// payload is what Verify reads of an event: the action and the ids of what
// it is about. GitHub's ids are integers that never change; names do (a
// repository's full_name on a rename or a transfer, an organization's
// login on a rename).
type payload struct {
	Action       string `json:"action"`
	Repository   object `json:"repository"`
	Organization object `json:"organization"`
	Installation object `json:"installation"`
	PullRequest  struct {
		Number int64 `json:"number"`
	} `json:"pull_request"`
}

type object struct {
	ID int64 `json:"id"`
}

// Verify checks X-Hub-Signature-256 against every secret of the endpoint
// (several during a rotation) and reads the event.
//
// The event id is X-GitHub-Delivery. The type is X-GitHub-Event, suffixed
// with the body's action when there is one ("issues" + "opened" gives
// "issues.opened"), so that allow-lists can name single actions. Events about
// a repository are keyed by its id (repository.id), so that one
// repository's events are handled in sequence under one key and one fence
// whatever it is called: a rename or a transfer changes full_name and keeps
// the id. Otherwise by the organization's id, otherwise by the App
// installation's id; otherwise they are about no resource. An endpoint
// that projects pull requests keys pull_request, pull_request_review and
// pull_request_review_comment events by the pull request
// (PullRequestID), and one that projects installations keys installation,
// installation_repositories and installation_target events by the
// installation. GitHub sends no versions.
func (Verifier) Verify(ep *provider.Endpoint, h http.Header, body []byte, _ time.Time) (provider.Event, error) {
	sig := h.Get(SignatureHeader)
	if sig == "" {
		return provider.Event{}, fmt.Errorf("%w: no %s header", provider.ErrUnauthenticated, SignatureHeader)
	}
	ok := false
	for _, secret := range ep.Secrets {
		if secret == "" {
			continue // anyone can sign with an empty key
		}
		// No early exit, so timing does not tell which secret matched.
		if hmac.Equal([]byte(sig), []byte(Sign(body, secret))) {
			ok = true
		}
	}
	if !ok {
		return provider.Event{}, fmt.Errorf("%w: %s does not match", provider.ErrUnauthenticated, SignatureHeader)
	}

	// The delivery headers are not signed, but they are needed to read the event.
	id, typ := h.Get(DeliveryHeader), h.Get(EventHeader)
	if id == "" || typ == "" {
		return provider.Event{}, fmt.Errorf("%w: no %s or %s header", provider.ErrMalformed, DeliveryHeader, EventHeader)
	}
	body, err := document(h, body)
	if err != nil {
		return provider.Event{}, err
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return provider.Event{}, fmt.Errorf("%w: body is not a JSON object", provider.ErrMalformed)
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return provider.Event{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	// The resource read here keys the event; a duplicate "repository"
	// would let another reader of the stored document see another one.
	if err := provider.CheckUniqueKeys(body); err != nil {
		return provider.Event{}, err
	}
	out := provider.Event{ID: id, Type: typ, Payload: body, ValidJSON: true}
	if p.Action != "" {
		out.Type = typ + "." + p.Action
	}
	switch {
	case installationEvents[typ] && p.Installation.ID != 0 && ep.Projects(Installation, []string{}):
		// Likewise an endpoint that projects installations: an
		// installation's events are hints in one sequence, whatever
		// organization or repository they also name.
		out.ResourceType, out.ResourceID = Installation, strconv.FormatInt(p.Installation.ID, 10)
	case pullEvents[typ] && p.Repository.ID != 0 && p.PullRequest.Number > 0 && ep.Projects(PullRequest, []string{}):
		// Only an endpoint that projects pull requests keys them apart
		// from their repository: its events of one pull request are then
		// hints in one sequence.
		out.ResourceType, out.ResourceID = PullRequest, PullRequestID(p.Repository.ID, p.PullRequest.Number)
	case p.Repository.ID != 0:
		out.ResourceType, out.ResourceID = "repository", strconv.FormatInt(p.Repository.ID, 10)
	case p.Organization.ID != 0:
		out.ResourceType, out.ResourceID = "organization", strconv.FormatInt(p.Organization.ID, 10)
	case p.Installation.ID != 0:
		out.ResourceType, out.ResourceID = "installation", strconv.FormatInt(p.Installation.ID, 10)
	}
	return out, nil
}

// Sign returns the X-Hub-Signature-256 value for body, as GitHub computes it.
// The simulator and tests use it.
func Sign(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
