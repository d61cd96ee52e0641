package roles

import (
	"fmt"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Principal is a caller of sudoku serve's API with a bearer token of its
// own (serve.token): the owner of the jobs it submits, acting for
// others as a role does when named as one (Of).
type Principal struct {
	// Name is the principal's name, the owner of the jobs it submits (1
	// to 64 letters, digits, '_' or '-': job.CheckOwner); "" is the
	// server's own owner.
	Name string
	// Token is its bearer token.
	Token string
}

// ParseTokens reads the tokens of serve.token: one bare token (its
// principal is the server's own owner), or lines of a principal and its
// token, separated by spaces ("alice 6f1c..."). Blank lines and lines
// starting with '#' are skipped; a line holding a token alone is a token
// of the server's own owner (Name ""). A principal may have several
// tokens (to change one without a gap); a token may appear only once.
// The errors name lines, never a token.
func ParseTokens(text string) ([]Principal, error) {
	if f := strings.Fields(text); len(f) == 1 {
		return []Principal{{Token: f[0]}}, nil
	}
	var out []Principal
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		var p Principal
		switch len(f) {
		case 1:
			p.Token = f[0]
		case 2:
			if err := job.CheckOwner(f[0]); err != nil {
				return nil, fmt.Errorf("line %d: principal: %w", i+1, err)
			}
			p.Name, p.Token = f[0], f[1]
		default:
			return nil, fmt.Errorf("line %d: %d words: want a principal and its token, separated by spaces (or a token alone)", i+1, len(f))
		}
		if first, ok := seen[p.Token]; ok {
			return nil, fmt.Errorf("line %d: the token of line %d again: each token must name one principal", i+1, first)
		}
		seen[p.Token] = i + 1
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no token: only blank and comment lines")
	}
	return out, nil
}
