package chargebee

import (
	"fmt"
	"net/http"

	"github.com/hookyard/hookyard/pkg/provider"
)

// CheckHeaders implements provider.HeaderChecker. Basic credentials do not
// depend on the body, so they are checked whole here: a caller without
// them never gets its body read.
func (Verifier) CheckHeaders(ep *provider.Endpoint, h http.Header) error {
	user, pass, err := parseBasic(h.Get(AuthorizationHeader))
	if err != nil {
		return fmt.Errorf("%w: %w", provider.ErrUnauthenticated, err)
	}
	if !matchAny(ep.Secrets, user, pass) {
		return fmt.Errorf("%w: credentials do not match", provider.ErrUnauthenticated)
	}
	return nil
}
