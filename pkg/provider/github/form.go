package github

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"github.com/hookyard/hookyard/pkg/provider"
)

// mediaTypeForm is the content type GitHub gives a new webhook unless told
// otherwise: "application/x-www-form-urlencoded will send the JSON payload
// as a form parameter called payload"
// (https://docs.github.com/en/webhooks/using-webhooks/creating-webhooks).
const mediaTypeForm = "application/x-www-form-urlencoded"

// AcceptsMediaType implements provider.MediaTypeAccepter: a GitHub webhook
// delivers either of its two content types, JSON or, by default, a form.
func (Verifier) AcceptsMediaType(mt string) bool {
	return mt == provider.MediaTypeJSON || mt == mediaTypeForm
}

// document returns the JSON document a verified delivery carries: the body
// itself, or, for a form delivery, its payload field. It must only be
// called once the signature has been checked over body: GitHub signs the
// form as sent, never the JSON inside it, and re-encoding the form would
// not give back the signed bytes.
func document(h http.Header, body []byte) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != mediaTypeForm {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %w", provider.ErrMalformed, err)
	}
	payload := form["payload"]
	if len(payload) != 1 {
		// Two payloads would leave the choice of the event to the reader.
		return nil, fmt.Errorf("%w: form body has %d payload fields, want 1", provider.ErrMalformed, len(payload))
	}
	return []byte(payload[0]), nil
}
