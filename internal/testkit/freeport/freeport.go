// Package freeport hands out loopback addresses for processes a harness
// starts and that bind their own port later.
//
// The usual way, listening on port 0 and closing, returns a port from the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): until the child
// binds it, any outgoing connection on the machine (a parallel test
// package's Postgres pool) may take it as its source port, and the next
// port-0 listener may be handed the same one. Both happened as a child
// exiting at start with "address already in use". Addr picks below the
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

// lowest is the bottom of the range Addr draws from: above the ports
// services listen on by convention (Postgres 5432, Kafka 9092, the
// product's 8080–8090).
const lowest = 20000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Addr returns "127.0.0.1:PORT" for a port that was free when checked,
// below the ephemeral range and not returned before by this process.
func Addr() (string, error) {
	top := ephemeralLow()
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		port := lowest + rand.IntN(top-lowest)
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
	return "", fmt.Errorf("freeport: no free port in [%d, %d) after 200 tries", lowest, top)
}

// ephemeralLow is the bottom of the kernel's ephemeral range, 32768 (the
// Linux default) where it cannot be read or leaves too little room.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < lowest+1000 {
		return 32768
	}
	return n
}
