package job

import (
	"fmt"
	"strconv"
)

// ManifestSpan is the number of batches one manifest covers: batch i's
// digest is entry i%ManifestSpan of manifest i/ManifestSpan.
const ManifestSpan = 16

// manifestVersion is the format of a manifest: the version byte, then the
// digests of batches ManifestSpan*chunk, ... in order (at most
// ManifestSpan of them).
const manifestVersion = 1

// Manifest holds the digests of up to ManifestSpan consecutive batches of
// a job: what its producer published.
type Manifest struct {
	Chunk   uint64
	Digests []Digest
}

// ManifestChunk returns the manifest that covers batch index.
func ManifestChunk(index uint64) uint64 { return index / ManifestSpan }

// Lookup returns the digest of batch index, or false when m has none
// for it.
func (m *Manifest) Lookup(index uint64) (Digest, bool) {
	if ManifestChunk(index) != m.Chunk {
		return Digest{}, false
	}
	i := index % ManifestSpan
	if i >= uint64(len(m.Digests)) {
		return Digest{}, false
	}
	return m.Digests[i], true
}

// Has reports whether m lists batch index.
func (m *Manifest) Has(index uint64) bool {
	_, ok := m.Lookup(index)
	return ok
}

// Encode returns the stored form of m.
func (m *Manifest) Encode() []byte {
	b := make([]byte, 0, 1+DigestLen*len(m.Digests))
	b = append(b, manifestVersion)
	for _, d := range m.Digests {
		b = append(b, d[:]...)
	}
	return b
}

// DecodeManifest decodes the manifest chunk from its stored form.
func DecodeManifest(chunk uint64, data []byte) (Manifest, error) {
	m := Manifest{Chunk: chunk}
	if len(data) == 0 || data[0] != manifestVersion {
		return m, &DecodeError{0, "not a manifest of this version"}
	}
	data = data[1:]
	if len(data)%DigestLen != 0 || len(data) > ManifestSpan*DigestLen {
		return m, &DecodeError{1, fmt.Sprintf("manifest of %d bytes", len(data))}
	}
	m.Digests = make([]Digest, len(data)/DigestLen)
	for i := range m.Digests {
		copy(m.Digests[i][:], data[i*DigestLen:])
	}
	return m, nil
}

// ManifestKey is the key of a job's manifest chunk in the jobs bucket:
// "<job>.m.<chunk>".
func ManifestKey(id string, chunk uint64) string {
	return id + ".m." + strconv.FormatUint(chunk, 10)
}
