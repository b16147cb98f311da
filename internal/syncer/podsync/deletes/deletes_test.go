package deletes

import (
	"fmt"
	"testing"
	"time"
)

func TestMerge(t *testing.T) {
	d := func(name string, kind DeleteKind) PendingDelete {
		return PendingDelete{Kind: kind, Namespace: "ns", Name: name, HostUID: "uid-" + name, Since: time.Unix(1, 0)}
	}
	show := func(ds []PendingDelete) string {
		var s []string
		for _, x := range ds {
			s = append(s, x.Name+":"+string(x.Kind))
		}
		return fmt.Sprint(s)
	}
	for _, tc := range []struct {
		name               string
		base, theirs, mine []PendingDelete
		want               string
	}{
		{"theirs added, executed and changed; mine unchanged",
			[]PendingDelete{d("a", Owed), d("b", Deferred)},
			[]PendingDelete{d("b", Owed), d("c", Owed)},
			[]PendingDelete{d("a", Owed), d("b", Deferred)},
			"[b:Owed c:Owed]"},
		{"mine changed or added wins over theirs",
			[]PendingDelete{d("a", Deferred)},
			[]PendingDelete{d("a", Retained)},
			[]PendingDelete{d("a", Owed), d("m", Owed)},
			"[a:Owed m:Owed]"},
		{"mine executed, theirs untouched: gone",
			[]PendingDelete{d("a", Owed)},
			[]PendingDelete{d("a", Owed)},
			nil,
			"[]"},
		{"never read (empty base): both kept",
			nil,
			[]PendingDelete{d("saved", Owed)},
			[]PendingDelete{d("early", Owed)},
			"[early:Owed saved:Owed]"},
	} {
		if got := show(Merge(tc.base, tc.theirs, tc.mine)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
