package stripe

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookyard/hookyard/pkg/provider"
)

// signature is a parsed Stripe-Signature header: "t=<unix>,v1=<hex>[,v1=...]"
// (https://docs.stripe.com/webhooks#verify-manually).
type signature struct {
	at time.Time
}

// parseSignature reads the header's timestamp and checks that it names
// exactly one and at least one v1 signature. Two t= elements are refused:
// checks that read different ones (the future-timestamp check here, the
// signature check in stripe-go) would judge two different timestamps.
func parseSignature(header string) (signature, error) {
	var sig signature
	ts, v1 := 0, 0
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts++
			sec, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return sig, fmt.Errorf("%w: %s timestamp is not a number", provider.ErrUnauthenticated, SignatureHeader)
			}
			sig.at = time.Unix(sec, 0)
		case "v1":
			v1++
		}
	}
	switch {
	case ts == 0:
		return sig, fmt.Errorf("%w: no timestamp in %s", provider.ErrUnauthenticated, SignatureHeader)
	case ts > 1:
		return sig, fmt.Errorf("%w: %d timestamps in %s", provider.ErrUnauthenticated, ts, SignatureHeader)
	case v1 == 0:
		return sig, fmt.Errorf("%w: no v1 signature in %s", provider.ErrUnauthenticated, SignatureHeader)
	}
	return sig, nil
}

// CheckHeaders implements provider.HeaderChecker: a delivery needs one
// well-formed Stripe-Signature.
func (Verifier) CheckHeaders(_ *provider.Endpoint, h http.Header) error {
	sig := h.Get(SignatureHeader)
	if sig == "" {
		return fmt.Errorf("%w: no %s header", provider.ErrUnauthenticated, SignatureHeader)
	}
	_, err := parseSignature(sig)
	return err
}
