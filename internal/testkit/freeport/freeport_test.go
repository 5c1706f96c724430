package freeport

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

// TestAddrIsFreeOutsideTheEphemeralRangeAndNeverRepeats: many goroutines
// take addresses at once; each is bindable, outside the kernel's ephemeral
// range, and none is handed out twice.
func TestAddrIsFreeOutsideTheEphemeralRangeAndNeverRepeats(t *testing.T) {
	const n = 400
	var wg sync.WaitGroup
	addrs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { addrs[i], errs[i] = Addr() })
	}
	wg.Wait()
	elo, ehi := readEphemeral()
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
		if port >= elo && port <= ehi {
			t.Fatalf("%s inside the ephemeral range [%d, %d]", a, elo, ehi)
		}
	}
	ln, err := net.Listen("tcp", addrs[0])
	if err != nil {
		t.Fatalf("first address not bindable: %v", err)
	}
	ln.Close()
}

// TestAddrSkipsABoundPort: a port something listens on is never returned.
// The test holds ports of a range below the one Addr draws from, so the
// harnesses of test packages running beside it never meet them.
func TestAddrSkipsABoundPort(t *testing.T) {
	const lo, hi = 15000, 15100
	mu.Lock()
	for p := lo; p < hi; p++ {
		delete(handed, p) // an earlier run of this test (-count) drew them
	}
	mu.Unlock()
	bound := map[string]bool{}
	for p := lo; p < hi-10; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		defer ln.Close()
		bound[ln.Addr().String()] = true
	}
	for range 5 {
		a, err := addrIn(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		if bound[a] {
			t.Fatalf("addrIn returned %s, which is bound", a)
		}
	}
}

// The range drawn from is below the ephemeral one when there is room
// there, above it when only there is, and never inside it.
func TestRangeStaysOutsideTheEphemeralRange(t *testing.T) {
	for _, c := range []struct{ elo, ehi, lo, hi int }{
		{32768, 60999, lowest, 32768}, // Linux's default
		{49152, 65535, lowest, 49152}, // IANA's, the BSDs'
		{1024, 40000, 40001, 65536},   // a widened range: above it
		{1024, 65000, lowest, 32768},  // no room either side
	} {
		lo, hi := outsideEphemeral(c.elo, c.ehi)
		if lo != c.lo || hi != c.hi {
			t.Errorf("ephemeral [%d, %d]: drew from [%d, %d), want [%d, %d)", c.elo, c.ehi, lo, hi, c.lo, c.hi)
		}
	}
}
