package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// errPublicListen: `hookyard dev` was asked to listen beyond loopback
// without -listen-public.
var errPublicListen = errors.New("dev listens on loopback only (pass -listen-public if this is meant)")

// checkDevListen refuses, unless public, any of addrs (variable name →
// host:port) whose host is not loopback. dev runs on the dev ops token
// and the example config's dev secrets, which anyone who can reach it
// knows: an empty host or 0.0.0.0 would offer them to the network. A
// host name other than localhost is refused too: what it resolves to is
// not ours to trust.
func checkDevListen(public bool, addrs map[string]string) error {
	if public {
		return nil
	}
	var errs []error
	names := make([]string, 0, len(addrs))
	for name := range addrs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !loopbackAddr(addrs[name]) {
			errs = append(errs, fmt.Errorf("%w: %s=%s", errPublicListen, name, addrs[name]))
		}
	}
	return errors.Join(errs...)
}

func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// loopbackOnly answers 403 to every peer that is not on loopback. The
// simulators stand in for providers' APIs and have no authentication:
// whatever address dev listens on, they serve this machine only.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ip, err := netip.ParseAddrPort(r.RemoteAddr); err != nil || !ip.Addr().Unmap().IsLoopback() {
			http.Error(w, "the dev simulators answer loopback only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
