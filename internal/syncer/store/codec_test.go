package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

// legacyState is the record as leafsync wrote it before sections
// (99db6b1, when the store imported its clients' types): a downgrade during
// a rolling update decodes what we write with it.
type legacyState struct {
	Hysteresis json.RawMessage         `json:"hysteresis,omitempty"`
	Deletes    []deletes.PendingDelete `json:"deletes,omitempty"`
	Term       uint64                  `json:"term,omitempty"`
	Writer     string                  `json:"writer,omitempty"`
}

func plainJSON(t *testing.T, data []byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func legacyDecode(t *testing.T, data []byte) legacyState {
	t.Helper()
	var st legacyState
	if err := json.Unmarshal(plainJSON(t, data), &st); err != nil {
		t.Fatalf("the old code cannot decode the record: %v", err)
	}
	return st
}

func sameLegacy(a, b legacyState) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// The wire format did not change with sections: records encoded by the
// code before them (testdata, made with its store.Encode) decode to the
// same state, encode back to what the old code decodes to the same state
// (a downgrade), and byte for byte where the record has one section.
func TestWireFormatOfBeforeSections(t *testing.T) {
	files, _ := filepath.Glob("testdata/*")
	if len(files) != 4 {
		t.Fatalf("%d golden records, want 4", len(files))
	}
	for _, f := range files {
		golden, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := legacyDecode(t, golden)
		cs, err := store.Decode(golden)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, err := storetest.Read(cs)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !sameLegacy(legacyState{Hysteresis: got.Hysteresis, Deletes: got.Deletes, Term: got.Term, Writer: got.Writer}, want) {
			t.Errorf("%s decodes to %+v, want %+v", f, got, want)
		}
		data, compressed, err := store.Encode(cs)
		if err != nil {
			t.Fatal(err)
		}
		if compressed != bytes.HasPrefix(golden, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: compressed %v, unlike the old code", f, compressed)
		}
		if back := legacyDecode(t, data); !sameLegacy(back, want) {
			t.Errorf("%s encoded again decodes in the old code to %+v, want %+v", f, back, want)
		}
		if (len(want.Hysteresis) == 0) != (len(want.Deletes) == 0) && !bytes.Equal(plainJSON(t, data), plainJSON(t, golden)) {
			t.Errorf("%s encoded again:\n%s\nwant\n%s", f, plainJSON(t, data), plainJSON(t, golden))
		}
	}
}

// A member's records written before sections (a head in the one-record
// format, its ledger parts) load into a Keeper, which writes them back in
// the same layout.
func TestKeeperLoadsRecordsOfBeforeSections(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	for name, file := range map[string]string{"a": "head-with-deletes.json", "b": "head.json", "b.ledger-1": "ledger-part.json.gz"} {
		golden, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		cs, err := store.Decode(golden)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Put(ctx, name, cs, ""); err != nil {
			t.Fatal(err)
		}
	}
	k := store.NewKeeper(m, testr.New(t), store.KeeperOptions{Writer: "sections"})
	runKeeper(t, k)
	if n, err := k.Preload(ctx); err != nil || n != 2 {
		t.Fatalf("preload: %d clusters, %v", n, err)
	}
	if a := storetest.Memory(k, "a"); len(a.Deletes) != 4 || len(a.Hysteresis) == 0 {
		t.Errorf("a: %d deletes, snapshot %d bytes; want 4 and the snapshot", len(a.Deletes), len(a.Hysteresis))
	}
	if b := storetest.Memory(k, "b"); len(b.Deletes) != 400 || len(b.Hysteresis) == 0 {
		t.Errorf("b: %d deletes, snapshot %d bytes; want 400 and the snapshot", len(b.Deletes), len(b.Hysteresis))
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := getHead(t, m, "a")
	if err != nil || len(head.Deletes) != 0 || head.Writer != "sections" {
		t.Errorf("head of a written back: %d deletes, writer %q (%v); want its deletes moved to a part", len(head.Deletes), head.Writer, err)
	}
	for _, c := range []string{"a", "b"} {
		recs, _ := m.List(ctx, c)
		if len(recs) != 2 {
			t.Errorf("%s: %d records, want the head and one part", c, len(recs))
		}
	}
}
