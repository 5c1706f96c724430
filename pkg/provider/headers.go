package provider

import "net/http"

// HeaderChecker is implemented by adapters that can refuse a delivery from
// its headers alone, before the receiver reads its body: a request without
// the provider's authentication headers (or, with Basic credentials, with
// wrong ones) then costs no body bytes and no read time. CheckHeaders may
// only refuse, with ErrUnauthenticated, what Verify would refuse as
// unauthenticated too; passing it proves nothing, and Verify still runs.
type HeaderChecker interface {
	CheckHeaders(ep *Endpoint, h http.Header) error
}
