package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

// Callers. Every /v1 request is made for a caller, a principal: the
// owner of the jobs it submits (producer.Options.Owner), and the only one
// besides the roles that act for others (producer.MayTouch) who may read,
// follow or cancel them. The caller is:
//
//   - the principal whose bearer token the request carries, when the
//     server has tokens (Options.Token, whose principal is the server's
//     own owner, Options.Producer.Owner; Options.Principals);
//   - without any token, the server's own owner, or the owner the
//     request names in its X-Sudoku-Owner header when Options.OwnerHeader
//     lets it (a name, not a proof: for a server on loopback, or behind a
//     proxy that sets the header itself).
//
// A principal whose name is a role's, or starts with one and '-'
// (roles.Of), acts for others as that role does: admin and gateway read
// and cancel any job, reader reads any and lists every owner's.

// Principal is a caller of the API with a bearer token of its own
// (roles.Principal): Name "" is the server's own owner
// (Options.Producer.Owner).
type Principal = roles.Principal

// OwnerHeader is the header in which a request to a server without tokens
// may name its owner, when Options.OwnerHeader lets it.
const OwnerHeader = "X-Sudoku-Owner"

// ParseTokens reads the tokens of serve.token (roles.ParseTokens).
func ParseTokens(text string) ([]Principal, error) { return roles.ParseTokens(text) }

// callers says who makes each request: the principals by the SHA-256 of
// their tokens (a map lookup of a digest tells nothing of the token),
// and the server's own owner.
type callers struct {
	tokens map[[sha256.Size]byte]string
	own    string
	header bool
}

// newCallers returns the callers of opts.
func newCallers(opts *Options) (*callers, error) {
	c := &callers{tokens: map[[sha256.Size]byte]string{}, own: opts.Producer.Owner, header: opts.OwnerHeader}
	if c.own == "" {
		c.own = job.DefaultOwner
	}
	if err := job.CheckOwner(c.own); err != nil {
		return nil, fmt.Errorf("the server's own owner (Producer.Owner): %w", err)
	}
	ps := opts.Principals
	if opts.Token != "" {
		ps = append([]Principal{{Token: opts.Token}}, ps...)
	}
	for _, p := range ps {
		name := p.Name
		if name == "" {
			name = c.own
		}
		if err := job.CheckOwner(name); err != nil {
			return nil, fmt.Errorf("principal: %w", err)
		}
		if p.Token == "" {
			return nil, fmt.Errorf("principal %s: no token", name)
		}
		h := sha256.Sum256([]byte(p.Token))
		if other, ok := c.tokens[h]; ok && other != name {
			return nil, fmt.Errorf("principals %s and %s have the same token", other, name)
		}
		c.tokens[h] = name
	}
	return c, nil
}

// open reports whether the server has no token: any request is served.
func (c *callers) open() bool { return len(c.tokens) == 0 }

// of returns the caller of a /v1 request, or the error that refuses it:
// 401 without the right token, 400 for an X-Sudoku-Owner header the
// server does not take or that is not a name.
func (c *callers) of(r *http.Request) (string, *Error) {
	named := r.Header.Get(OwnerHeader)
	if !c.open() {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name, found := c.tokens[sha256.Sum256([]byte(strings.TrimSpace(got)))]
		if !ok || !found {
			return "", errorf(http.StatusUnauthorized, CodeUnauthorized,
				"missing or wrong bearer token: send the header Authorization: Bearer TOKEN (serve.token)")
		}
		if named != "" {
			return "", errorf(http.StatusBadRequest, CodeBadRequest,
				"the %s header is not taken with a token: the token names the caller (%s)", OwnerHeader, name)
		}
		return name, nil
	}
	if named == "" {
		return c.own, nil
	}
	if !c.header {
		return "", errorf(http.StatusBadRequest, CodeBadRequest,
			"the %s header is not taken by this server (roles on: the caller is the server's own owner, %s)", OwnerHeader, c.own)
	}
	if err := job.CheckOwner(named); err != nil {
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "%s: %v", OwnerHeader, err)
	}
	return named, nil
}

// callerKey keys the caller of a request in its context.
type callerKey struct{}

// withCaller returns r with its caller.
func withCaller(r *http.Request, caller string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, caller))
}

// callerOf returns the caller of r, set by the route's handler.
func callerOf(r *http.Request) string {
	c, _ := r.Context().Value(callerKey{}).(string)
	return c
}

// listOwner returns the owner whose jobs caller lists: its own, or every
// owner's ("") when its role reads others' jobs.
func listOwner(caller string) string {
	if r, ok := roles.Of(caller); ok && r.ActsForOthers() {
		return ""
	}
	return caller
}
