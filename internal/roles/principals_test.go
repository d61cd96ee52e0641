package roles

import (
	"slices"
	"strings"
	"testing"
)

// TestParseTokens reads serve.token's forms.
func TestParseTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []Principal
		err  string
	}{
		{"s3cret", []Principal{{Token: "s3cret"}}, ""},
		{"  s3cret\n", []Principal{{Token: "s3cret"}}, ""},
		{"#s3cret", []Principal{{Token: "#s3cret"}}, ""}, // one token, whatever it starts with
		{"alice tok-a\n\n# bob's, new\nbob  tok-b\n\ttok-own\nalice tok-a2\n",
			[]Principal{{"alice", "tok-a"}, {"bob", "tok-b"}, {"", "tok-own"}, {"alice", "tok-a2"}}, ""},
		{"alice tok-a\r\nbob tok-b\r\n", []Principal{{"alice", "tok-a"}, {"bob", "tok-b"}}, ""},
		{"alice tok-a\nbob tok-a\n", nil, "line 2: the token of line 1 again"},
		{"alice tok-a\nbob tok-b extra\n", nil, "line 2: 3 words"},
		{"al%ice tok-a\nbob tok-b\n", nil, `line 1: principal: owner "al%ice"`},
		{"# only\n\n# comments\n", nil, "no token"},
	} {
		got, err := ParseTokens(tc.text)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseTokens(%q): %v, want an error saying %q", tc.text, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("ParseTokens(%q) = %v, %v; want %v", tc.text, got, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "tok-") {
			t.Errorf("ParseTokens(%q): the error %q shows a token", tc.text, err)
		}
	}
}
