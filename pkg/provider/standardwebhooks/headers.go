package standardwebhooks

import (
	"fmt"
	"net/http"

	swh "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookyard/hookyard/pkg/provider"
)

// CheckHeaders implements provider.HeaderChecker: a delivery needs the
// three headers the specification requires.
func (Verifier) CheckHeaders(_ *provider.Endpoint, h http.Header) error {
	if h.Get(IDHeader) == "" || h.Get(TimestampHeader) == "" || h.Get(SignatureHeader) == "" {
		return fmt.Errorf("%w: %w", provider.ErrUnauthenticated, swh.ErrRequiredHeaders)
	}
	return nil
}
