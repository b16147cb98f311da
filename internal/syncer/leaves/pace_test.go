package leaves

import (
	"testing"
	"time"
)

func TestPaceLetsAnUrgentChangePassPodSyncs(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p pace
	if w := p.wait(t0, true); w != 0 {
		t.Fatalf("first urgent sync waits %v", w)
	}
	p.synced(t0, true)

	// Pod syncs every 100 ms after a quiet minGap.
	at := t0.Add(minGap)
	p.synced(at, false)
	if w := p.wait(at.Add(100*time.Millisecond), false); w != minGap-100*time.Millisecond {
		t.Errorf("a pod sync 100ms after the last sync waits %v, want %v", w, minGap-100*time.Millisecond)
	}
	// A node change right after a pod sync: at once.
	if w := p.wait(at.Add(10*time.Millisecond), true); w != 0 {
		t.Errorf("a node change 10ms after a pod sync waits %v, want 0", w)
	}
	p.synced(at.Add(10*time.Millisecond), true)
	// A second node change in the same burst waits for the gap.
	if w := p.wait(at.Add(20*time.Millisecond), true); w != minGap-10*time.Millisecond {
		t.Errorf("a second node change 10ms after the first waits %v, want %v", w, minGap-10*time.Millisecond)
	}
	// An urgent sync counts against pod syncs too.
	if w := p.wait(at.Add(20*time.Millisecond), false); w != minGap-10*time.Millisecond {
		t.Errorf("a pod sync 10ms after an urgent one waits %v, want %v", w, minGap-10*time.Millisecond)
	}
}
