// Package freeport hands out loopback addresses for processes a harness
// starts and that bind their own port later.
//
// The usual way, listening on port 0 and closing, returns a port from the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): until the child
// binds it, any outgoing connection on the machine (a parallel test
// package's Postgres pool) may take it as its source port, and the next
// port-0 listener may be handed the same one. Both happened as a child
// exiting at start with "address already in use". Addr picks outside the
// ephemeral range instead, where the kernel never assigns ports on its
// own, and never the same port twice in one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the bottom of the ports Addr draws from: above the ports
// services listen on by convention (Postgres 5432, Kafka 9092, the
// product's 8080–8090).
const lowest = 20000

// minSpan is the fewest ports a range outside the ephemeral one must hold
// for Addr to draw from it.
const minSpan = 1000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Addr returns "127.0.0.1:PORT" for a port that was free when checked,
// outside the kernel's ephemeral range and not returned before by this
// process.
func Addr() (string, error) {
	lo, hi := outsideEphemeral(readEphemeral())
	return addrIn(lo, hi)
}

// addrIn is Addr drawing from [lo, hi).
func addrIn(lo, hi int) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if handed[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken by something long-lived
		}
		ln.Close()
		handed[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("freeport: no free port in [%d, %d) after 200 tries", lo, hi)
}

// outsideEphemeral is the range Addr draws from for the ephemeral range
// [elo, ehi]: below it from lowest, or above it when that leaves more
// room; [lowest, 32768) (below Linux's default range) when neither side
// holds minSpan ports.
func outsideEphemeral(elo, ehi int) (lo, hi int) {
	below, above := elo-lowest, 65535-ehi
	switch {
	case below >= minSpan && below >= above:
		return lowest, elo
	case above >= minSpan:
		return ehi + 1, 65536
	}
	return lowest, 32768
}

// readEphemeral is the kernel's ephemeral range, Linux's default
// [32768, 60999] where it cannot be read.
func readEphemeral() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}
