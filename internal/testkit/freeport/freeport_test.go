package freeport

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

// TestAddrIsFreeBelowTheEphemeralRangeAndNeverRepeats: many goroutines
// take addresses at once; each is bindable, below the kernel's ephemeral
// range, and none is handed out twice.
func TestAddrIsFreeBelowTheEphemeralRangeAndNeverRepeats(t *testing.T) {
	const n = 400
	var wg sync.WaitGroup
	addrs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { addrs[i], errs[i] = Addr() })
	}
	wg.Wait()
	top := ephemeralLow()
	seen := map[string]bool{}
	for i, a := range addrs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		_, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		if port < lowest || port >= top {
			t.Fatalf("%s outside [%d, %d)", a, lowest, top)
		}
	}
	ln, err := net.Listen("tcp", addrs[0])
	if err != nil {
		t.Fatalf("first address not bindable: %v", err)
	}
	ln.Close()
}

// TestAddrSkipsABoundPort: a port something listens on is never returned.
func TestAddrSkipsABoundPort(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	// Bind a block of the range; Addr must avoid every one of them.
	bound := map[string]bool{}
	for p := lowest; p < lowest+2000; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held = append(held, ln)
		bound[ln.Addr().String()] = true
	}
	for range 300 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if bound[a] {
			t.Fatalf("Addr returned %s, which is bound", a)
		}
	}
}
