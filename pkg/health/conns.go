package health

import (
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Reasons a connGuard closes a connection, as ServerConfig.OnClose names them.
const (
	// ClosedPerClient: the client address already holds its share of
	// connections (ServerConfig.ConnsPerClient).
	ClosedPerClient = "per_client"
	// ClosedIdleNearCap: an idle keep-alive connection (or one that opened
	// and sent nothing) closed because the server neared its connection cap.
	ClosedIdleNearCap = "idle_near_cap"
)

// silentGrace is how long a new connection may stay silent before it counts
// as idle: a client that just connected is about to send its request.
const silentGrace = time.Second

// connGuard bounds what clients hold: at most perClient connections per
// remote address (refused at accept, before a byte is read), and once the
// open connections reach highWater, idle ones are closed, oldest first, so
// a cheap request followed by silence cannot keep a slot for the whole idle
// timeout. The cap itself is the LimitListener's below it.
type connGuard struct {
	perClient int
	highWater int
	onClose   func(reason string)

	mu      sync.Mutex
	open    int
	perAddr map[string]int
	// quiet holds connections that are between requests (idle) or new and
	// silent, with the time they became so.
	quiet map[net.Conn]quietConn
}

type quietConn struct {
	since time.Time
	new   bool
}

func newConnGuard(maxConns, perClient int, onClose func(string)) *connGuard {
	if onClose == nil {
		onClose = func(string) {}
	}
	// Room for an eighth of the cap (at least one connection) is kept free
	// by closing idle ones: a new client never waits for an idle timeout.
	high := maxConns - max(1, maxConns/8)
	return &connGuard{perClient: perClient, highWater: max(high, 1), onClose: onClose,
		perAddr: map[string]int{}, quiet: map[net.Conn]quietConn{}}
}

// listener wraps ln; ln must already cap the connections.
func (g *connGuard) listener(ln net.Listener) net.Listener {
	return &guardedListener{Listener: ln, g: g}
}

type guardedListener struct {
	net.Listener
	g *connGuard
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := l.g.admit(c); ok {
			return tc, nil
		}
	}
}

// admit counts c against its address, or closes it when the address holds
// its share already.
func (g *connGuard) admit(c net.Conn) (net.Conn, bool) {
	addr := hostOf(c.RemoteAddr())
	g.mu.Lock()
	if g.perClient > 0 && g.perAddr[addr] >= g.perClient {
		g.mu.Unlock()
		_ = c.Close()
		g.onClose(ClosedPerClient)
		return nil, false
	}
	g.perAddr[addr]++
	g.open++
	victims := g.reapLocked(time.Now())
	g.mu.Unlock()
	g.closeAll(victims)
	return &guardedConn{Conn: c, g: g, addr: addr}, true
}

// state is the http.Server's ConnState hook.
func (g *connGuard) state(c net.Conn, s http.ConnState) {
	now := time.Now()
	var victims []net.Conn
	g.mu.Lock()
	switch s {
	case http.StateNew:
		g.quiet[c] = quietConn{since: now, new: true}
	case http.StateIdle:
		g.quiet[c] = quietConn{since: now}
		victims = g.reapLocked(now)
	case http.StateActive, http.StateHijacked, http.StateClosed:
		delete(g.quiet, c)
	}
	g.mu.Unlock()
	g.closeAll(victims)
}

// reapLocked picks the quiet connections to close while the open ones are
// at or above the high water mark: idle ones oldest first, then new ones
// silent for longer than silentGrace.
func (g *connGuard) reapLocked(now time.Time) []net.Conn {
	excess := g.open - g.highWater + 1
	if excess <= 0 || len(g.quiet) == 0 {
		return nil
	}
	type cand struct {
		c net.Conn
		q quietConn
	}
	var cands []cand
	for c, q := range g.quiet {
		if q.new && now.Sub(q.since) < silentGrace {
			continue
		}
		cands = append(cands, cand{c, q})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].q.new != cands[j].q.new {
			return !cands[i].q.new
		}
		return cands[i].q.since.Before(cands[j].q.since)
	})
	var out []net.Conn
	for _, cd := range cands[:min(excess, len(cands))] {
		delete(g.quiet, cd.c)
		out = append(out, cd.c)
	}
	return out
}

func (g *connGuard) closeAll(cs []net.Conn) {
	for _, c := range cs {
		_ = c.Close()
		g.onClose(ClosedIdleNearCap)
	}
}

type guardedConn struct {
	net.Conn
	g    *connGuard
	addr string
	once sync.Once
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.g.mu.Lock()
		c.g.open--
		if c.g.perAddr[c.addr]--; c.g.perAddr[c.addr] <= 0 {
			delete(c.g.perAddr, c.addr)
		}
		delete(c.g.quiet, c)
		c.g.mu.Unlock()
	})
	return err
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}
