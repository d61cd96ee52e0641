package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
)

// The guards of every request, before its token is checked: the Host it
// names (against DNS rebinding: a page of another site whose name was
// made to point at this server, which the browser takes for that site's
// own) and, for a request that may change something (POST and every
// method but GET, HEAD and OPTIONS), the Origin of the page that sent it
// (against cross-site requests, which a browser sends with its user's
// access to this server: a form of any site posting to 127.0.0.1).
//
// A Host is answered when it names this server as the client reached
// it: the address of the connection's own end (on loopback, also as
// localhost, 127.0.0.1 and [::1] with its port), Options.Addr, or one of
// Options.AllowedHosts. A request that may change something is refused
// when a browser says it comes from another origin (Sec-Fetch-Site, else
// an Origin whose host is not the Host) not in Options.AllowedOrigins;
// clients other than browsers send neither header and are not refused.

// hostGuard says which Host header values the server answers.
type hostGuard struct {
	any bool
	// hosts are the allowed hosts with a port ("name:port", lower case,
	// IPv6 without brackets: net.JoinHostPort's form); names those
	// allowed on any port.
	hosts map[string]bool
	names map[string]bool
}

// newHostGuard returns the guard of Options.Addr and AllowedHosts.
func newHostGuard(addr string, allowed []string) (*hostGuard, error) {
	g := &hostGuard{hosts: map[string]bool{}, names: map[string]bool{}}
	if h, p, err := net.SplitHostPort(addr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			g.hosts[net.JoinHostPort(normalHost(h), p)] = true
		}
	}
	for _, a := range allowed {
		if err := CheckAllowedHost(a); err != nil {
			return nil, err
		}
		switch h, p, err := net.SplitHostPort(a); {
		case a == "*":
			g.any = true
		case err == nil:
			g.hosts[net.JoinHostPort(normalHost(h), p)] = true
		default:
			g.names[normalHost(a)] = true
		}
	}
	return g, nil
}

// CheckAllowedHost returns an error when h cannot be an entry of
// serve.allowed_hosts (config.CheckAllowedHost).
func CheckAllowedHost(h string) error { return config.CheckAllowedHost(h) }

// normalHost returns a host in the form the guard compares: lower case,
// without IPv6 brackets or a final dot.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// allowed reports whether the Host of r is one this server answers.
func (g *hostGuard) allowed(r *http.Request) bool {
	if g.any || r.Host == "" {
		// No browser sends a request without a Host (HTTP/1.0 probes do).
		return true
	}
	name, port := r.Host, "80"
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		name, port = h, p
	}
	name = normalHost(name)
	if g.names[name] || g.hosts[net.JoinHostPort(name, port)] {
		return true
	}
	// The connection's own end: the address the client reached.
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok || local == nil || port != fmt.Sprint(local.Port) {
		return false
	}
	if ip := net.ParseIP(name); ip != nil {
		return ip.Equal(local.IP) || local.IP.IsLoopback() && ip.IsLoopback()
	}
	return local.IP.IsLoopback() && name == "localhost"
}

// originGuard refuses the cross-origin requests that may change
// something, from origins not allowed.
type originGuard struct {
	any bool
	cop *http.CrossOriginProtection
}

// newOriginGuard returns the guard of Options.AllowedOrigins.
func newOriginGuard(allowed []string) (*originGuard, error) {
	g := &originGuard{cop: http.NewCrossOriginProtection()}
	for _, o := range allowed {
		if err := config.CheckAllowedOrigin(o); err != nil {
			return nil, err
		}
		if o == "*" {
			g.any = true
			continue
		}
		_ = g.cop.AddTrustedOrigin(o) // checked above
	}
	return g, nil
}

// CheckAllowedOrigin returns an error when o cannot be an entry of
// serve.allowed_origins (config.CheckAllowedOrigin).
func CheckAllowedOrigin(o string) error { return config.CheckAllowedOrigin(o) }

// check returns the 403 for a request from a browser page of another
// origin that may change something, else nil.
func (g *originGuard) check(r *http.Request) *Error {
	if g.any {
		return nil
	}
	if err := g.cop.Check(r); err != nil {
		origin := r.Header.Get("Origin")
		if origin == "" {
			origin = "(none; Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
		}
		return errorf(http.StatusForbidden, CodeCrossOrigin,
			"cross-origin request refused: %s %s from the origin %s, which is not this server's (http://%s) nor one of serve.allowed_origins",
			r.Method, r.URL.Path, origin, r.Host)
	}
	return nil
}

// guard returns the 403 for a request whose Host this server does not
// answer (unless hostFree) or a cross-origin request that may change
// something, else nil.
func (s *Server) guard(r *http.Request, hostFree bool) *Error {
	if !hostFree && !s.hosts.allowed(r) {
		return errorf(http.StatusForbidden, CodeHostNotAllowed,
			"the Host %q is not one this server answers to: use the address it listens on, or add the name to serve.allowed_hosts", r.Host)
	}
	return s.origins.check(r)
}

// guarded returns h behind the Host check.
func (s *Server) guarded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := s.guard(r, false); e != nil {
			e.write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ErrNoToken is the reason Serve and CheckExposed refuse an address other
// than loopback without a token.
var ErrNoToken = errors.New("no token is set (serve.token): anyone who can reach the address could submit, read and cancel jobs")

// CheckExposed returns an error wrapping ErrNoToken when the API would
// listen on addr (host:port), an address other than loopback, without a
// token and without allowNoToken; the message says how to go on. A host
// name counts as loopback when it is localhost or every address it
// resolves to is loopback; an empty host or a wildcard is not.
func CheckExposed(ctx context.Context, addr string, token string, allowNoToken bool) error {
	if token != "" || allowNoToken || loopbackAddr(ctx, addr) {
		return nil
	}
	return exposedError(addr)
}

// exposedError is CheckExposed's error for addr.
func exposedError(addr string) error {
	return fmt.Errorf("listen on %s, which is not a loopback address: %w; set a token ($SUDOKU_SERVE_TOKEN or serve.token_file), "+
		"listen on 127.0.0.1, or serve without a token on purpose (behind a proxy that checks who calls, say) with "+
		"--insecure-no-token (serve.allow_no_token: true)", addr, ErrNoToken)
}

// loopbackAddr reports whether the host of addr is loopback only.
func loopbackAddr(ctx context.Context, addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	return !slices.ContainsFunc(ips, func(ip net.IPAddr) bool { return !ip.IP.IsLoopback() })
}

// listenerLoopback reports whether ln listens on a loopback address only.
func listenerLoopback(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
