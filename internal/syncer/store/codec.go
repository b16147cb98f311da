package store

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

// Size limits of an encoded record. A Kubernetes object is limited to about
// 1.5MiB by etcd's default request size (ConfigMaps to 1MiB of data); etcd
// itself to 1.5MiB per request. A hysteresis snapshot is a few KiB; only a
// member with thousands of pending deletes gets near compressAbove.
const (
	// compressAbove: records larger than this are gzip-compressed.
	compressAbove = 64 << 10
	// MaxRecordBytes: the largest encoded record written (ErrTooLarge
	// beyond); well under both backends' limits.
	MaxRecordBytes = 900 << 10
)

var gzipMagic = []byte{0x1f, 0x8b}

// Encode encodes a record: JSON, gzip-compressed when larger than
// compressAbove. compressed says which. ErrTooLarge if the result exceeds
// MaxRecordBytes.
func Encode(st ClusterState) (data []byte, compressed bool, err error) {
	data, err = st.MarshalJSON() // not json.Marshal: its check of the output scans a large record once more
	if err != nil {
		return nil, false, fmt.Errorf("encoding state: %w", err)
	}
	return compress(data)
}

// compress is Encode's second half, for a record already marshalled.
func compress(data []byte) ([]byte, bool, error) {
	if len(data) <= compressAbove {
		return data, false, nil
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write(data); err != nil {
		return nil, false, err
	}
	if err := zw.Close(); err != nil {
		return nil, false, err
	}
	if buf.Len() > MaxRecordBytes {
		return nil, false, fmt.Errorf("%w: %d bytes compressed, limit %d", ErrTooLarge, buf.Len(), MaxRecordBytes)
	}
	return buf.Bytes(), true, nil
}

// Decode decodes what Encode produced (compressed or not, told apart by the
// gzip magic number); errors wrap ErrCorrupt.
func Decode(data []byte) (ClusterState, error) {
	var st ClusterState
	if bytes.HasPrefix(data, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return st, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, 64<<20)); err != nil {
			return st, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	if err := st.UnmarshalJSON(data); err != nil {
		return ClusterState{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return st, nil
}
