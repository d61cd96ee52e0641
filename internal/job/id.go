package job

import (
	"cmp"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// A job's id names its owner: "<owner>.<serial>", where the serial is 26
// characters of lower-case base32hex, sortable by creation time (the first
// 48 bits are Unix milliseconds) and unique (80 random bits). The owner
// is a subject token of its own in every subject and key of the job
// (internal/queue), so that NATS permissions can give each owner its own
// jobs and nobody else's.

// MaxOwner is the longest owner name, in bytes.
const MaxOwner = 64

// serialLen is the length of the serial NewID makes.
const serialLen = 26

// DefaultOwner owns the jobs of a client that names no owner: no NATS
// user, no tenant setting.
const DefaultOwner = "anonymous"

// CheckOwner returns an error unless owner can own jobs: 1 to MaxOwner
// letters, digits, '_' or '-' (a NATS user name of internal/roles, or a
// tenant's name).
func CheckOwner(owner string) error {
	if owner == "" || len(owner) > MaxOwner {
		return fmt.Errorf("owner %q: want 1 to %d letters, digits, '_' or '-'", owner, MaxOwner)
	}
	for _, c := range owner {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("owner %q: only letters, digits, '_' and '-' are allowed", owner)
		}
	}
	return nil
}

// NewID returns a new id of a job of owner, which must pass CheckOwner.
func NewID(owner string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return owner + "." + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// SplitID returns the owner and the serial of job id, and whether id is
// a job id at all (ValidID).
func SplitID(id string) (owner, serial string, ok bool) {
	owner, serial, ok = strings.Cut(id, ".")
	if !ok || len(id) > MaxJobID || CheckOwner(owner) != nil || !validSerial(serial) {
		return "", "", false
	}
	return owner, serial, true
}

// OwnerOf returns the owner of job id ("" when id is not a job id).
func OwnerOf(id string) string {
	owner, _, _ := SplitID(id)
	return owner
}

// ValidID reports whether id can be a job id: "<owner>.<serial>", the
// owner as CheckOwner wants it, the serial 1 to 32 lower-case base32hex
// characters (NewID's are 26). Anything else is refused before it
// reaches a subject or key.
func ValidID(id string) bool {
	_, _, ok := SplitID(id)
	return ok
}

// IDForm says what a job id looks like, for error messages.
const IDForm = "a job id is its owner's name, a dot and up to 32 letters a-v and digits, as submit returns it"

// validSerial reports whether s can be the serial of a job id.
func validSerial(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return !('0' <= r && r <= '9' || 'a' <= r && r <= 'v') }) < 0
}

// IDTime returns the creation time NewID put into id, to the millisecond.
func IDTime(id string) (time.Time, error) {
	_, serial, ok := SplitID(id)
	var b []byte
	var err error
	if ok {
		b, err = base32.HexEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(serial))
	}
	if !ok || err != nil || len(b) != 16 {
		return time.Time{}, fmt.Errorf("job: %q is not a job id", id)
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:8]) >> 16)), nil
}

// CompareIDs orders job ids by creation time (their serials), then by
// owner: -1, 0 or +1 as a sorts before, with or after b.
func CompareIDs(a, b string) int {
	ao, as, _ := strings.Cut(a, ".")
	bo, bs, _ := strings.Cut(b, ".")
	return cmp.Or(strings.Compare(as, bs), strings.Compare(ao, bo))
}
