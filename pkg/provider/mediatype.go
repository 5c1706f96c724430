package provider

// MediaTypeAccepter is implemented by adapters whose provider delivers in
// media types other than JSON, e.g. GitHub, whose webhooks default to
// application/x-www-form-urlencoded. Verify must then turn such a body
// into the JSON document the Event's Payload holds, after checking the
// signature over the body exactly as received.
type MediaTypeAccepter interface {
	// AcceptsMediaType reports whether Verify can read a delivery whose
	// Content-Type is mt: lower-case, without parameters, as
	// mime.ParseMediaType returns it.
	AcceptsMediaType(mt string) bool
}

// MediaTypeJSON is the media type every provider accepts.
const MediaTypeJSON = "application/json"

// AcceptsMediaType reports whether v reads deliveries of media type mt:
// its own answer when it is a MediaTypeAccepter, else application/json
// only.
func AcceptsMediaType(v Verifier, mt string) bool {
	if a, ok := v.(MediaTypeAccepter); ok {
		return a.AcceptsMediaType(mt)
	}
	return mt == MediaTypeJSON
}
