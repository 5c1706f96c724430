// Package receiptsim is the server that receives receipts in tests and in
// the chaos harness: it stands in for RECEIPT_WEBHOOK_URL and enforces the
// Idempotency-Key header the way a standard server does, so that a sender
// which relies on a lenient server fails here instead of in production.
//
// It follows draft-ietf-httpapi-idempotency-key-header (section 2.6, "Error
// Scenarios", and 2.5, "Idempotency Enforcement") and Stripe's idempotent
// requests, the inconvenient parts first:
//
//   - a request whose key is still being processed is answered 409 Conflict
//     (Stripe's idempotency_key_in_use): it says nothing about how the
//     original request will end;
//   - a key reused with another body (another fingerprint) is answered 422
//     Unprocessable Content, whatever became of the original request;
//   - a request whose key has completed is answered with the stored response
//     (status and headers), marked Idempotent-Replayed: true as Stripe does;
//   - a request without the header is answered 400 Bad Request.
//
// Only a 2xx is stored. A failed processing (any other answer) keeps
// nothing and frees the key for a retry, like a server that rolls its work
// back (or crashes) before it commits; the draft leaves failed requests to
// the server.
//
// It must never answer a repeated key with a fresh success: a sender that
// sends one receipt twice must be seen doing it.
package receiptsim

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"sync"
	"time"
)

// MaxBody caps the body read; a larger one is answered 413.
const MaxBody = 1 << 20

// Request is one request the server saw.
type Request struct {
	// Key is its Idempotency-Key.
	Key string
	// N is the how-manieth request of Key, from 1.
	N int
	// Attempt is its Hookyard-Attempt header ("" if none).
	Attempt string
	Body    []byte
	// At is when it arrived.
	At time.Time
	// Code is what it was answered (0 while it is processed).
	Code int
	// Replayed: Code is the stored answer of a completed key.
	Replayed bool
}

// Process does the work a key protects, for a request the idempotency layer
// let through (the first of its key, or a retry after a failed one). It may
// block (a slow server; ctx ends when the client gives up, but the work need
// not stop with it), may set response headers in h, and returns the status
// to answer. A 2xx is stored for the key.
type Process func(ctx context.Context, r Request, h http.Header) int

// entry is a key's state: in progress until done.
type entry struct {
	fingerprint [32]byte
	done        bool
	code        int
	header      http.Header
	completedAt time.Time
}

// Server is an http.Handler receiving receipts.
type Server struct {
	process Process

	mu          sync.Mutex
	keys        map[string]*entry
	reqs        []*Request
	perKey      map[string]int
	inFlight    map[string]int
	maxInFlight int
}

// New returns a server whose work is process; nil answers every new key 200.
func New(process Process) *Server {
	if process == nil {
		process = func(context.Context, Request, http.Header) int { return http.StatusOK }
	}
	return &Server{process: process, keys: map[string]*entry{}, perKey: map[string]int{}, inFlight: map[string]int{}}
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBody+1))
	if err != nil {
		return // the client went away mid-body: nothing arrived
	}
	if len(body) > MaxBody {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	key := req.Header.Get("Idempotency-Key")
	if key == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	fp := sha256.Sum256(body)

	s.mu.Lock()
	s.perKey[key]++
	r := &Request{Key: key, N: s.perKey[key], Attempt: req.Header.Get("Hookyard-Attempt"), Body: body, At: time.Now()}
	s.reqs = append(s.reqs, r)
	s.inFlight[key]++
	s.maxInFlight = max(s.maxInFlight, s.inFlight[key])
	e := s.keys[key]
	var code int
	switch {
	case e != nil && e.fingerprint != fp:
		code = http.StatusUnprocessableEntity
	case e != nil && e.done:
		code, r.Replayed = e.code, true
		for k, v := range e.header {
			w.Header()[k] = v
		}
		w.Header().Set("Idempotent-Replayed", "true")
	case e != nil:
		code = http.StatusConflict
	default:
		e = &entry{fingerprint: fp}
		s.keys[key] = e
	}
	snapshot := *r
	s.mu.Unlock()

	if code == 0 {
		code = s.process(req.Context(), snapshot, w.Header())
		s.mu.Lock()
		if code >= 200 && code < 300 {
			e.done, e.code, e.header, e.completedAt = true, code, w.Header().Clone(), time.Now()
		} else {
			delete(s.keys, key)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	r.Code = code
	s.inFlight[key]--
	s.mu.Unlock()
	w.WriteHeader(code)
}

// Requests returns every request so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// Keys counts the requests of each key.
func (s *Server) Keys() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.perKey))
	for k, n := range s.perKey {
		out[k] = n
	}
	return out
}

// Completed returns the keys whose work completed (a 2xx is stored) and
// when.
func (s *Server) Completed() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for k, e := range s.keys {
		if e.done {
			out[k] = e.completedAt
		}
	}
	return out
}

// MaxInFlight is the most requests of one key the server held at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}
