package github

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// A signed GitHub document (JSON or a form's payload) whose keys readers
// can take for one ("repository" twice picks another resource's key) is
// kept dead as malformed.
func TestGitHubDeliveryWithDuplicateKeysIsMalformed(t *testing.T) {
	t.Parallel()
	doc := `{"action":"opened","repository":{"id":1},"Repository":{"id":2}}`
	_, err := Verifier{}.Verify(endpoint(), headers(Sign([]byte(doc), secret), "issues"), []byte(doc), time.Now())
	require.ErrorIs(t, err, provider.ErrMalformed)

	form := []byte("payload=" + url.QueryEscape(doc))
	h := headers(Sign(form, secret), "issues")
	h.Set("Content-Type", mediaTypeForm)
	_, err = Verifier{}.Verify(endpoint(), h, form, time.Now())
	require.ErrorIs(t, err, provider.ErrMalformed)
}
